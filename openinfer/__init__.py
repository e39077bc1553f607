"""openinfer: a Triton-compatible inference server written in Python."""

__version__ = "0.1.0"
#: The Triton release whose protocols this server speaks; reported by server metadata.
TRITON_PROTOCOL_VERSION = "2.73.0"

__all__ = ["TRITON_PROTOCOL_VERSION", "Server", "__version__"]


def __getattr__(name: str):
    """`openinfer.Server` (the in-process API) is imported on first use, so `import openinfer`
    stays light for the command line and for model workers."""
    if name == "Server":
        from .api import Server

        return Server
    raise AttributeError(f"module 'openinfer' has no attribute '{name}'")
