"""Fixtures: object-store emulators started per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.storage.emulators import MotoS3


@pytest.fixture
def moto_s3() -> Iterator[MotoS3]:
    pytest.importorskip("moto.server", reason="moto[server] is not installed (the test extra)")
    pytest.importorskip("s3fs", reason="s3fs is not installed (the storage extra)")
    server = MotoS3().start()
    try:
        yield server
    finally:
        server.stop()
