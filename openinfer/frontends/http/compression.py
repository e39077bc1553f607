"""Request bodies in gzip/deflate and compressed infer responses, as Triton negotiates them."""

from __future__ import annotations

import gzip
import zlib

from ...core import errors
from ...core.errors import InvalidArgumentError


class UnsupportedEncodingError(errors.UnsupportedEncodingError):
    """A request body in an encoding we cannot inflate (415); the answer lists the ones we can."""

    accept_encoding = b"gzip, deflate"


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Inflate a request body (gzip or zlib container), refusing to grow past `limit` bytes."""
    if not encoding or encoding.strip().lower() == "identity":
        return body
    kind = encoding.strip().lower()
    if kind not in ("gzip", "deflate"):
        raise UnsupportedEncodingError("Unsupported compression type")
    inflater = zlib.decompressobj(15 | 32)  # auto-detect gzip or zlib headers
    try:
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit or inflater.unconsumed_tail:
            raise InvalidArgumentError(
                f"Decompressed request size exceeds the maximum allowed value of {limit} bytes. "
                f"Use --http-max-input-size to increase the limit."
            )
        out += inflater.flush()
    except zlib.error as exc:
        raise InvalidArgumentError(f"failed to decompress the request body: {exc}") from None
    if not inflater.eof:  # a truncated stream would otherwise pass as a shorter body
        raise InvalidArgumentError("failed to decompress the request body: the compressed data is truncated")
    return out


def choose_encoding(accept: str | None) -> str | None:
    """The response encoding from Accept-Encoding: highest weight among identity/deflate/gzip."""
    if not accept:
        return None
    best, best_weight = None, 0.0
    for part in accept.split(","):
        name, _, params = part.strip().partition(";")
        name = name.strip().lower()
        weight = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                weight = float(params[2:])
            except ValueError:
                weight = 0.0
        if name in ("identity", "deflate", "gzip") and weight > best_weight:
            best, best_weight = name, weight
    return None if best == "identity" else best


def compress(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body, compresslevel=6)
    return zlib.compress(body)
