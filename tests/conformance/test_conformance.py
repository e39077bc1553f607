"""Every case goes to openinfer and to Triton 2.51; the answers must be the same, or the
difference listed (known.py, README's "Differences from Triton")."""

from __future__ import annotations

import pytest

from .cases import CASES, Case
from .conftest import DIFFERENCES, Difference, Peers
from .known import KNOWN


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_openinfer_answers_as_triton(case: Case, peers: Peers) -> None:
    ours, triton = case.send(peers.ours), case.send(peers.triton)
    if peers.triton_process.process.poll() is not None:  # every later case would fail to connect
        pytest.exit(f"tritonserver exited on '{case.id}':\n{peers.triton_process.log()[-3000:]}", returncode=1)
    if ours == triton:
        assert case.id not in KNOWN, f"'{case.id}' is answered as Triton answers it: take it out of known.py"
        return
    DIFFERENCES.append(Difference(case.id, case.request, ours, triton))
    assert case.id in KNOWN, f"openinfer: {ours}\nTriton:    {triton}"

