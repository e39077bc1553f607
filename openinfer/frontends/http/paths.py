"""The URL shapes of the v2 model endpoints, shared by the core routes and the extensions'."""

from __future__ import annotations

from urllib.parse import unquote

from .app import HttpRequest

# The version is read by the core (`core/requests/versions.py`), as every frontend's is. Triton's routes
# take digits alone, so any other version (but `latest`, an extension) is an unknown path: 404.
MODEL = r"/v2/models/([^/]+)(?:/versions/([0-9]+|latest))?"


def model_args(req: HttpRequest) -> tuple[str, str]:
    """(model name, version as sent) of a request routed by a MODEL pattern."""
    assert req.match is not None
    return unquote(req.match.group(1)), unquote(req.match.group(2) or "")
