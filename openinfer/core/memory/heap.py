"""What was loaded, kept out of the cyclic garbage collector's full passes.

A server that has loaded numpy, grpc, torch or transformers holds hundreds of thousands of
long-lived objects (about 410,000 beside the tiny test Llama), and every full pass of the
collector walks them all: 200 ms there, during which every request in flight waits. Once loading
has settled, what is alive moves to the collector's permanent generation (`gc.freeze`), so full
passes walk only what was made since. Each settling thaws the last one's objects first, so what
an unloaded model left in reference cycles is still collected.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """After a load or an unload: collect what it left, then freeze what is alive."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def release() -> None:
    """The server has stopped: the collector looks at everything again, so what the server left
    in reference cycles goes, in a program that embeds it and lives on."""
    gc.unfreeze()
