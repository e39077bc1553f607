"""The features as protocol extensions: what GET /v2 reports, which group guards each endpoint,
and that every RPC of the service is served by the protocol or one feature."""

from __future__ import annotations

import asyncio

import orjson

from openinfer import features
from openinfer._proto import grpc_service_pb2 as pb
from openinfer.backends.registry import BackendRegistry
from openinfer.app.cli import serve_parser
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.frontends.access import PROTOCOL_GROUPS
from openinfer.frontends.grpc.service import RPC_GROUPS, compose_servicer
from openinfer.frontends.http import handlers
from openinfer.frontends.http.app import HttpApp, HttpRequest
from openinfer.frontends.http.paths import MODEL
from openinfer.app.server_options import server_options
from openinfer.app.settings import Settings

#: Triton 2.73's GET /v2 extensions, in its order.
TRITON_EXTENSIONS = [
    "classification", "sequence", "model_repository", "model_repository(unload_dependents)",
    "schedule_policy", "model_configuration", "system_shared_memory", "cuda_shared_memory",
    "binary_tensor_data", "parameters", "statistics", "trace", "logging",
]
#: tritonserver's restricted-API groups.
TRITON_GROUPS = {
    "health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
    "statistics", "trace", "logging",
}


def test_names_are_tritons_in_its_order():
    assert features.extension_names(features.load()) == TRITON_EXTENSIONS


def test_the_server_reports_the_names_the_composition_root_gives_it(tmp_path):
    args = Settings.from_args(serve_parser().parse_args(["--model-repository", str(tmp_path)]))
    options = server_options(args)
    assert InferenceServer(options, BackendRegistry()).metadata().extensions == TRITON_EXTENSIONS
    assert InferenceServer(ServerOptions([tmp_path]), BackendRegistry()).metadata().extensions == []


def test_groups_are_tritons():
    assert set(PROTOCOL_GROUPS) | set(features.groups(features.load())) == TRITON_GROUPS


def test_every_rpc_of_the_service_belongs_to_the_protocol_or_one_extension():
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    owners: dict[str, list[str]] = {}
    for feature in features.load():
        for rpc in feature.rpc_names():
            owners.setdefault(rpc, []).append(feature.name)
    for method in service.methods:
        in_protocol = method.name in RPC_GROUPS
        assert in_protocol + len(owners.get(method.name, [])) == 1, method.name
    servicer, groups = compose_servicer(features.grpc_rpcs(features.load()))
    for method in service.methods:
        assert callable(getattr(servicer, method.name)), method.name
        assert groups[method.name] in TRITON_GROUPS, method.name


def test_each_extension_route_carries_its_group(tmp_path):
    server = InferenceServer(ServerOptions([tmp_path]), BackendRegistry())
    app = HttpApp(server)
    handlers.install(app, features.http_installers(features.load()))
    groups = {route.group for route in app.routes}
    assert groups == TRITON_GROUPS
    by_pattern = {route.pattern.pattern: route.group for route in app.routes}
    assert by_pattern[r"/v2/trace/setting$"] == "trace"
    assert by_pattern[r"/v2/logging$"] == "logging"
    # The statistics of every model are routed before a model called "stats" could take them.
    patterns = [route.pattern.pattern for route in app.routes]
    assert patterns.index(r"/v2/models/stats$") < patterns.index(
        MODEL + "$"
    )


def test_a_handler_is_a_function_of_the_app_and_the_request(tmp_path):
    args = Settings.from_args(serve_parser().parse_args(["--model-repository", str(tmp_path)]))
    server = InferenceServer(server_options(args), BackendRegistry())
    app = HttpApp(server)
    response = asyncio.run(handlers.server_metadata(app, HttpRequest("GET", "/v2", {}, b"")))
    assert response.status == 200
    assert orjson.loads(response.body)["extensions"] == TRITON_EXTENSIONS
