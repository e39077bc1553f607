"""Restricted API groups shared by every frontend: `--http-restricted-api`, `--grpc-restricted-protocol`.

A restricted group demands one header with one exact value; the comparison runs in constant
time so the value cannot be guessed byte by byte.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

#: The KServe protocol's own groups; each protocol extension adds its own
#: (`openinfer/extensions/`), and the composition root passes them all to `parse`.
PROTOCOL_GROUPS = ("health", "metadata", "inference")
OPENAI_GROUPS = ("inference", "embedding", "model-repository", "metrics", "health")


@dataclass(frozen=True)
class Restriction:
    key: str
    value: str

    def allows(self, presented: str | None) -> bool:
        if presented is None:
            return False
        return hmac.compare_digest(presented.encode(), self.value.encode())


class AccessPolicy:
    """Which groups need which header."""

    def __init__(self, rules: dict[str, Restriction] | None = None) -> None:
        self.rules = rules or {}

    def restriction(self, group: str) -> Restriction | None:
        return self.rules.get(group)

    @classmethod
    def parse(cls, specs: list[str], groups: tuple[str, ...] = PROTOCOL_GROUPS, feature: str = "api") -> AccessPolicy:
        """Parse `<api>[,<api>...]:<key>=<value>` specs (tritonserver's syntax). `feature` is what
        tritonserver calls a group in its errors: "api" over HTTP, "protocol" over gRPC."""
        rules: dict[str, Restriction] = {}
        for spec in specs:
            apis, sep, pair = spec.partition(":")
            key, eq, value = pair.partition("=")
            if not sep or not eq or not key:
                raise ValueError(f"restricted api option '{spec}' must look like <api>[,<api>...]:<key>=<value>")
            for api in (a.strip() for a in apis.split(",")):
                if api not in groups:
                    raise ValueError(f"unknown restricted {feature} '{api}'")
                if api in rules:
                    raise ValueError(f"restricted {feature} '{api}' can not be specified in multiple config groups")
                rules[api] = Restriction(key.strip(), value)
        return cls(rules)
