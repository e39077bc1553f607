"""`/v1/models`: listing, one model, and explicit-mode load / unload."""

from __future__ import annotations

import asyncio
from typing import Any

from ...core.errors import OpenInferError
from .catalog import OWNED_BY, ModelInfo
from .context import FrontendContext
from .errors import invalid, not_found


def model_card(model_id: str, info: ModelInfo, parent: str | None = None) -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "created": info.created,
        "owned_by": OWNED_BY,
        "root": info.name,
        "parent": parent,
        "max_model_len": info.max_model_len,
    }


def _valid_name(name: str) -> bool:
    return bool(name) and name == name.strip() and name not in (".", "..") and not any(c in name for c in "/\\\0")


class ModelsServing:
    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx
        self._lock = asyncio.Lock()

    def list(self) -> dict[str, Any]:
        data = []
        for model_id, info in self.ctx.catalog.model_ids():
            data.append(model_card(model_id, info, None if model_id == info.name else info.name))
        return {"object": "list", "data": data}

    def get(self, model_id: str) -> dict[str, Any]:
        for listed, info in self.ctx.catalog.model_ids():
            if listed == model_id:
                return model_card(listed, info, None if listed == info.name else info.name)
        raise not_found(f"The model `{model_id}` does not exist.", "model", "model_not_found")

    def _check(self, name: str) -> None:
        if not self.ctx.options.model_control_explicit:
            raise invalid("Model load/unload requires --model-control-mode=explicit", None, "model_control_disabled")
        if not _valid_name(name):
            raise invalid(
                f"Invalid model name: '{name}'. Model names must be valid file-system-path segment names.", "model"
            )

    async def load(self, name: str) -> dict[str, Any]:
        self._check(name)
        async with self._lock:
            if self.ctx.catalog.find(name) is not None:
                raise invalid(f"Model '{name}' is already loaded", "model", "model_already_loaded")
            if not self.ctx.server.in_repository(name):
                raise not_found(
                    f"Failed to load model '{name}': failed to poll from model repository (no such model)",
                    "model",
                    "model_not_found",
                )
            try:
                await self.ctx.server.load_model(name)
            except OpenInferError as exc:
                exc.message = f"Failed to load model '{name}': {exc.message}"
                raise
        info = self.ctx.catalog.find(name)
        if info is None:
            raise not_found(f"Failed to load model '{name}': no version became ready", "model")
        return model_card(name, info)

    async def unload(self, name: str) -> dict[str, Any]:
        self._check(name)
        async with self._lock:
            if self.ctx.catalog.find(name) is None:
                raise not_found(f"Unknown model: {name}", "model", "model_not_found")
            try:
                await self.ctx.server.unload_model(name)
            except OpenInferError as exc:
                exc.message = f"Failed to unload model '{name}': {exc.message}"
                raise
        return {"status": "success", "model": name}
