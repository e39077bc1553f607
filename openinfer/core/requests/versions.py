"""Model version strings, read once for every frontend.

An empty string (or `latest`, which Flink's Triton provider puts in URLs) asks for the newest
READY version; anything else must be a non-negative integer, with Triton's messages.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError

LATEST = "latest"


def parse_version(text: str) -> int | None:
    """The version number a request names, or None for the newest READY version."""
    if not text or text == LATEST:
        return None
    try:
        number = int(text)
    except ValueError:
        raise InvalidArgumentError(
            f"failed to get model version from specified version string '{text}' "
            f"(details: stol), version should be an integral value > 0"
        ) from None
    if number < 0:
        raise InvalidArgumentError(
            f"invalid model version specified '{text}' , version should be an integral value > 0"
        )
    return number
