"""Triton's remote repository paths -> an fsspec filesystem and the root inside it.

`s3://bucket/path`, `s3://host:port/bucket/path` (plain HTTP), `s3://https://host:port/bucket/path`,
`gs://bucket/path` and `as://account/container/path`. Credentials come from the file that
TRITON_CLOUD_CREDENTIAL_PATH names (`credentials`), or else from each SDK's standard chain
(AWS_* variables, profiles and instance roles; GOOGLE_APPLICATION_CREDENTIALS and the metadata
server; AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY/AZURE_STORAGE_AUTH_TYPE or a connection string),
as Triton reads them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from . import credentials

SCHEMES = ("s3://", "gs://", "as://")

#: Where Triton copies each kind of remote repository when the variable names a folder.
MOUNT_VARIABLES = {"s3": "TRITON_AWS_MOUNT_DIRECTORY", "gs": "TRITON_GCS_MOUNT_DIRECTORY", "as": "TRITON_AZURE_MOUNT_DIRECTORY"}

_EXTRA_HINT = "install openinfer's 'storage' extra (pip install 'openinfer[storage]')"


def is_remote(spec: str) -> bool:
    return spec.startswith(SCHEMES)


@dataclass
class Location:
    """One remote repository: how to reach it and where its models live."""

    url: str
    scheme: str
    root: str  # "bucket/prefix" (S3, GCS) or "container/prefix" (Azure), no trailing slash
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def mount_directory(self) -> str | None:
        return os.environ.get(MOUNT_VARIABLES[self.scheme]) or None

    def filesystem(self) -> Any:
        """A fresh fsspec filesystem (listing caches are ours to manage, not fsspec's)."""
        try:
            if self.scheme == "s3":
                import s3fs

                return s3fs.S3FileSystem(skip_instance_cache=True, **self.options)
            if self.scheme == "gs":
                # The JSON API client: listing and reading is all a mirror needs (gcsfs' default
                # class first asks a gRPC control plane about the bucket's layout).
                from gcsfs.core import GCSFileSystem

                return GCSFileSystem(skip_instance_cache=True, **self.options)
            import adlfs

            return adlfs.AzureBlobFileSystem(skip_instance_cache=True, **self.options)
        except ImportError as exc:
            raise ValueError(f"model repository '{self.url}' needs {exc.name}: {_EXTRA_HINT}") from None


def parse(url: str) -> Location:
    """Refuses what Triton refuses: a path with no bucket (or container)."""
    scheme, rest = url.split("://", 1)
    if scheme == "s3":
        return _parse_s3(url, rest)
    if scheme == "gs":
        root = rest.strip("/")
        if not root:
            raise ValueError(f"model repository '{url}' names no bucket")
        return Location(url, "gs", root, _gcs_options(url))
    account, _, path = rest.partition("/")
    root = path.strip("/")
    if not account or not root:
        raise ValueError(f"model repository '{url}' must look like as://account/container/path")
    return Location(url, "as", root, _azure_options(url, account))


def _parse_s3(url: str, rest: str) -> Location:
    options: dict[str, Any] = {
        # Bounded waits: an unreachable store must fail a poll, not hang it.
        "config_kwargs": {"connect_timeout": 5, "read_timeout": 30, "retries": {"max_attempts": 2}},
    }
    endpoint_scheme = "http"
    for prefix in ("https://", "http://"):
        if rest.startswith(prefix):
            endpoint_scheme, rest = prefix[:-3], rest[len(prefix) :]
    first, _, path = rest.partition("/")
    if ":" in first:  # s3://host:port/bucket/path: a private or local S3
        options["endpoint_url"] = f"{endpoint_scheme}://{first}"
        options["config_kwargs"]["s3"] = {"addressing_style": "path"}
        rest = path
    root = rest.strip("/")
    if not root:
        raise ValueError(f"model repository '{url}' names no bucket")
    options.update(credentials.s3(url).options())
    return Location(url, "s3", root, options)


def _gcs_options(url: str) -> dict[str, Any]:
    token = credentials.gcs(url)  # first: a credential file that cannot serve this path refuses it
    # gcsfs reads STORAGE_EMULATOR_HOST itself; an emulator takes no credentials.
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return {"token": "anon"}
    return {"token": token} if token else {}


def _azure_options(url: str, account: str) -> dict[str, Any]:
    connection = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if connection and not credentials.configured():
        return {"connection_string": connection}
    return credentials.azure(url).options(account)
