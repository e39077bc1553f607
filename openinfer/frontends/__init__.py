"""Frontends: thin translators between a wire format and the core (HTTP, gRPC, OpenAI, metrics)."""
