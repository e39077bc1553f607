"""tritonserver's gRPC transport flags: TLS (`--grpc-use-ssl`), mutual TLS
(`--grpc-use-ssl-mutual`) with certificates the test makes, and the keep-alive and connection
age flags passed to gRPC as its channel arguments."""

from __future__ import annotations

import datetime
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from openinfer.frontends.grpc import transport_options
from tests.e2e import ext_models
from tests.e2e.ext_models import IN_PROCESS
from tests.helpers import Server, write_model


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: str, key, issuer_name: str, issuer_key, ca: bool, san: str | None = None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> SimpleNamespace:
    """A CA, a server certificate for 'localhost' and a client certificate, as PEM files."""
    pytest.importorskip("cryptography", reason="cryptography is not installed (the test extra)")
    from cryptography.hazmat.primitives import serialization

    folder = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _certificate("test CA", ca_key, "test CA", ca_key, ca=True)
    files = {}
    for name, san in (("server", "localhost"), ("client", None)):
        key = _key()
        cert = _certificate(name, key, "test CA", ca_key, ca=False, san=san)
        files[f"{name}_key"] = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption())
        files[f"{name}_cert"] = cert.public_bytes(serialization.Encoding.PEM)
    files["ca"] = ca.public_bytes(serialization.Encoding.PEM)
    paths = {}
    for name, data in files.items():
        path = folder / f"{name}.pem"
        path.write_bytes(data)
        paths[name] = str(path)
    return SimpleNamespace(**paths)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    config = ext_models.IDENTITY_CONFIG.format(name="identity", dtype="TYPE_FP32", max_batch=0) + IN_PROCESS
    write_model(repo, "identity", config, ext_models.IDENTITY)
    return repo


def _echo(client) -> list[float]:
    tensor = grpcclient.InferInput("INPUT0", [2], "FP32")
    tensor.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
    return client.infer("identity", [tensor]).as_numpy("OUTPUT0").tolist()


def test_tls(repo, pki):
    args = ["--grpc-use-ssl=true", f"--grpc-server-cert={pki.server_cert}", f"--grpc-server-key={pki.server_key}"]
    with Server(repo, args) as server:
        secure = grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=pki.ca)
        assert secure.is_server_ready() and _echo(secure) == [1, 2]
        plain = grpcclient.InferenceServerClient(server.grpc_url)
        with pytest.raises(InferenceServerException):
            plain.is_server_live()


def test_mutual_tls_refuses_a_client_without_a_certificate(repo, pki):
    args = ["--grpc-use-ssl-mutual=true", f"--grpc-server-cert={pki.server_cert}",
            f"--grpc-server-key={pki.server_key}", f"--grpc-root-cert={pki.ca}"]
    with Server(repo, args) as server:
        client = grpcclient.InferenceServerClient(
            server.grpc_url, ssl=True, root_certificates=pki.ca, private_key=pki.client_key,
            certificate_chain=pki.client_cert)
        assert _echo(client) == [1, 2]
        anonymous = grpcclient.InferenceServerClient(server.grpc_url, ssl=True, root_certificates=pki.ca)
        with pytest.raises(InferenceServerException):
            anonymous.is_server_live()


def test_an_unreadable_certificate_stops_the_server_before_any_model_loads(repo, tmp_path):
    server = Server(repo, ["--grpc-use-ssl=true", f"--grpc-server-cert={tmp_path / 'missing.pem'}",
                           f"--grpc-server-key={tmp_path / 'missing.pem'}"])
    with pytest.raises(RuntimeError, match="server exited early"):
        server.start()
    assert f"error: cannot read --grpc-server-cert '{tmp_path / 'missing.pem'}': No such file or directory" \
        in server.log()
    assert "successfully loaded" not in server.log()


def test_keepalive_flags_become_grpc_channel_arguments(repo):
    from openinfer.app.serve_flags import serve_parser

    args = serve_parser().parse_args([
        "--model-repository", "x", "--grpc-keepalive-time", "10000", "--grpc-keepalive-timeout", "3000",
        "--grpc-keepalive-permit-without-calls", "true", "--grpc-http2-max-pings-without-data", "0",
        "--grpc-http2-min-recv-ping-interval-without-data", "5000", "--grpc-http2-max-ping-strikes", "0",
        "--grpc-max-connection-age", "60000", "--grpc-max-connection-age-grace", "5000",
    ])
    assert dict(transport_options.channel_options(args)) == {
        "grpc.keepalive_time_ms": 10000, "grpc.keepalive_timeout_ms": 3000,
        "grpc.keepalive_permit_without_calls": 1, "grpc.http2.max_pings_without_data": 0,
        "grpc.http2.min_ping_interval_without_data_ms": 5000, "grpc.http2.max_ping_strikes": 0,
        "grpc.max_connection_age_ms": 60000, "grpc.max_connection_age_grace_ms": 5000,
    }
    # And a server started with them serves.
    flags = ["--grpc-keepalive-time=10000", "--grpc-keepalive-permit-without-calls=true",
             "--grpc-max-connection-age=60000"]
    with Server(repo, flags) as server:
        assert _echo(grpcclient.InferenceServerClient(server.grpc_url)) == [1, 2]
