"""Stored responses, in memory and bounded: the least recently used one leaves first.

Each entry keeps the Response object (for `GET`) and the conversation that led to it, input
and output as input items, so `previous_response_id` can continue it without the instructions
of the earlier turn (OpenAI's rule: instructions apply to one response only).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .protocol import Item


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]
    conversation: tuple[Item, ...]


class ResponseStore:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()

    def put(self, entry: StoredResponse) -> None:
        key = entry.response["id"]
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        entry = self._entries.get(response_id)
        if entry is not None:
            self._entries.move_to_end(response_id)
        return entry

    def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None

    def __len__(self) -> int:
        return len(self._entries)
