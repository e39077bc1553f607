"""Shared fixtures: the real server on free ports, serving the example repository."""

from __future__ import annotations

import pytest

from tests.helpers import EXAMPLES, Server


@pytest.fixture(scope="session")
def example_server():
    """`openinfer serve` on the bundled example repository, shared by the whole session."""
    server = Server(EXAMPLES).start(wait_for="ready")
    yield server
    code = server.stop()
    assert code == 0, f"server exited with {code}:\n{server.log()}"
