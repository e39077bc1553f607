"""Backend names -> implementations. Heavy backends are imported only when a model asks for them.

A name that is not one of ours names a Python-based backend when `<backend-directory>/<name>/model.py`
exists, as in Triton: its models run that `model.py` through the Python backend.
"""

from __future__ import annotations

import importlib
import logging
import os

from ..core.backend import Backend

log = logging.getLogger("openinfer.backends")


class BackendRegistry:
    """Creates each backend once, on first use."""

    def __init__(self, known: dict[str, str] | None = None, backend_directory: str | None = None) -> None:
        #: backend name -> "module:Class"; by default, what the server's features provide.
        self.known = dict(known if known is not None else _featured_backends())
        self.backend_directory = backend_directory
        self._loaded: dict[str, Backend] = {}

    def python_based(self, name: str) -> bool:
        """`name` is a Python-based backend: `<backend-directory>/<name>/model.py` exists (looked
        up at each load, so a backend installed while the server runs is found)."""
        if not self.backend_directory or name in (".", "..") or os.path.basename(name) != name:
            return False
        return os.path.isfile(os.path.join(self.backend_directory, name, "model.py"))

    def __call__(self, name: str) -> Backend | None:
        backend = self._loaded.get(name)
        if backend is not None:
            return backend
        target = self.known.get(name)
        if target is None:
            return self("python") if name and self.python_based(name) else None
        module_name, _, class_name = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            log.error("backend '%s' is not available: %s", name, exc)
            return None
        backend = getattr(module, class_name)()
        self._loaded[name] = backend
        return backend


def _featured_backends() -> dict[str, str]:
    from .. import features

    return features.backend_table(features.load())
