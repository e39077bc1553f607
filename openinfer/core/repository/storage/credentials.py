"""Cloud credentials from `TRITON_CLOUD_CREDENTIAL_PATH`, as Triton reads them.

The variable names a local JSON file with one section per cloud ("s3", "gs", "as"); each section
maps a path prefix to a credential, and a repository uses the credential of the longest prefix
its path starts with ("" matches every path). A cloud without a section, or a path no prefix
matches, has no credential: Triton refuses it rather than fall back to the environment. Without
the variable, each cloud's credential comes from its environment variables.

    {"s3": {"": {"key_id": "...", "secret_key": "...", "region": "...", "session_token": "",
                 "profile": ""}},
     "gs": {"gs://bucket-2": "/path/to/service-account.json"},
     "as": {"": {"account_str": "...", "account_key": "..."},
            "as://account/container": {"account_str": "...", "auth_type": "managed_identity",
                                       "client_id": ""}}}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

VARIABLE = "TRITON_CLOUD_CREDENTIAL_PATH"


@dataclass(frozen=True)
class S3Credential:
    key_id: str = ""
    secret_key: str = ""
    region: str = ""
    session_token: str = ""
    profile: str = ""

    def options(self) -> dict[str, Any]:
        """s3fs's arguments: the keys when both are given, else the profile, else the SDK's chain."""
        if self.key_id and self.secret_key:
            options: dict[str, Any] = {"key": self.key_id, "secret": self.secret_key}
            if self.session_token:
                options["token"] = self.session_token
            if self.region:
                options["client_kwargs"] = {"region_name": self.region}
            return options
        if self.profile:
            return {"profile": self.profile}
        return {}


@dataclass(frozen=True)
class AzureCredential:
    account: str = ""  # "" means the account named in the path
    account_key: str = ""
    auth_type: str = ""  # "key" (or ""), "managed_identity" or "default"
    client_id: str = ""  # a user-assigned managed identity

    @classmethod
    def from_environment(cls) -> AzureCredential:
        env = os.environ.get
        return cls(env("AZURE_STORAGE_ACCOUNT", ""), env("AZURE_STORAGE_KEY", ""),
                   env("AZURE_STORAGE_AUTH_TYPE", ""), env("AZURE_STORAGE_CLIENT_ID", ""))

    def options(self, path_account: str) -> dict[str, Any]:
        """adlfs's arguments for the account in the path (or the one the credential names)."""
        account = self.account or path_account.removesuffix(".blob.core.windows.net")
        if self.auth_type == "managed_identity":
            from azure.identity import ManagedIdentityCredential

            identity = ManagedIdentityCredential(client_id=self.client_id) if self.client_id \
                else ManagedIdentityCredential()
            return {"account_name": account, "credential": identity}
        if self.auth_type != "default" and self.account_key:
            return {"account_name": account, "account_key": self.account_key}
        return {"account_name": account, "anon": False}  # DefaultAzureCredential's chain


def configured() -> bool:
    return bool(os.environ.get(VARIABLE))


def lookup(cloud: str, path: str) -> Any:
    """The credential entry of the longest prefix of `path` in the file's `cloud` section: a
    dict (S3, Azure) or a file path (GCS). ValueError when the file cannot be read or nothing
    matches."""
    file = os.environ[VARIABLE]
    try:
        with open(file, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the cloud credential file '{file}' ({VARIABLE}): {exc}") from None
    section = document.get(cloud) if isinstance(document, dict) else None
    matches = [name for name in (section or {}) if path.startswith(name)]
    if not matches:
        raise ValueError(f"Cannot match credential for path  {path}")
    assert section is not None  # a name matched in it
    return section[max(matches, key=len)]


def s3(path: str) -> S3Credential:
    """Without the file, none: the AWS SDK's own chain reads the same variables Triton does
    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_SESSION_TOKEN, AWS_PROFILE)."""
    if not configured():
        return S3Credential()
    entry = _fields(lookup("s3", path), path)
    return S3Credential(entry.get("key_id", ""), entry.get("secret_key", ""), entry.get("region", ""),
                        entry.get("session_token", ""), entry.get("profile", ""))


def azure(path: str) -> AzureCredential:
    if not configured():
        return AzureCredential.from_environment()
    entry = _fields(lookup("as", path), path)
    return AzureCredential(entry.get("account_str", ""), entry.get("account_key", ""),
                           entry.get("auth_type", ""), entry.get("client_id", ""))


def gcs(path: str) -> str:
    """A service-account or user credential file; "" means Google's default chain (which reads
    GOOGLE_APPLICATION_CREDENTIALS)."""
    if not configured():
        return ""
    entry = lookup("gs", path)
    if not isinstance(entry, str):
        raise ValueError(f"the GCS credential for path {path} must be a credential file's path ({VARIABLE})")
    return entry


def _fields(entry: Any, path: str) -> dict[str, str]:
    if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
        raise ValueError(f"the credential for path {path} must be an object of strings ({VARIABLE})")
    return entry
