"""`python -m benchmarks.hop`: both modes measured, the hop computed from them."""

from __future__ import annotations

from benchmarks import hop


def test_both_modes_are_measured_and_the_hop_is_their_difference(capsys) -> None:
    assert hop.main(["--concurrency", "2", "--sizes", "16", "--rounds", "1", "--seconds", "0.3"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 |")]
    default = next(r for r in rows if "| default |" in r)
    in_process = next(r for r in rows if "| in_process |" in r)
    cells = [c.strip() for c in default.strip("|").split("|")]
    base = [c.strip() for c in in_process.strip("|").split("|")]
    assert abs(int(cells[7]) - (int(cells[6]) - int(base[6]))) <= 1  # default total - in_process total
    assert int(base[5]) == 0  # in_process: no worker
