"""`POST /tokenize` and `POST /detokenize`, as vLLM serves them (a prompt or chat messages)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .catalog import EMBED, GENERATE
from .chat.protocol import ChatMessage, Tool
from .chat.serving import conversation
from .context import FrontendContext
from .errors import invalid
from .protocol import RequestModel, parse_request
from .tokenizer import render_chat


class TokenizeRequest(RequestModel):
    model: str
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    tools: list[Tool] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    return_token_strs: bool = False


class DetokenizeRequest(RequestModel):
    model: str
    tokens: list[int] = Field(min_length=0)


class TokenizeServing:
    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx

    async def tokenize(self, body: Any) -> dict[str, Any]:
        req: TokenizeRequest = parse_request(TokenizeRequest, body)
        resolved = self.ctx.catalog.resolve(req.model, kinds=(GENERATE, EMBED))
        tokenizer = await self.ctx.tokenizer(resolved.info)
        if (req.prompt is None) == (req.messages is None):
            raise invalid("give exactly one of 'prompt' or 'messages'", "prompt")
        if req.messages is not None:
            text = render_chat(
                tokenizer,
                conversation(req.messages),
                tools=[t.model_dump(exclude_none=True) for t in req.tools] if req.tools else None,
                add_generation_prompt=req.add_generation_prompt,
                continue_final_message=req.continue_final_message,
                template=self.ctx.chat_template,
                kwargs=req.chat_template_kwargs,
            )
            add_special = False  # the template already placed them
        else:
            text = req.prompt or ""
            add_special = req.add_special_tokens
        ids = tokenizer(text, add_special_tokens=add_special)["input_ids"]
        out: dict[str, Any] = {"count": len(ids), "max_model_len": resolved.info.max_model_len, "tokens": ids}
        if req.return_token_strs:
            out["token_strs"] = tokenizer.convert_ids_to_tokens(ids)
        return out

    async def detokenize(self, body: Any) -> dict[str, Any]:
        req: DetokenizeRequest = parse_request(DetokenizeRequest, body)
        resolved = self.ctx.catalog.resolve(req.model, kinds=(GENERATE, EMBED))
        tokenizer = await self.ctx.tokenizer(resolved.info)
        try:
            text = tokenizer.decode(req.tokens)
        except (OverflowError, IndexError, TypeError, ValueError) as exc:
            raise invalid(f"cannot decode tokens: {exc}", "tokens") from None
        return {"prompt": text}
