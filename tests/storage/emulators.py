"""Object stores for tests: moto's S3 server, a GCS emulator and Azurite, on free local ports."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

from tests.helpers import free_port

#: A Python model whose answer tells which copy of it runs: OUTPUT0 = INPUT0 + ADD.
ADD_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

ADD_MODEL = """
import triton_python_backend_utils as pb_utils

ADD = {add}


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x + ADD)]))
        return out
"""


def add_model_files(name: str, add: float) -> dict[str, bytes]:
    """`<name>/config.pbtxt` and `<name>/1/model.py`, as keys relative to the repository."""
    return {
        f"{name}/config.pbtxt": textwrap.dedent(ADD_CONFIG.format(name=name)).encode(),
        f"{name}/1/model.py": textwrap.dedent(ADD_MODEL.format(add=add)).encode(),
    }


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class MotoS3:
    """moto's S3 server in a process of its own (so a test can take it away: an outage)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> MotoS3:
        import sys

        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **S3_ENV},
        )
        import urllib.request

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.endpoint, timeout=1)
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto's S3 server did not start")

    def client(self):
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def put(self, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
        client = self.client()
        for key, body in files.items():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{key}" if prefix else key, Body=body)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for key, body in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)



def _wait_port(port: int, process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not start")


class _FsspecEmulator:
    """An emulator process reached through an fsspec filesystem: the repository lives under
    `<root>/repo`."""

    root = ""
    fs: object
    process: subprocess.Popen

    def put(self, files: dict[str, bytes]) -> None:
        self.fs.pipe({f"{self.root}/repo/{key}": body for key, body in files.items()})  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class GcsEmulator(_FsspecEmulator):
    """gcp-storage-emulator (the JSON API) in memory; gcsfs finds it via STORAGE_EMULATOR_HOST."""

    bucket = root = "models"

    def __init__(self) -> None:
        import sys

        self.port = free_port()
        self.env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{self.port}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
             "--port", str(self.port), "--in-memory"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, self.process, "the GCS emulator")
        self.fs = self._fs()
        self.fs.mkdir(self.bucket)

    def _fs(self):
        os.environ.update(self.env)
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(token="anon", skip_instance_cache=True)

    @property
    def url(self) -> str:
        return f"gs://{self.bucket}/repo"



AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_command() -> str | None:
    """Azurite's blob service: on PATH, or where `.ci/run` installs it (npm, under .cache/)."""
    from tests.helpers import ROOT

    for candidate in (os.environ.get("AZURITE_BLOB"), shutil.which("azurite-blob"),
                      str(ROOT / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


class Azurite(_FsspecEmulator):
    """Azurite's blob service in memory, reached through a connection string."""

    account = "devstoreaccount1"
    container = root = "models"

    def __init__(self, command: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)  # its debug and lock files
        self.port = free_port()
        self.process = subprocess.Popen(
            [command, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
             "--skipApiVersionCheck", "--loose"],
            cwd=str(workdir),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_port(self.port, self.process, "Azurite")
        self.env = {"AZURE_STORAGE_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{self.account};")}
        import adlfs

        self.fs = adlfs.AzureBlobFileSystem(connection_string=self.env["AZURE_STORAGE_CONNECTION_STRING"],
                                            skip_instance_cache=True)
        self.fs.mkdir(self.container)

    @property
    def url(self) -> str:
        return f"as://{self.account}/{self.container}/repo"

