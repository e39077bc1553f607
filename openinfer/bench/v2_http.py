"""KServe v2 inference over HTTP/1.1: JSON, the binary tensor extension, or shared memory.

Every request body is encoded once, before the clock starts; a sequence request only gets its
``parameters`` spliced in front of the pre-encoded body.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import orjson

from ..frontends.http import bulk_json
from .control import HttpControl, split_url
from .httpconn import HttpConnection, Response, encode_request
from .options import Options
from .plan import Plan
from .shm import Region, RegionSet
from .validate import Received, ValidationError, check, nbytes


class InferError(RuntimeError):
    """The server answered with an error; counted as a failed request."""


class HttpDriver:
    """Sends inference requests on ``slots`` keep-alive connections of one worker."""

    def __init__(self, opts: Options, plan: Plan, worker: int, slots: int) -> None:
        self.opts, self.plan, self.slots = opts, plan, slots
        self.host, self.port = split_url(opts.url)
        path = f"/v2/models/{quote(opts.model, safe='')}"
        if opts.model_version:
            path += f"/versions/{opts.model_version}"
        self.path = path + "/infer"
        self.conns = [HttpConnection(self.host, self.port) for _ in range(slots)]
        self.tag = f"oibench_{os.getpid()}_{worker}"
        self.shm: RegionSet | None = None
        self.in_offsets: list[list[int]] = []
        self.out_regions: list[Region] = []
        # bodies[row][slot]: shared memory differs per slot (output region), others do not.
        self.bodies: list[list[tuple[bytes, dict[str, str]]]] = []

    async def setup(self) -> None:
        if self.opts.shared_memory == "system":
            self._setup_shm()
        per_slot = self.opts.shared_memory == "system"
        for r, row in enumerate(self.plan.rows):
            if per_slot:
                self.bodies.append([self._body(r, row, s) for s in range(self.slots)])
            else:
                self.bodies.append([self._body(r, row, 0)])
        self._prepare()
        for c in self.conns:
            await c.open()

    def _setup_shm(self) -> None:
        self.control = HttpControl(self.opts.url)
        self.shm = RegionSet(self.tag, [[t.raw() for t in row] for row in self.plan.rows],
                             self.plan.output_sizes, self.slots, self.control)
        self.in_offsets = self.shm.in_offsets
        self.out_regions = self.shm.outputs

    def _body(self, r: int, row: list[Any], slot: int) -> tuple[bytes, dict[str, str]]:
        mode = "shm" if self.opts.shared_memory == "system" else (
            "binary" if self.opts.binary else "json")
        inputs, tail = [], []
        for i, t in enumerate(row):
            entry: dict[str, Any] = {"name": t.name, "datatype": t.datatype, "shape": t.shape}
            if mode == "json":
                entry["data"] = t.json_data()
            elif mode == "binary":
                raw = t.raw()
                entry["parameters"] = {"binary_data_size": len(raw)}
                tail.append(raw)
            else:
                entry["parameters"] = {
                    "shared_memory_region": f"{self.tag}_in",
                    "shared_memory_byte_size": len(t.raw()),
                    "shared_memory_offset": self.in_offsets[r][i],
                }
            inputs.append(entry)
        outputs: list[dict[str, Any]] = []
        off = 0
        for spec, size in zip(self.plan.outputs, self.plan.output_sizes):
            if mode == "json":
                outputs.append({"name": spec.name})
            elif mode == "binary":
                outputs.append({"name": spec.name, "parameters": {"binary_data": True}})
            else:
                outputs.append({"name": spec.name, "parameters": {
                    "shared_memory_region": f"{self.tag}_out{slot}",
                    "shared_memory_byte_size": size,
                    "shared_memory_offset": off,
                }})
                off += size
        header = orjson.dumps({"inputs": inputs, "outputs": outputs},
                              option=orjson.OPT_SERIALIZE_NUMPY)
        if mode == "binary":
            return header + b"".join(tail), {
                "Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(header)),
            }
        return header, {"Content-Type": "application/json"}

    def request_bytes(self, row: int, slot: int, params: dict[str, Any] | None) -> bytes:
        body, headers = self.bodies[row][slot if len(self.bodies[row]) > 1 else 0]
        if params:
            json_len = int(headers.get("Inference-Header-Content-Length", len(body)))
            prefix = b'{"parameters":' + orjson.dumps(params) + b","
            body = prefix + body[1:]
            if "Inference-Header-Content-Length" in headers:
                headers = dict(headers)
                headers["Inference-Header-Content-Length"] = str(json_len + len(prefix) - 1)
        return encode_request("POST", f"{self.host}:{self.port}", self.path, body, headers)

    def _prepare(self) -> None:
        """Cache the full request bytes for the common case (no per-request parameters)."""
        self.cached = [
            [encode_request("POST", f"{self.host}:{self.port}", self.path, b, h) for b, h in row]
            for row in self.bodies
        ]

    async def infer(
        self, slot: int, row: int, params: dict[str, Any] | None, validate: bool
    ) -> None:
        if params:
            data = self.request_bytes(row, slot, params)
        else:
            per_row = self.cached[row]
            data = per_row[slot if len(per_row) > 1 else 0]
        resp = await self.conns[slot].request(data)
        if resp.status != 200:
            raise InferError(f"HTTP {resp.status}: {resp.body[:300].decode('utf-8', 'replace')}")
        if validate:
            self._validate(resp, row, slot)

    def _validate(self, resp: Response, row: int, slot: int) -> None:
        hlen = resp.headers.get(b"inference-header-content-length")
        header = resp.body[: int(hlen)] if hlen is not None else resp.body
        # Large numeric outputs come back as numpy arrays: a generator that turned 65,536 numbers
        # into Python floats spent more on a checked response than a fast server does.
        doc = bulk_json.parse(header, tensors="outputs")
        if doc is None:
            try:
                doc = orjson.loads(header)
            except orjson.JSONDecodeError as exc:
                raise ValidationError(f"response is not JSON: {exc}") from None
        got: list[Received] = []
        pos = int(hlen) if hlen is not None else 0
        for o in doc.get("outputs") or []:
            params = o.get("parameters") or {}
            rec = Received(o.get("name", ""), o.get("datatype", ""), list(o.get("shape", [])))
            if self.out_regions and "data" not in o and rec.datatype != "BYTES":
                off = self._out_offset(rec.name)
                rec.raw = self.out_regions[slot].read(off, nbytes(rec))
            elif "binary_data_size" in params:
                n = int(params["binary_data_size"])
                rec.raw = memoryview(resp.body)[pos : pos + n]
                pos += n
            else:
                rec.data = o.get("data")
            got.append(rec)
        check(got, self.plan.outputs, self.plan.expected_for(row))

    def _out_offset(self, name: str) -> int:
        off = 0
        for spec, size in zip(self.plan.outputs, self.plan.output_sizes):
            if spec.name == name:
                return off
            off += size
        raise ValidationError(f"unexpected output {name!r}")

    async def close(self) -> None:
        for c in self.conns:
            c.close()
        if self.shm is not None:
            self.shm.close()
            self.control.close()

