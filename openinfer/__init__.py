"""openinfer: a Triton-compatible inference server written in Python."""

__version__ = "0.1.0"
#: The Triton release whose protocols this server speaks; reported by server metadata.
TRITON_PROTOCOL_VERSION = "2.73.0"

__all__ = ["TRITON_PROTOCOL_VERSION", "Server", "__version__"]


def __getattr__(name: str):
    """`openinfer.Server` (the in-process API) is imported on first use, so `import openinfer`
    stays light for the command line and for model workers (and the core, which reads the
    version here, does not depend on the composition the API brings)."""
    if name == "Server":
        import importlib

        return importlib.import_module("openinfer.api").Server
    raise AttributeError(f"module 'openinfer' has no attribute '{name}'")
