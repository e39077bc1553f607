"""Every difference from Triton that `make conformance` accepts is listed in README."""

from __future__ import annotations

from tests.conformance.cases import CASES
from tests.conformance.known import KNOWN
from tests.helpers import ROOT


def _differences_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Differences from Triton")
    return readme[start : readme.index("\n## ", start + 1)]


def test_every_accepted_difference_is_listed_in_readme() -> None:
    section = " ".join(_differences_section().split())
    missing = {case: listed.readme for case, listed in KNOWN.items() if " ".join(listed.readme.split()) not in section}
    assert not missing


def test_every_accepted_difference_is_a_case_and_every_case_is_named_once() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert set(KNOWN) <= set(ids)
