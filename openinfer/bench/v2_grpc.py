"""KServe v2 inference over gRPC (grpc.aio), unary or ``ModelStreamInfer``.

Requests are serialised once and sent as bytes (the method is created without a serializer), and
responses stay bytes unless this one is being validated, so protobuf costs nothing per request on
the client side beyond what gRPC itself does.
"""

from __future__ import annotations

import os
from typing import Any

from grpc import aio

from openinfer._proto import grpc_service_pb2 as pb

from .control import GrpcControl, _channel_options, split_url
from .options import Options
from .plan import Plan
from .shm import Region, RegionSet
from .tensors import Tensor
from .v2_http import InferError
from .validate import Received, check, nbytes

_INFER = "/inference.GRPCInferenceService/ModelInfer"
_STREAM = "/inference.GRPCInferenceService/ModelStreamInfer"


def _set_param(params: Any, key: str, value: Any) -> None:
    p = params[key]
    if isinstance(value, bool):
        p.bool_param = value
    elif isinstance(value, int):
        p.int64_param = value
    elif isinstance(value, str):
        p.string_param = value
    else:
        p.double_param = float(value)


class GrpcDriver:
    """Sends inference requests for one worker over one channel (HTTP/2 multiplexes slots)."""

    def __init__(self, opts: Options, plan: Plan, worker: int, slots: int) -> None:
        self.opts, self.plan, self.slots = opts, plan, slots
        host, port = split_url(opts.url)
        self.target = f"{host}:{port}"
        self.tag = f"oibench_{os.getpid()}_{worker}"
        self.shm: RegionSet | None = None
        self.out_regions: list[Region] = []
        self.in_offsets: list[list[int]] = []
        self.requests: list[list[bytes]] = []
        self.streams: list[Any] = [None] * slots

    async def setup(self) -> None:
        if self.opts.shared_memory == "system":
            self._setup_shm()
        per_slot = self.opts.shared_memory == "system"
        for r, row in enumerate(self.plan.rows):
            n = self.slots if per_slot else 1
            self.requests.append([self._request(r, row, s).SerializeToString() for s in range(n)])
        self.channel = aio.insecure_channel(self.target, options=_channel_options())
        self.unary = self.channel.unary_unary(_INFER)
        self.stream_method = self.channel.stream_stream(_STREAM)
        await self.channel.channel_ready()

    def _setup_shm(self) -> None:
        self.control = GrpcControl(self.opts.url)
        self.shm = RegionSet(self.tag, [[t.raw() for t in row] for row in self.plan.rows],
                             self.plan.output_sizes, self.slots, self.control)
        self.in_offsets = self.shm.in_offsets
        self.out_regions = self.shm.outputs

    def _request(self, r: int, row: list[Tensor], slot: int) -> pb.ModelInferRequest:
        req = pb.ModelInferRequest(model_name=self.opts.model,
                                   model_version=self.opts.model_version)
        shm = self.opts.shared_memory == "system"
        if self.opts.streaming:
            # Without this a decoupled model's closing (empty) response is never sent, and a
            # request could not tell that its last answer had arrived.
            _set_param(req.parameters, "triton_enable_empty_final_response", True)
        for i, t in enumerate(row):
            inp = req.inputs.add(name=t.name, datatype=t.datatype, shape=t.shape)
            if shm:
                _set_param(inp.parameters, "shared_memory_region", f"{self.tag}_in")
                _set_param(inp.parameters, "shared_memory_byte_size", len(t.raw()))
                if self.in_offsets[r][i]:
                    _set_param(inp.parameters, "shared_memory_offset", self.in_offsets[r][i])
            else:
                req.raw_input_contents.append(t.raw())
        off = 0
        for spec, size in zip(self.plan.outputs, self.plan.output_sizes):
            out = req.outputs.add(name=spec.name)
            if shm:
                _set_param(out.parameters, "shared_memory_region", f"{self.tag}_out{slot}")
                _set_param(out.parameters, "shared_memory_byte_size", size)
                if off:
                    _set_param(out.parameters, "shared_memory_offset", off)
                off += size
        return req

    def _bytes(self, row: int, slot: int, params: dict[str, Any] | None) -> bytes:
        per_row = self.requests[row]
        data = per_row[slot if len(per_row) > 1 else 0]
        if params:
            # Protobuf merges concatenated messages: append a parameters-only request.
            extra = pb.ModelInferRequest()
            for k, v in params.items():
                _set_param(extra.parameters, k, v)
            data += extra.SerializeToString()
        return data

    async def infer(
        self, slot: int, row: int, params: dict[str, Any] | None, validate: bool
    ) -> None:
        data = self._bytes(row, slot, params)
        if self.opts.streaming:
            await self._infer_stream(slot, row, data, validate)
            return
        try:
            raw = await self.unary(data, timeout=self.opts.timeout_s)
        except aio.AioRpcError as exc:
            raise InferError(f"{exc.code().name}: {exc.details()}") from None
        if validate:
            self._validate(pb.ModelInferResponse.FromString(raw), row, slot)

    async def _infer_stream(self, slot: int, row: int, data: bytes, validate: bool) -> None:
        call = self.streams[slot]
        if call is None:
            call = self.streams[slot] = self.stream_method(timeout=None)
        await call.write(data)
        while True:
            raw = await call.read()
            if raw is aio.EOF:
                self.streams[slot] = None
                raise InferError("the server closed the stream")
            msg = pb.ModelStreamInferResponse.FromString(raw)
            if msg.error_message:
                raise InferError(msg.error_message)
            resp = msg.infer_response
            final = resp.parameters.get("triton_final_response")
            if validate and (resp.outputs or not self.plan.outputs):
                self._validate(resp, row, slot)
            # Non-decoupled models answer once; decoupled ones flag their last response.
            if final is None or final.bool_param:
                return

    def _validate(self, resp: pb.ModelInferResponse, row: int, slot: int) -> None:
        got = []
        raws = list(resp.raw_output_contents)
        off_by_name = {}
        off = 0
        for spec, size in zip(self.plan.outputs, self.plan.output_sizes):
            off_by_name[spec.name] = (off, size)
            off += size
        for i, o in enumerate(resp.outputs):
            rec = Received(o.name, o.datatype, list(o.shape))
            if self.out_regions and o.name in off_by_name and o.datatype != "BYTES":
                # Requested into shared memory: whatever else the response holds, read there.
                rec.raw = self.out_regions[slot].read(off_by_name[o.name][0], nbytes(rec))
            elif i < len(raws):
                rec.raw = raws[i]
            else:
                rec.data = _contents(o)
            got.append(rec)
        check(got, self.plan.outputs, self.plan.expected_for(row))

    async def close(self) -> None:
        for call in self.streams:
            if call is not None:
                await call.done_writing()
        await self.channel.close()
        if self.shm is not None:
            self.shm.close()
            self.control.close()


def _contents(o: Any) -> list[Any]:
    c = o.contents
    for field in ("fp32_contents", "fp64_contents", "int_contents", "int64_contents",
                  "uint_contents", "uint64_contents", "bool_contents", "bytes_contents"):
        vals = getattr(c, field)
        if len(vals):
            return list(vals)
    return []

