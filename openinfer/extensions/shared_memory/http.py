"""`/v2/systemsharedmemory/...` and `/v2/cudasharedmemory/...`: JSON in and out of the core."""

from __future__ import annotations

import base64
import binascii
import functools
from typing import Any
from urllib.parse import unquote

from ...core.errors import InvalidArgumentError, UnsupportedError
from ...core.server import InferenceServer
from ...frontends.http.app import HttpApp, HttpRequest, HttpResponse, json_response
from ..json_body import body_object, typed

_SYSTEM = r"/v2/systemsharedmemory(?:/region/([^/]+))?"
_CUDA = r"/v2/cudasharedmemory(?:/region/([^/]+))?"


def _region(req: HttpRequest) -> str:
    assert req.match is not None
    return unquote(req.match.group(1) or "")


def _shm(server: InferenceServer) -> Any:
    if server.shm is None:
        raise UnsupportedError("shared memory is not available on this server")
    return server.shm


async def system_status(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    regions = _shm(server).system_status(_region(req))
    return json_response(
        [{"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size} for r in regions]
    )


def _registering(server: InferenceServer, req: HttpRequest, kind: str) -> tuple[Any, str, dict[str, Any]]:
    """The manager, the region's name and the JSON body of a register request (`kind`:
    "system" or "cuda"), once clients may register and the name is given."""
    shm = _shm(server)
    name = _region(req)
    shm.require_client_access()
    if not name:
        raise InvalidArgumentError(f"'region name' is necessary to register {kind} shared memory region")
    return shm, name, body_object(req)


async def system_register(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    shm, name, doc = _registering(server, req, "system")
    key = typed(doc, "key", str, required="Shared memory register request has no 'key' field")
    offset = typed(doc, "offset", int) or 0
    size = typed(doc, "byte_size", int, required="Shared memory register request has no 'byte_size' field")
    shm.register_system(name, key, offset, size)
    return HttpResponse(200, b"")


async def system_unregister(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    _shm(server).unregister_system(_region(req))
    return HttpResponse(200, b"")


async def cuda_status(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    regions = _shm(server).cuda_status(_region(req))
    return json_response([{"name": r.name, "device_id": r.device_id, "byte_size": r.byte_size} for r in regions])


async def cuda_register(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    shm, name, doc = _registering(server, req, "cuda")
    handle = doc.get("raw_handle")
    if "raw_handle" not in doc:
        raise InvalidArgumentError("Shared memory register request has no 'raw_handle' field")
    if not isinstance(handle, dict) or not isinstance(handle.get("b64"), str):
        raise InvalidArgumentError("Unable to parse 'b64': attempt to access JSON non-string as string")
    size = typed(doc, "byte_size", int, required="Shared memory register request has no 'byte_size' field")
    device = typed(doc, "device_id", int) or 0
    try:
        raw = base64.b64decode(handle["b64"], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t") from None
    shm.register_cuda(name, raw, device, size)
    return HttpResponse(200, b"")


async def cuda_unregister(server: InferenceServer, req: HttpRequest) -> HttpResponse:
    _shm(server).unregister_cuda(_region(req))
    return HttpResponse(200, b"")


def install(app: HttpApp, group: str | None) -> None:
    bind = functools.partial
    server = app.server
    app.add_route(_SYSTEM + r"/status", "GET", group, bind(system_status, server))
    app.add_route(_SYSTEM + r"/register", "POST", group, bind(system_register, server))
    app.add_route(_SYSTEM + r"/unregister", "POST", group, bind(system_unregister, server))
    app.add_route(_CUDA + r"/status", "GET", group, bind(cuda_status, server))
    app.add_route(_CUDA + r"/register", "POST", group, bind(cuda_register, server))
    app.add_route(_CUDA + r"/unregister", "POST", group, bind(cuda_unregister, server))
