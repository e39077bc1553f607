"""`pb_utils` in a process the model forked (a `multiprocessing.Pool` making BLS calls), as
Triton's Python backend allows.

A forked child cannot use the worker's channel: the worker's reader would take the answers, and
the rings belong to the worker. So at every fork the worker makes a socketpair. The child
installs a host of its own on its end, with a reader thread of its own. A relay thread in the
worker reads the child's calls and passes each one on through the worker's own host under an
id of the worker's, copying every answer back under the child's id until the last. Logs pass
straight through. Tensors cross the pair inline or through files of their own, never the
rings. When the child exits, its end closes and the relay ends with it. The child takes back
the default handling of SIGTERM and SIGINT, which the worker ignores.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

from . import ipc
from .pb_utils import _host
from .wire import Call, Log, Reply
from .worker_host import WorkerHost

_pair: tuple[socket.socket, socket.socket] | None = None


def install(host: WorkerHost) -> None:
    """Give every process this worker forks from now on a way to the server through `host`."""

    def before() -> None:
        global _pair
        _pair = socket.socketpair()

    def in_parent() -> None:
        global _pair
        if _pair is None:
            return
        ours, theirs = _pair
        _pair = None
        theirs.close()
        threading.Thread(target=_relay, args=(ours, host), name="openinfer-fork-relay", daemon=True).start()

    def in_child() -> None:
        global _pair
        if _pair is None:
            return
        theirs, ours = _pair
        _pair = None
        theirs.close()
        # The worker ignores the signals meant for the server's process group (it finalizes
        # when the server says so); its children are ordinary processes, which their parent
        # (a pool's `terminate`) must be able to stop.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        child = WorkerHost(ipc.BlockingChannel(ours))
        child.model_dir = host.model_dir
        threading.Thread(target=_read, args=(child,), name="openinfer-fork-reader", daemon=True).start()
        _host.install(child)

    os.register_at_fork(before=before, after_in_parent=in_parent, after_in_child=in_child)


def _read(child: WorkerHost) -> None:
    """The child's reader: every answer to the thread that waits for it."""
    try:
        while True:
            message = child.channel.receive()
            if type(message) is Reply:
                child.deliver(message)
    except (EOFError, OSError):
        return


def _relay(sock: socket.socket, host: WorkerHost) -> None:
    channel = ipc.BlockingChannel(sock)
    try:
        while True:
            message = channel.receive()
            if type(message) is Call:
                threading.Thread(target=_pass_on, args=(channel, host, message), daemon=True).start()
            elif type(message) is Log:
                host.channel.send(message)
    except (EOFError, OSError):
        pass
    finally:
        sock.close()


def _pass_on(channel: ipc.BlockingChannel, host: WorkerHost, call: Call) -> None:
    """One call of the child's, through the worker's host; its answers back to the child."""
    call_id, answers = host.open_call(call.kind, call.args)
    try:
        while True:
            reply: Any = answers.get()
            channel.send(reply._replace(call_id=call.call_id))
            if reply.final:
                return
    except OSError:
        return  # the child is gone
    finally:
        host.forget_call(call_id)
