"""`preserve_ordering`: responses leave in the order their requests were batched.

When several instances run batches at once, a later batch can finish first. Each batch's
senders are wrapped; the oldest unfinished batch passes its responses straight through and
every later batch holds its own until all the batches before it have answered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..requests.responses import ResponseSender
from ..types import InferResponse


class _Group:
    __slots__ = ("live", "senders")

    def __init__(self) -> None:
        self.senders: list[HeldSender] = []
        self.live = False

    def closed(self) -> bool:
        return all(s.closed for s in self.senders)


class HeldSender(ResponseSender):
    """Forwards to the real sender now (oldest batch) or later (any younger batch)."""

    __slots__ = ("gate", "group", "held", "inner")

    def __init__(self, inner: ResponseSender, group: _Group, gate: OrderedRelease) -> None:
        super().__init__(inner.request)
        self.inner = inner
        self.group = group
        self.gate = gate
        self.held: list[tuple[str, object, bool]] = []

    def _deliver(self, response: InferResponse) -> None:
        if self.group.live:
            self.inner.send(response, final=response.final)
        else:
            self.held.append(("send", response, response.final))

    def _finish(self) -> None:
        if self.group.live:
            self.inner.send(None, final=True)
        else:
            self.held.append(("send", None, True))
        self.gate.changed()

    def _fail(self, error: Exception) -> None:
        if self.group.live:
            self.inner.fail(error)
        else:
            self.held.append(("fail", error, True))
        self.gate.changed()

    def flush(self) -> None:
        held, self.held = self.held, []
        for kind, item, final in held:
            if kind == "fail":
                self.inner.fail(item)  # type: ignore[arg-type]
            else:
                self.inner.send(item, final=final)  # type: ignore[arg-type]


class OrderedRelease:
    """The gate shared by every batch of one scheduler."""

    def __init__(self) -> None:
        self._groups: deque[_Group] = deque()

    def wrap(self, senders: Sequence[ResponseSender]) -> list[ResponseSender]:
        """Wrap the senders of the next batch (call in batch order)."""
        group = _Group()
        group.senders = [HeldSender(s, group, self) for s in senders]
        group.live = not self._groups
        self._groups.append(group)
        return list(group.senders)

    def changed(self) -> None:
        """A sender closed: release every leading batch that has fully answered."""
        groups = self._groups
        while groups and groups[0].live and groups[0].closed():
            groups.popleft()
            if groups:
                head = groups[0]
                head.live = True
                for sender in head.senders:
                    sender.flush()
