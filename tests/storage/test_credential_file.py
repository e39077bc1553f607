"""TRITON_CLOUD_CREDENTIAL_PATH: one JSON file of credentials per cloud and path prefix. Against
moto's S3 with authentication on, so a repository loads only when the file's longest matching
prefix gives it a key the store accepts."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient

from openinfer.core.repository.storage import credentials, parse
from tests.helpers import Server
from tests.storage.emulators import S3_ENV, add_model_files

pytestmark = pytest.mark.timeout(240)

READ_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@pytest.fixture
def store(moto_s3, monkeypatch):
    """Two buckets with a model each, one IAM user whose key may read them; then authentication
    is switched on: from here on, a request signed with any other key is refused."""
    for key, value in S3_ENV.items():  # what the environment offers: not a key the store knows
        monkeypatch.setenv(key, value)
    s3 = moto_s3.client()
    for bucket, add in (("bucket-a", 1), ("bucket-b", 2)):
        s3.create_bucket(Bucket=bucket)
        moto_s3.put(bucket, "repo", add_model_files(f"add_{bucket[-1]}", add))
    import boto3

    iam = boto3.client("iam", endpoint_url=moto_s3.endpoint, aws_access_key_id="testing",
                       aws_secret_access_key="testing", region_name="us-east-1")
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(READ_ALL))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    switch_on = urllib.request.Request(f"{moto_s3.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                       headers={"Content-Type": "text/plain"})  # a form body would be parsed away
    urllib.request.urlopen(switch_on).close()
    return moto_s3, {"key_id": key["AccessKeyId"], "secret_key": key["SecretAccessKey"], "region": "us-east-1"}


def _credential_file(tmp_path, monkeypatch, document) -> str:
    path = tmp_path / "cloud_credential.json"
    path.write_text(json.dumps(document))
    monkeypatch.setenv(credentials.VARIABLE, str(path))
    return str(path)


def test_each_repository_uses_the_credential_of_its_longest_prefix(store, tmp_path, monkeypatch):
    """"" gives the key the store accepts; the longer "bucket-a" prefix gives one it does not
    know (nor does it know the environment's): bucket-b loads, bucket-a is refused."""
    moto, good = store
    base = f"s3://127.0.0.1:{moto.port}"
    _credential_file(tmp_path, monkeypatch, {"s3": {
        "": good,
        f"{base}/bucket-a": {"key_id": "AKIAUNKNOWN000000000", "secret_key": "wrong"},
    }})
    with Server(f"{base}/bucket-b/repo").start(wait_for="ready") as server:  # type: ignore[arg-type]
        client = httpclient.InferenceServerClient(server.http_url)
        x = np.arange(4, dtype=np.float32)
        request = httpclient.InferInput("INPUT0", [4], "FP32")
        request.set_data_from_numpy(x)
        assert (client.infer("add_b", [request]).as_numpy("OUTPUT0") - x).tolist() == [2] * 4

    refused = Server(f"{base}/bucket-a/repo")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="server exited early"):
        refused.start(wait_for="ready", timeout=60)
    assert f"failed to poll model repository {base}/bucket-a/repo" in refused.log()
    assert "The AWS Access Key Id you provided does not exist in our records" in refused.log()


def test_a_path_no_credential_matches_is_refused_in_tritons_words(store, tmp_path, monkeypatch):
    moto, good = store
    url = f"s3://127.0.0.1:{moto.port}/bucket-a/repo"
    _credential_file(tmp_path, monkeypatch, {"s3": {f"s3://127.0.0.1:{moto.port}/bucket-b": good}})
    server = Server(url)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="server exited early"):
        server.start()
    assert f"Cannot match credential for path  {url}" in server.log()


def test_the_file_maps_onto_each_sdk(tmp_path, monkeypatch):
    """The prefixes and fields of Triton's format, for the clouds without an emulator that checks
    credentials here."""
    sa = tmp_path / "sa.json"
    _credential_file(tmp_path, monkeypatch, {
        "gs": {"": "", "gs://bucket-2": str(sa)},
        "s3": {"s3://profiled": {"profile": "team", "key_id": "", "secret_key": ""},
               "s3://keyed": {"key_id": "K", "secret_key": "S", "session_token": "T", "region": "eu-west-1"}},
        "as": {"": {"account_str": "", "account_key": "KEY"},
               "as://acct/identity": {"account_str": "other", "auth_type": "managed_identity", "client_id": "cid"},
               "as://acct/chain": {"auth_type": "default"}},
    })
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    assert parse("gs://bucket-2/models").options == {"token": str(sa)}
    assert parse("gs://bucket-1/models").options == {}  # "": Google's default chain
    assert parse("s3://profiled/models").options["profile"] == "team"
    keyed = parse("s3://keyed/models").options
    assert (keyed["key"], keyed["secret"], keyed["token"], keyed["client_kwargs"]) == \
        ("K", "S", "T", {"region_name": "eu-west-1"})
    assert parse("as://acct/box/models").options == {"account_name": "acct", "account_key": "KEY"}
    assert parse("as://acct.blob.core.windows.net/box/m").options["account_name"] == "acct"
    chain = parse("as://acct/chain/models").options
    assert chain == {"account_name": "acct", "anon": False}
    pytest.importorskip("azure.identity", reason="azure-identity is not installed (the storage extra)")
    identity = parse("as://acct/identity/models").options
    assert identity["account_name"] == "other"
    assert type(identity["credential"]).__name__ == "ManagedIdentityCredential"


@pytest.mark.parametrize("content, words", [
    ("{not json", "cannot read the cloud credential file"),
    (json.dumps({"gs": {"": {"not": "a path"}}}), "must be a credential file's path"),
    (json.dumps({"s3": {"": "a string"}}), "must be an object of strings"),
])
def test_a_bad_credential_file_is_refused_with_the_reason(tmp_path, monkeypatch, content, words):
    path = tmp_path / "creds.json"
    path.write_text(content)
    monkeypatch.setenv(credentials.VARIABLE, str(path))
    with pytest.raises(ValueError, match=words):
        parse("gs://bucket/models" if "gs" in content or "not json" in content else "s3://bucket/models")


def test_without_the_file_azure_reads_tritons_variables(monkeypatch):
    for name in (credentials.VARIABLE, "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY",
                 "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_AUTH_TYPE"):
        monkeypatch.delenv(name, raising=False)
    assert parse("as://acct/box/m").options == {"account_name": "acct", "anon": False}
    monkeypatch.setenv("AZURE_STORAGE_KEY", "KEY")
    assert parse("as://acct/box/m").options == {"account_name": "acct", "account_key": "KEY"}
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", "named")
    assert parse("as://acct/box/m").options == {"account_name": "named", "account_key": "KEY"}
    monkeypatch.setenv("AZURE_STORAGE_AUTH_TYPE", "default")  # the key stays unused
    assert parse("as://acct/box/m").options == {"account_name": "named", "anon": False}
