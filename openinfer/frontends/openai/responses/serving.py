"""`POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`.

A request is refused early for what the server cannot do, continued from a stored response when
it names one, then generated as a chat completion and reshaped. Storing happens when the answer
is whole (for a stream: as its last event is made), so a response is never fetched half done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import TypeAdapter

from ..chat.serving import ChatServing
from ..context import now
from ..errors import invalid, not_found
from ..protocol import parse_request
from .conversion import chat_body, input_items, refuse_unsupported
from .output import ResponseShape, item_id, output_items, status_of, usage
from .protocol import InputItem, Item, ResponsesRequest
from .store import ResponseStore, StoredResponse
from .streaming import response_events

_AS_INPUT: TypeAdapter[list[Item]] = TypeAdapter(list[InputItem])


def _checked_id(response_id: str) -> str:
    if not response_id.startswith("resp"):
        raise invalid(f"Invalid 'response_id': '{response_id}'. Expected an ID that begins with 'resp'.", "response_id")
    return response_id


def _missing(response_id: str) -> Exception:
    return not_found(f"Response with id '{response_id}' not found.", "response_id")


class ResponsesServing:
    def __init__(self, chat: ChatServing, store: ResponseStore) -> None:
        self.chat = chat
        self.store = store

    async def create(self, body: Any) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        req: ResponsesRequest = parse_request(ResponsesRequest, body)
        refuse_unsupported(req)
        history: tuple[Item, ...] = ()
        if req.previous_response_id is not None:
            previous = self.store.get(req.previous_response_id)
            if previous is None:
                raise not_found(
                    f"Previous response with id '{req.previous_response_id}' not found.",
                    "previous_response_id",
                    "previous_response_not_found",
                )
            history = previous.conversation
        items = [*history, *input_items(req)]
        answer = await self.chat.create(chat_body(req, items))
        shape = ResponseShape(item_id("resp"), now(), req)
        remember = self._remember(req, items)
        if not isinstance(answer, dict):
            return response_events(shape, answer, remember)
        choice = answer["choices"][0]
        status = status_of(choice["finish_reason"])
        final = shape.response(status, output_items(choice["message"], status), usage(answer["usage"]))
        remember(final)
        return final

    def _remember(self, req: ResponsesRequest, items: Sequence[Item]) -> Callable[[dict[str, Any]], None]:
        """Stores a finished response with its conversation, unless the client said `store: false`."""

        def remember(response: dict[str, Any]) -> None:
            if req.store is False:
                return
            said = _AS_INPUT.validate_python(response["output"])
            self.store.put(StoredResponse(response, (*items, *said)))

        return remember

    def get(self, response_id: str) -> dict[str, Any]:
        entry = self.store.get(_checked_id(response_id))
        if entry is None:
            raise _missing(response_id)
        return entry.response

    def delete(self, response_id: str) -> dict[str, Any]:
        if not self.store.delete(_checked_id(response_id)):
            raise _missing(response_id)
        return {"id": response_id, "object": "response", "deleted": True}
