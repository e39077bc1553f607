"""A bare ASGI app that parses and echoes v2 inference JSON with orjson.

No framework, no validation, no numpy: the least a Python HTTP server can do per request, and
so the ceiling for any server on the same uvicorn/uvloop/httptools stack.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from .model import Counter, config, metadata, output_name
from .shm_regions import ShmRegions


def _out_shm(req: dict[str, Any], name: str) -> dict[str, Any] | None:
    for o in req.get("outputs") or []:
        params = o.get("parameters") or {}
        if o.get("name") == name and "shared_memory_region" in params:
            return params
    return None

Scope = dict[str, Any]

_JSON = [(b"content-type", b"application/json")]


class EchoApp:
    def __init__(self) -> None:
        self.counters: dict[str, Counter] = {}
        self.shm = ShmRegions()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()  # startup
            await send({"type": "lifespan.startup.complete"})
            await receive()  # shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        path: str = scope["path"]
        if scope["method"] == "POST":
            body = b""
            more = True
            while more:
                msg = await receive()
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
            if path.endswith("/infer"):
                await self._infer(scope, path, body, send)
                return
            if path.startswith("/v2/systemsharedmemory"):
                status, reply = self.shm.handle(path, body)
                await _reply(send, status, reply)
                return
            await _reply(send, 404, b'{"error":"not found"}')
            return
        parts = path.strip("/").split("/")
        if path in ("/v2/health/live", "/v2/health/ready"):
            await _reply(send, 200, b"")
        elif path == "/v2":
            await _reply(send, 200, orjson.dumps(
                {"name": "echo", "version": "0", "extensions": ["statistics"]}))
        elif len(parts) >= 3 and parts[:2] == ["v2", "models"]:
            name, tail = parts[2], parts[3:]
            if tail[:1] == ["versions"]:
                tail = tail[2:]
            if not tail:
                await _reply(send, 200, orjson.dumps(metadata(name)))
            elif tail == ["config"]:
                await _reply(send, 200, orjson.dumps(config(name)))
            elif tail == ["stats"]:
                await _reply(send, 200, orjson.dumps(
                    self.counters.setdefault(name, Counter()).stats(name)))
            elif tail == ["ready"]:
                await _reply(send, 200, b"")
            else:
                await _reply(send, 404, b'{"error":"not found"}')
        else:
            await _reply(send, 404, b'{"error":"not found"}')

    async def _infer(self, scope: Scope, path: str, body: bytes, send: Any) -> None:
        t0 = time.perf_counter_ns()
        name = path.split("/")[3]
        hlen = next((int(v) for k, v in scope["headers"]
                     if k == b"inference-header-content-length"), None)
        try:
            req = orjson.loads(body[:hlen] if hlen is not None else body)
        except orjson.JSONDecodeError as exc:
            await _reply(send, 400, orjson.dumps({"error": str(exc)}))
            return
        outputs, tail, pos = [], [], hlen or 0
        for t in req.get("inputs", []):
            out = {"name": output_name(t["name"]), "datatype": t["datatype"], "shape": t["shape"]}
            params = t.get("parameters") or {}
            size = params.get("binary_data_size")
            if "shared_memory_region" in params:
                data = self.shm.read(params)
                out_params = _out_shm(req, out["name"])
                if out_params is None:  # shm input, binary output
                    out["parameters"] = {"binary_data_size": len(data)}
                    tail.append(data)
                else:
                    self.shm.write(out_params, data)
                    out["parameters"] = {"shared_memory_region": out_params["shared_memory_region"],
                                         "shared_memory_byte_size": len(data)}
            elif size is not None:
                out["parameters"] = {"binary_data_size": size}
                tail.append(body[pos : pos + size])
                pos += size
            else:
                out["data"] = t["data"]
            outputs.append(out)
        resp: dict[str, Any] = {"model_name": name, "model_version": "1", "outputs": outputs}
        if "id" in req:
            resp["id"] = req["id"]
        head = orjson.dumps(resp)
        self.counters.setdefault(name, Counter()).add(time.perf_counter_ns() - t0)
        if tail:
            headers = [(b"content-type", b"application/octet-stream"),
                       (b"inference-header-content-length", str(len(head)).encode())]
            await _reply(send, 200, head + b"".join(tail), headers)
        else:
            await _reply(send, 200, head)


async def _reply(send: Any, status: int, body: bytes,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or _JSON})
    await send({"type": "http.response.body", "body": body})


app = EchoApp()
