"""A feature written outside openinfer plugs in, by its one line in `FEATURES` or by an entry point
of the package that brings it: its flag parses,
`GET /v2` names it, its restricted-API group guards its route, its state reaches its endpoint,
and the backend it brings serves a model over HTTP and gRPC."""

from __future__ import annotations

import json
import textwrap
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from openinfer import features
from openinfer.app.serve_flags import serve_parser
from tests.helpers import InProcessServer, http_status

TOY_FEATURE = '''
from openinfer.features.contract import Contribution, Feature
from openinfer.frontends.http.app import json_response


def add_flags(groups):
    groups["Toy"].add_argument("--toy-greeting", default="hello", metavar="TEXT", help="what GET /v2/toy says")


def configure(settings):
    return Contribution(state={"greeting": settings.toy_greeting})


def install(app, group):
    async def greet(req):
        return json_response(app.server.feature_state("toy"))

    app.add_route(r"/v2/toy", "GET", group, greet)


FEATURE = Feature(
    name="toy", extensions=("toy",), group="toy", flags=add_flags, configure=configure, http=install,
    backends={"doubler": "toy_feature.backend:DoublerBackend"},
)
'''

TOY_BACKEND = '''
from openinfer.backends.threaded import ThreadedInstance
from openinfer.core.backend import Backend


class DoublerInstance(ThreadedInstance):
    def run(self, inputs, outputs):
        return {"OUT": inputs["IN"] * 2}


class DoublerBackend(Backend):
    name = "doubler"

    async def create_instance(self, ctx, spec):
        return DoublerInstance(ctx, spec)
'''

CONFIG = """
backend: "doubler"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


@pytest.fixture(params=["listed", "installed"])
def toy(request, tmp_path, monkeypatch):
    """The toy feature's package on the path, named in `FEATURES` or installed with an entry
    point (a distribution's metadata beside the package, as pip writes it)."""
    package = tmp_path / "src" / "toy_feature"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(TOY_FEATURE))
    (package / "backend.py").write_text(textwrap.dedent(TOY_BACKEND))
    if request.param == "listed":
        monkeypatch.setattr(features, "FEATURES", [*features.FEATURES, "toy_feature:FEATURE"])
    else:
        metadata = tmp_path / "src" / "toy_feature-1.0.dist-info"
        metadata.mkdir()
        (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-feature\nVersion: 1.0\n")
        (metadata / "entry_points.txt").write_text(f"[{features.ENTRY_POINT_GROUP}]\ntoy = toy_feature:FEATURE\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    repository = tmp_path / "models"
    (repository / "doubled" / "1").mkdir(parents=True)
    (repository / "doubled" / "config.pbtxt").write_text(CONFIG)
    return repository


def test_its_flag_joins_the_command_line_before_the_deprecated_flags(toy):
    help_text = serve_parser().format_help()
    assert "--toy-greeting TEXT" in help_text
    assert help_text.index("\nToy:\n") < help_text.index("\nDeprecated:\n")
    assert serve_parser().parse_args(["--model-repository", str(toy), "--toy-greeting", "hi"]).toy_greeting == "hi"


def test_it_is_served_as_the_protocol_extensions_are(toy):
    flags = {"toy_greeting": "hi", "http_restricted_api": ["toy:toy-key=secret"]}
    with InProcessServer(toy, flags) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.get_server_metadata()["extensions"][-1] == "toy"
        assert http_status(f"http://{server.http_url}/v2/toy") == 403
        assert http_status(f"http://{server.http_url}/v2/toy", {"toy-key": "secret"}) == 200
        request = urllib.request.Request(f"http://{server.http_url}/v2/toy", headers={"toy-key": "secret"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read()) == {"greeting": "hi"}

        data = np.array([1.0, 2.0, 3.5], dtype=np.float32)
        http_input = httpclient.InferInput("IN", [3], "FP32")
        http_input.set_data_from_numpy(data)
        answer = client.infer("doubled", [http_input]).as_numpy("OUT")
        np.testing.assert_array_equal(answer, data * 2)
        grpc_input = grpcclient.InferInput("IN", [3], "FP32")
        grpc_input.set_data_from_numpy(data)
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        np.testing.assert_array_equal(grpc.infer("doubled", [grpc_input]).as_numpy("OUT"), data * 2)


def test_an_unknown_backend_is_still_refused_without_it(tmp_path):
    repository = tmp_path / "models"
    (repository / "doubled" / "1").mkdir(parents=True)
    (repository / "doubled" / "config.pbtxt").write_text(CONFIG)
    with InProcessServer(repository, {"exit_on_error": False, "strict_readiness": False}) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert not client.is_model_ready("doubled")
        with pytest.raises(InferenceServerException):
            client.infer("doubled", [httpclient.InferInput("IN", [3], "FP32")])
