"""The gRPC servicer: translate, call the core, translate back.

The protocol's own RPCs are here; each protocol extension brings its RPCs as a mixin (with its
restricted group), and `start_grpc` composes them into one servicer. Every RPC passes through
one wrapper that applies the restricted-protocol check and maps core errors to gRPC status
codes through the core's table, so no RPC can be left uncovered.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError

from ..._proto import grpc_service_pb2 as pb
from ..._proto import grpc_service_pb2_grpc as pb_grpc
from ..._proto import health_pb2, health_pb2_grpc
from ...core.errors import InternalError, OpenInferError, status_of
from ...core.observability import trace_context
from ...core.observability.failure_log import log_failure
from ...core.requests.parameters import forward_headers, forward_pattern
from ...core.requests.protocols import Protocol
from ...core.server import InferenceServer
from ..access import AccessPolicy
from . import convert, raw_inputs
from .raw_tail import TailedResponse, serializer, stream_reply

log = logging.getLogger("openinfer.grpc")

#: The restricted group of each of the protocol's own RPCs (extensions bring theirs).
RPC_GROUPS = {
    "ServerLive": "health",
    "ServerReady": "health",
    "ModelReady": "health",
    "ServerMetadata": "metadata",
    "ModelMetadata": "metadata",
    "ModelInfer": "inference",
    "ModelStreamInfer": "inference",
    "Check": "health",
    "Watch": "health",
}


def _grpc_code(exc: BaseException) -> grpc.StatusCode:
    return grpc.StatusCode[status_of(exc).grpc]


class _Malformed:
    """Stands in for a request message that did not parse, so the guard can answer it."""


MALFORMED = _Malformed()
_MALFORMED_MESSAGE = "failed to parse the request message"


def _tolerant(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """The handler with a request parser that yields MALFORMED instead of raising (grpcio would
    answer UNKNOWN and log a traceback for every undecodable message a client sends), and a
    response writer that also takes a `TailedResponse`."""
    parse = handler.request_deserializer
    if parse is None:
        return handler
    if parse == pb.ModelInferRequest.FromString:  # (bound anew on every lookup: equal, not the same)
        parse = raw_inputs.parse

    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError:
            return MALFORMED

    write = serializer(handler.response_serializer)
    return handler._replace(request_deserializer=deserialize, response_serializer=write)


class _TolerantRegistry:
    """What the generated `add_*Servicer_to_server` functions see instead of the server."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # rebuilt from the method table below, with tolerant parsers

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        tolerant = {name: _tolerant(handler) for name, handler in handlers.items()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, tolerant),))
        self._server.add_registered_method_handlers(service, tolerant)


class _Guard:
    """Restricted-protocol check and error mapping shared by every RPC."""

    def __init__(self, access: AccessPolicy, groups: dict[str, str]) -> None:
        self.access = access
        self.groups = groups  # RPC name -> restricted group

    async def check(self, name: str, context: grpc.aio.ServicerContext) -> None:
        restriction = self.access.restriction(self.groups.get(name, ""))
        if restriction is None:
            return
        header = f"triton-grpc-protocol-{restriction.key}"
        presented = dict(context.invocation_metadata() or ()).get(header)
        if not restriction.allows(presented if isinstance(presented, str) else None):
            await context.abort(
                grpc.StatusCode.UNAVAILABLE, f"This protocol is restricted, expecting header '{header}'"
            )

    def unary(self, name: str, fn: Callable) -> Callable:
        restricted = self.access.restriction(self.groups.get(name, "")) is not None  # fixed at start

        @functools.wraps(fn)
        async def wrapper(self_: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            if restricted:
                await self.check(name, context)
            if request is MALFORMED:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _MALFORMED_MESSAGE)
            try:
                return await fn(self_, request, context)
            except OpenInferError as exc:
                await context.abort(_grpc_code(exc), exc.message)
            except (grpc.aio.AbortError, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.exception("unhandled error in %s", name)
                await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc}")

        return wrapper

    def stream(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        async def wrapper(self_: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await self.check(name, context)

            async def parsed() -> AsyncIterator[Any]:
                async for message in request:
                    if message is MALFORMED:
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _MALFORMED_MESSAGE)
                    yield message

            try:
                async for item in fn(self_, parsed(), context):
                    yield item
            except OpenInferError as exc:
                await context.abort(_grpc_code(exc), exc.message)

        return wrapper


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    """`inference.GRPCInferenceService` over the core."""

    #: `--grpc-infer-response-compression-level` ("gzip"/"deflate"): infer responses only, as Triton.
    response_compression: str | None = None
    #: `--grpc-header-forward-pattern`: metadata keys that become request parameters.
    header_forward: re.Pattern[str] | None = None

    def __init__(self, server: InferenceServer) -> None:
        self.server = server

    async def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=self.server.live())

    async def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=self.server.ready())

    async def ModelReady(self, request, context):
        return pb.ModelReadyResponse(ready=await self.server.model_readiness(request.name, request.version))

    async def ServerMetadata(self, request, context):
        meta = self.server.metadata()
        return pb.ServerMetadataResponse(name=meta.name, version=meta.version, extensions=meta.extensions)

    async def ModelMetadata(self, request, context):
        meta = self.server.model_metadata(request.name, request.version)
        response = pb.ModelMetadataResponse(name=meta.name, versions=meta.versions, platform=meta.platform)
        for t in meta.inputs:
            response.inputs.add(name=t.name, datatype=t.datatype, shape=t.shape)
        for t in meta.outputs:
            response.outputs.add(name=t.name, datatype=t.datatype, shape=t.shape)
        return response

    async def ModelInfer(self, request, context):
        try:
            core_request = convert.to_request(request)
            if self.header_forward is not None:
                forward_headers(self.header_forward, context.invocation_metadata() or (), core_request)
            if self.server.trace.propagates_context:  # only OpenTelemetry spans have a client parent
                core_request.trace_parent = trace_context.carrier(context.invocation_metadata())  # W3C traceparent
            if "triton_enable_empty_final_response" in core_request.parameters:
                core_request.parameters.pop("triton_enable_empty_final_response")
            response = await self.server.infer(core_request, protocol=Protocol.GRPC)
        except OpenInferError as exc:
            log_failure(request.id, exc.message)
            raise
        if self.response_compression is not None:
            await _compress_responses(context, self.response_compression)
        return convert.to_response(response, tail=True)

    async def ModelStreamInfer(self, request_iterator, context):
        """Bidirectional stream: per-request errors in band, decoupled responses as produced.

        Long because the reader of the stream, the task of each request and the order between
        them (non-decoupled answers keep the order of their requests) share the call's state:
        split apart, that state would travel through every piece as arguments."""
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        metadata = tuple(context.invocation_metadata() or ())
        error_mode = dict(metadata).get("triton_grpc_error") == "true"
        trace_parent = (  # the stream's W3C context, for OpenTelemetry spans
            trace_context.carrier(context.invocation_metadata()) if self.server.trace.propagates_context else None
        )
        tasks: set[asyncio.Task[None]] = set()
        previous: asyncio.Future[None] | None = None
        loop = asyncio.get_running_loop()

        async def run(message: pb.ModelInferRequest, after: asyncio.Future[None] | None, done: asyncio.Future[None]) -> None:
            items: list[Any] = []
            ordered = after is not None
            try:
                core_request = convert.to_request(message, stream=True)
                core_request.trace_parent = trace_parent
                if self.header_forward is not None:
                    forward_headers(self.header_forward, metadata, core_request)
                empty_final = bool(core_request.parameters.pop("triton_enable_empty_final_response", False))
                sent_final = False
                async for response in self.server.infer_stream(core_request, protocol=Protocol.GRPC):
                    sent_final = sent_final or response.final
                    if response.error is not None:  # a decoupled model's error response
                        error = _as_open_infer_error(response.error)
                        if error_mode:
                            items.append(error) if ordered else outbox.put_nowait(error)
                            continue
                        reply = pb.ModelStreamInferResponse(error_message=error.message)
                        reply.infer_response.id = message.id
                    else:
                        answer = convert.to_response(response, tail=True)
                        head = answer.message if isinstance(answer, TailedResponse) else answer
                        head.parameters["triton_final_response"].bool_param = response.final
                        reply = stream_reply(answer)
                    if ordered:
                        items.append(reply)
                    else:
                        outbox.put_nowait(reply)
                if not sent_final and empty_final:
                    reply = pb.ModelStreamInferResponse()
                    reply.infer_response.id = message.id
                    reply.infer_response.model_name = message.model_name
                    reply.infer_response.model_version = message.model_version
                    reply.infer_response.parameters["triton_final_response"].bool_param = True
                    items.append(reply) if ordered else outbox.put_nowait(reply)
            except OpenInferError as exc:
                log_failure(message.id, exc.message)
                if error_mode:
                    items.append(exc)
                else:
                    reply = pb.ModelStreamInferResponse(error_message=exc.message)
                    reply.infer_response.id = message.id
                    items.append(reply)
            except Exception as exc:
                log.exception("stream request failed")
                items.append(pb.ModelStreamInferResponse(error_message=f"internal error: {exc}"))
            if after is not None:
                await after
            for item in items:
                outbox.put_nowait(item)
            done.set_result(None)

        async def reader() -> None:
            nonlocal previous
            try:
                async for message in request_iterator:
                    try:
                        decoupled = self.server.model(message.model_name, message.model_version).decoupled
                    except OpenInferError:
                        decoupled = False
                    done: asyncio.Future[None] = loop.create_future()
                    after = None if decoupled else (previous or _resolved(loop))
                    task = asyncio.create_task(run(message, after, done))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    if not decoupled:
                        previous = done
                await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                outbox.put_nowait(None)

        read_task = asyncio.create_task(reader())
        if self.response_compression is not None:
            await _compress_responses(context, self.response_compression)
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    break
                if isinstance(item, OpenInferError):
                    await context.abort(_grpc_code(item), item.message)
                yield item
        finally:
            read_task.cancel()
            for task in list(tasks):
                task.cancel()

async def _compress_responses(context: grpc.aio.ServicerContext, encoding: str) -> None:
    # grpc.aio ignores `context.set_compression`; this initial-metadata key is how grpc's own
    # servers ask the transport to compress one call's messages.
    await context.send_initial_metadata((("grpc-internal-encoding-request", encoding),))


def _resolved(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    future: asyncio.Future[None] = loop.create_future()
    future.set_result(None)
    return future


class HealthServicer(health_pb2_grpc.HealthServicer):
    def __init__(self, server: InferenceServer) -> None:
        self.server = server

    async def Check(self, request, context):
        status = health_pb2.HealthCheckResponse.SERVING if self.server.ready() else health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse(status=status)


_S = TypeVar("_S")


def guarded(
    servicer_cls: type[_S], access: AccessPolicy, groups: dict[str, str] | None = None
) -> type[_S]:
    """A subclass whose every RPC (those of `groups`, by default the protocol's own) goes
    through the guard (restrictions + error mapping)."""
    groups = RPC_GROUPS if groups is None else groups
    guard = _Guard(access, groups)
    namespace: dict[str, Any] = {}
    for name in groups:
        fn = getattr(servicer_cls, name, None)
        if fn is None:
            continue
        if name == "ModelStreamInfer" or name == "Watch":
            if name == "Watch":
                continue
            namespace[name] = guard.stream(name, fn)
        else:
            namespace[name] = guard.unary(name, fn)
    return cast("type[_S]", type(f"Guarded{servicer_cls.__name__}", (servicer_cls,), namespace))


GRPC_OPTIONS = [
    ("grpc.max_send_message_length", 2**31 - 1),
    ("grpc.max_receive_message_length", 2**31 - 1),
]


def compose_servicer(
    rpcs: Sequence[tuple[type, str | None]],
) -> tuple[type[InferenceServicer], dict[str, str]]:
    """The servicer class with the extensions' RPC mixins, and every RPC's restricted group."""
    groups = dict(RPC_GROUPS)
    for mixin, group in rpcs:
        for name in (n for n in vars(mixin) if n[:1].isupper()):
            groups[name] = group or ""
    bases = (*(mixin for mixin, _ in rpcs), InferenceServicer)
    return cast("type[InferenceServicer]", type("InferenceServicer", bases, {})), groups


@dataclass(frozen=True)
class Binding:
    """Where and how the gRPC server listens: `address` is `host:port` (IPv6 hosts in brackets);
    `reuse_port` shares the port with other servers that set it (gRPC's own default is to share
    it always, which would hide a second server started on a port already taken);
    `channel_options` are gRPC channel arguments (keep-alive); `credentials` make it TLS."""

    address: str
    reuse_port: bool = False
    channel_options: tuple[tuple[str, int], ...] = ()
    credentials: grpc.ServerCredentials | None = None


async def start_grpc(server: InferenceServer, binding: Binding, access: AccessPolicy,
                     compression: grpc.Compression | None = None,
                     rpcs: Sequence[tuple[type, str | None]] = (), header_forward: str | None = None) -> grpc.aio.Server:
    """Bind and start the gRPC server. `rpcs`: the protocol extensions' servicer mixins, each
    with its restricted group; `header_forward`: metadata keys that become request parameters."""
    options = [*GRPC_OPTIONS, *binding.channel_options, ("grpc.so_reuseport", int(binding.reuse_port))]
    grpc_server = grpc.aio.server(options=options)
    servicer_cls, groups = compose_servicer(rpcs)
    servicer_cls = guarded(servicer_cls, access, groups)
    servicer_cls.header_forward = forward_pattern(header_forward)
    servicer_cls.response_compression = {grpc.Compression.Gzip: "gzip", grpc.Compression.Deflate: "deflate"}.get(
        compression
    )
    registry = _TolerantRegistry(grpc_server)
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer_cls(server), registry)
    health_pb2_grpc.add_HealthServicer_to_server(guarded(HealthServicer, access)(server), registry)
    address = binding.address
    try:
        if binding.credentials is None:
            bound = grpc_server.add_insecure_port(address)
        else:
            bound = grpc_server.add_secure_port(address, binding.credentials)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise OSError(f"failed to start GRPC service: Unavailable - Socket '{address}' already in use")
    await grpc_server.start()
    return grpc_server


def _as_open_infer_error(error: BaseException) -> OpenInferError:
    return error if isinstance(error, OpenInferError) else InternalError(str(error))
