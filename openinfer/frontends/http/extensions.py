"""HTTP routes of the shared-memory, trace and logging extensions.

Only JSON translation lives here: the rules, the state and Triton's messages are in
`core/shm.py`, `core/trace.py` and `core/logsettings.py`, which the gRPC RPCs share.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from urllib.parse import unquote

from ...core import trace as traces
from ...core.errors import InvalidArgumentError, UnsupportedError
from ...core.server import InferenceServer
from .app import HttpApp, HttpRequest, HttpResponse, json_response
from .codec import loads_object

_SYSTEM = r"/v2/systemsharedmemory(?:/region/([^/]+))?"
_CUDA = r"/v2/cudasharedmemory(?:/region/([^/]+))?"
_JSON_TYPE = {bool: "boolean", int: "unsigned-integer", str: "string"}


def _region(req: HttpRequest) -> str:
    assert req.match is not None
    return unquote(req.match.group(1) or "")


def _body(req: HttpRequest) -> dict[str, Any]:
    """The request body as a JSON object (an empty or non-object body is Triton's parse error)."""
    if not req.body.strip():
        raise InvalidArgumentError("failed to parse the request JSON buffer: The document is empty.")
    return loads_object(req.body)


def _typed(doc: dict[str, Any], key: str, kind: type, *, required: str | None = None) -> Any:
    """A member of the expected JSON type (Triton answers a wrong type 500; it is the client's: 400)."""
    if key not in doc:
        if required is not None:
            raise InvalidArgumentError(required)
        return None
    value = doc[key]
    ok = isinstance(value, kind) and not (kind is int and (isinstance(value, bool) or value < 0))
    if not ok:
        name = _JSON_TYPE[kind]
        raise InvalidArgumentError(f"Unable to parse '{key}': attempt to access JSON non-{name} as {name}")
    return value


def _shm(server: InferenceServer):
    if server.shm is None:
        raise UnsupportedError("shared memory is not available on this server")
    return server.shm


def install(app: HttpApp) -> None:
    server = app.server

    # ------------------------------------------------------------ system shm
    async def system_status(req: HttpRequest) -> HttpResponse:
        regions = _shm(server).system_status(_region(req))
        return json_response(
            [
                {"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size}
                for r in regions
            ]
        )

    async def system_register(req: HttpRequest) -> HttpResponse:
        shm = _shm(server)
        name = _region(req)
        shm.require_client_access()
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register system shared memory region"
            )
        doc = _body(req)
        key = _typed(doc, "key", str, required="Shared memory register request has no 'key' field")
        offset = _typed(doc, "offset", int) or 0
        size = _typed(
            doc,
            "byte_size",
            int,
            required="Shared memory register request has no 'byte_size' field",
        )
        shm.register_system(name, key, offset, size)
        return HttpResponse(200, b"")

    async def system_unregister(req: HttpRequest) -> HttpResponse:
        _shm(server).unregister_system(_region(req))
        return HttpResponse(200, b"")

    # -------------------------------------------------------------- cuda shm
    async def cuda_status(req: HttpRequest) -> HttpResponse:
        regions = _shm(server).cuda_status(_region(req))
        return json_response(
            [{"name": r.name, "device_id": r.device_id, "byte_size": r.byte_size} for r in regions]
        )

    async def cuda_register(req: HttpRequest) -> HttpResponse:
        shm = _shm(server)
        name = _region(req)
        shm.require_client_access()
        if not name:
            raise InvalidArgumentError(
                "'region name' is necessary to register cuda shared memory region"
            )
        doc = _body(req)
        handle = doc.get("raw_handle")
        if "raw_handle" not in doc:
            raise InvalidArgumentError("Shared memory register request has no 'raw_handle' field")
        if not isinstance(handle, dict) or not isinstance(handle.get("b64"), str):
            raise InvalidArgumentError(
                "Unable to parse 'b64': attempt to access JSON non-string as string"
            )
        size = _typed(
            doc,
            "byte_size",
            int,
            required="Shared memory register request has no 'byte_size' field",
        )
        device = _typed(doc, "device_id", int) or 0
        try:
            raw = base64.b64decode(handle["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(
                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"
            ) from None
        shm.register_cuda(name, raw, device, size)
        return HttpResponse(200, b"")

    async def cuda_unregister(req: HttpRequest) -> HttpResponse:
        _shm(server).unregister_cuda(_region(req))
        return HttpResponse(200, b"")

    # ----------------------------------------------------------------- trace
    async def trace_setting(req: HttpRequest) -> HttpResponse:
        model = unquote(req.match.group(1)) if req.match is not None and req.match.lastindex else ""
        if model and not server.model_ready(model):
            raise InvalidArgumentError(f"Request for unknown model : {model}")
        if req.method == "POST":
            new, clear = traces.parse_update(_trace_values(_body(req)))
            return json_response(server.trace.update(model, new, clear))
        return json_response(server.trace.settings(model))

    # --------------------------------------------------------------- logging
    async def logging_settings(req: HttpRequest) -> HttpResponse:
        settings = server.log_settings
        if req.method == "POST":
            doc = _body(req)
            if doc.get("log_file") is not None:
                raise UnsupportedError(
                    "log file location can not be updated through network protocol"
                )
            values = {
                "log_info": _nullable(doc, "log_info", bool),
                "log_warning": _nullable(doc, "log_warning", bool),
                "log_error": _nullable(doc, "log_error", bool),
                "log_verbose_level": _nullable(doc, "log_verbose_level", int),
                "log_format": _nullable(doc, "log_format", str),
            }
            settings.update(values)  # (an unknown format: 400, where Triton's HTTP answers 503)
        return json_response(settings.as_dict())

    app.add_route(_SYSTEM + r"/status", "GET", "shared-memory", system_status)
    app.add_route(_SYSTEM + r"/register", "POST", "shared-memory", system_register)
    app.add_route(_SYSTEM + r"/unregister", "POST", "shared-memory", system_unregister)
    app.add_route(_CUDA + r"/status", "GET", "shared-memory", cuda_status)
    app.add_route(_CUDA + r"/register", "POST", "shared-memory", cuda_register)
    app.add_route(_CUDA + r"/unregister", "POST", "shared-memory", cuda_unregister)
    app.add_route(r"/v2/trace/setting", ("GET", "POST"), "trace", trace_setting)
    app.add_route(r"/v2/models/([^/]+)/trace/setting", ("GET", "POST"), "trace", trace_setting)
    app.add_route(r"/v2/logging", ("GET", "POST"), "logging", logging_settings)


def _nullable(doc: dict[str, Any], key: str, kind: type) -> Any:
    if doc.get(key) is None:
        return None
    return _typed(doc, key, kind)


def _trace_values(doc: dict[str, Any]) -> dict[str, list[str] | None]:
    """HTTP trace settings -> the core's form: strings (levels: a list), null to clear."""
    values: dict[str, list[str] | None] = {}
    for key, value in doc.items():
        if value is None:
            values[key] = None
        elif key == "trace_level":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidArgumentError(
                    "Unable to parse 'trace_level': attempt to access JSON non-string as string"
                )
            values[key] = list(value)
        elif key == "trace_mode":
            if not isinstance(value, str):
                raise InvalidArgumentError(
                    "Unable to parse 'trace_mode': attempt to access JSON non-string as string"
                )
            values[key] = [value]
        elif key in ("trace_rate", "trace_count", "log_frequency", "trace_file"):
            # Triton wants strings; integers (what `update_trace_settings(trace_rate=5)` sends)
            # are taken too rather than failing with a JSON type error.
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise InvalidArgumentError(
                    f"Unable to parse '{key}': attempt to access JSON non-string as string"
                )
            values[key] = [str(value)]
    return values
