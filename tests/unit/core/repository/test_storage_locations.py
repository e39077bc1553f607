"""Triton's remote repository paths, parsed."""

from __future__ import annotations

import pytest

from openinfer.core.repository.storage import is_remote, parse


def test_s3_paths_with_and_without_an_endpoint() -> None:
    plain = parse("s3://bucket/path/to/repo/")
    assert (plain.scheme, plain.root) == ("s3", "bucket/path/to/repo")
    assert "endpoint_url" not in plain.options
    private = parse("s3://minio.local:9000/bucket/repo")
    assert private.root == "bucket/repo"
    assert private.options["endpoint_url"] == "http://minio.local:9000"
    secure = parse("s3://https://minio.local:9443/bucket")
    assert (secure.root, secure.options["endpoint_url"]) == ("bucket", "https://minio.local:9443")


def test_gcs_and_azure_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse("gs://bucket/repo").root == "bucket/repo"
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_KEY", "a2V5")
    azure = parse("as://account/container/repo")
    assert azure.root == "container/repo"
    assert azure.options == {"account_name": "account", "account_key": "a2V5"}


@pytest.mark.parametrize("url", ["s3://", "s3://host:9000/", "gs://", "as://account", "as://account/"])
def test_paths_without_a_bucket_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse(url)


def test_local_paths_are_not_remote() -> None:
    assert is_remote("s3://b") and is_remote("gs://b") and is_remote("as://a/c")
    assert not is_remote("/models") and not is_remote("models")


def test_mount_directory_follows_tritons_variables(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("TRITON_AWS_MOUNT_DIRECTORY", str(tmp_path))
    assert parse("s3://bucket").mount_directory == str(tmp_path)
    monkeypatch.delenv("TRITON_GCS_MOUNT_DIRECTORY", raising=False)
    assert parse("gs://bucket").mount_directory is None
