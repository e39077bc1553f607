"""`EXECUTION_ENV_PATH`: a model runs on a packed environment's interpreter, as in Triton's
L0_backend_python/env (unpacked once per archive and modification time, `$$TRITON_MODEL_DIRECTORY`,
an unpacked folder used as it is) and its EXECUTION_ENV_PATH path-traversal regression test:
archives whose members would land outside the extraction folder fail the load with libarchive's
words and write nothing outside.

The environment is a real one: a venv (no pip) that sees numpy through a `.pth` file, packed with
`tarfile` as conda-pack packs an environment (members relative to its root)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

REPORTER = '''
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        facts = json.dumps({
            "executable": sys.executable,
            "prefix": sys.prefix,
            "virtual_env": os.environ.get("VIRTUAL_ENV", ""),
            "path": os.environ.get("PATH", ""),
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
        })
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([facts.encode()], dtype=np.object_))])
                for _ in requests]
'''


def _config(env_path: str, count: int = 1) -> str:
    return f"""
backend: "python"
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: {count} }} ]
parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{env_path}" }} }}
"""


def _make_venv(folder: Path) -> Path:
    """A venv whose interpreter is the base of the test's one, seeing numpy through a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = next(folder.glob("lib/python3*/site-packages"))
    (site / "numpy_path.pth").write_text(str(Path(np.__file__).resolve().parents[1]) + "\n")
    return folder


def _pack(folder: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        for child in sorted(folder.iterdir()):
            tar.add(child, arcname=child.name)
    return archive


def _add(tar: tarfile.TarFile, name: str, body: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime = kind, link, int(time.time())
    info.size = len(body) if kind == tarfile.REGTYPE else 0
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    tar.addfile(info, io.BytesIO(body) if kind == tarfile.REGTYPE else None)


def _malicious(archive: Path, members: list[tuple]) -> None:
    """An archive shaped like Triton's zipslip one: the harmful members, then `bin/activate`."""
    with tarfile.open(archive, "w:gz") as tar:
        for member in members:
            _add(tar, *member)
        _add(tar, "bin/activate", b"#!/bin/bash\n")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("execution_env")
    venv = _make_venv(root / "venv")
    repo = root / "models"
    # Packed, next to the model, named through $$TRITON_MODEL_DIRECTORY; two instances share one unpacking.
    model_dir = write_model(repo, "packed", _config("$$TRITON_MODEL_DIRECTORY/python_env.tar.gz", count=2), REPORTER)
    archive = _pack(venv, model_dir / "python_env.tar.gz")
    # The same archive named by its absolute path from another model: still unpacked once.
    write_model(repo, "shared", _config(str(archive)), REPORTER)
    # An unpacked environment folder is used where it is.
    write_model(repo, "unpacked", _config(str(venv)), REPORTER)

    outside = root / "outside"
    outside.mkdir()
    marker = f"openinfer_zipslip_{uuid.uuid4().hex}"
    cases = {
        # A relative member climbing out of the extraction folder (it would land in the temp dir).
        "zipslip_relative": ([(f"../../{marker}", b"traversal-test\n")], "Path contains '..'"),
        "zipslip_absolute": ([(str(outside / "absolute_marker"), b"traversal-test\n")], "Path is absolute"),
        # A symlink to a folder outside, then a member written through it.
        "zipslip_symlink": (
            [("lib/escape", b"", tarfile.SYMTYPE, str(outside)), ("lib/escape/symlink_marker", b"traversal-test\n")],
            "Cannot extract through symlink lib/escape/symlink_marker",
        ),
    }
    for name, (members, _) in cases.items():
        folder = write_model(repo, name, _config("$$TRITON_MODEL_DIRECTORY/malicious_env.tar.gz"), REPORTER)
        _malicious(folder / "malicious_env.tar.gz", members)
    no_activate = write_model(repo, "no_activate", _config("$$TRITON_MODEL_DIRECTORY/env.tar.gz"), REPORTER)
    with tarfile.open(no_activate / "env.tar.gz", "w:gz") as tar:
        _add(tar, "bin/python", b"")
    write_model(repo, "missing_env", _config("$$TRITON_MODEL_DIRECTORY/absent.tar.gz"), REPORTER)

    server = Server(repo, args=[
        "--model-control-mode=explicit", "--log-verbose=1",
        "--load-model", "packed", "--load-model", "shared", "--load-model", "unpacked",
    ]).start(wait_for="ready")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield {"server": server, "client": client, "repo": repo, "venv": venv, "archive": archive,
           "cases": cases, "outside": outside, "marker": marker}
    client.close()
    try:
        assert server.stop() == 0, server.log()
    finally:
        Path(tempfile.gettempdir(), marker).unlink(missing_ok=True)


def _facts(client, model: str) -> dict:
    tensor = grpcclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, dtype=np.float32))
    return json.loads(client.infer(model, [tensor]).as_numpy("OUT")[0])


def _extractions(server: Server, archive: Path) -> int:
    return sum(
        1 for line in server.log().splitlines()
        if f"Extracting Python execution env {os.path.realpath(archive)}" in line
    )


def test_the_model_runs_on_the_archives_interpreter(setup):
    server, client = setup["server"], setup["client"]
    facts = _facts(client, "packed")
    prefix = Path(facts["prefix"]).resolve()
    # Unpacked into a private folder of its own: not the venv it was packed from, not the server's.
    assert prefix.parent.name.startswith("python_env_")
    assert prefix.parent.parent == Path(tempfile.gettempdir()).resolve()
    assert prefix != setup["venv"].resolve() and Path(sys.prefix).resolve() != prefix
    assert facts["executable"] == os.path.join(facts["prefix"], "bin", "python")
    assert (prefix / "bin" / "activate").is_file() and (prefix / "pyvenv.cfg").is_file()
    # The variables Triton's stub launcher sets.
    assert Path(facts["virtual_env"]).resolve() == prefix
    assert facts["path"].split(os.pathsep)[0] == os.path.join(facts["virtual_env"], "bin")
    assert facts["ld_library_path"].split(os.pathsep)[0] == os.path.join(facts["virtual_env"], "lib")
    assert f"Using Python execution env {setup['repo'] / 'packed' / 'python_env.tar.gz'}" in server.log()


def test_an_archive_is_unpacked_once_for_every_instance_and_model(setup):
    server, client = setup["server"], setup["client"]
    packed, shared = _facts(client, "packed"), _facts(client, "shared")
    assert packed["prefix"] == shared["prefix"]
    assert _extractions(server, setup["archive"]) == 1


def test_an_unpacked_folder_is_used_where_it_is(setup):
    facts = _facts(setup["client"], "unpacked")
    assert Path(facts["prefix"]).resolve() == setup["venv"].resolve()
    assert "Returning canonical path since EXECUTION_ENV_PATH does not contain compressed path. " \
        f"Path: {setup['venv'].resolve()}" in setup["server"].log()


def test_a_changed_archive_is_unpacked_again(setup):
    """Triton's re-extraction check: a changed model.py reuses the unpacked archive, a newer archive
    is unpacked again."""
    server, client, archive = setup["server"], setup["client"], setup["archive"]
    before = _facts(client, "packed")["prefix"]
    model_py = setup["repo"] / "packed" / "1" / "model.py"
    os.utime(model_py, (time.time() + 5, time.time() + 5))
    client.load_model("packed")
    assert _extractions(server, archive) == 1
    os.utime(archive, (time.time() + 10, time.time() + 10))
    client.load_model("packed")
    assert _extractions(server, archive) == 2
    after = _facts(client, "packed")["prefix"]
    assert after != before and Path(after, "bin", "activate").is_file()


@pytest.mark.parametrize("model", ["zipslip_relative", "zipslip_absolute", "zipslip_symlink"])
def test_a_member_escaping_the_extraction_folder_fails_the_load(setup, model):
    client, outside = setup["client"], setup["outside"]
    members, words = setup["cases"][model]
    with pytest.raises(InferenceServerException) as caught:
        client.load_model(model)
    assert f"archive_write_header() failed with error code = -25 error message is {words}" in caught.value.message()
    assert not client.is_model_ready(model)
    # Nothing was written outside: not the climbing member, not the absolute one, not through the link.
    assert not Path(tempfile.gettempdir(), setup["marker"]).exists()
    assert list(outside.iterdir()) == []


def test_an_environment_without_activate_or_archive_fails_the_load(setup):
    client, repo = setup["client"], setup["repo"]
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("no_activate")
    message = caught.value.message()
    assert "/bin/activate does not exist. The Python environment should contain an 'activate' script." in message
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("missing_env")
    assert f"Failed to get the canonical path for {repo / 'missing_env' / 'absent.tar.gz'}." in caught.value.message()


def test_a_malicious_archive_stops_the_server_at_start_up(tmp_path):
    """Triton's regression test starts the server on the malicious model: it must not come up."""
    marker = f"openinfer_zipslip_{uuid.uuid4().hex}"
    folder = write_model(tmp_path, "zipslip_relative", _config("$$TRITON_MODEL_DIRECTORY/malicious_env.tar.gz"), REPORTER)
    _malicious(folder / "malicious_env.tar.gz", [(f"../../{marker}", b"traversal-test\n")])
    server = Server(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="server exited early"):
            server.start()
        assert server.process.returncode == 1
        assert "archive_write_header() failed with error code = -25 error message is Path contains '..'" in server.log()
        assert not Path(tempfile.gettempdir(), marker).exists()
    finally:
        server.stop()
        Path(tempfile.gettempdir(), marker).unlink(missing_ok=True)
