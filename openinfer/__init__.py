"""openinfer: a Triton-compatible inference server written in Python."""

__version__ = "0.1.0"
#: The Triton release whose protocols this server speaks; reported by server metadata.
TRITON_PROTOCOL_VERSION = "2.73.0"

__all__ = ["TRITON_PROTOCOL_VERSION", "__version__"]
