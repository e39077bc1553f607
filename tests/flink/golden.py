"""The golden requests of Flink's Java `triton` provider, loaded from tests/testdata/flink."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import ROOT

FIXTURES = sorted((ROOT / "tests" / "testdata" / "flink").glob("*.json"))

#: Fixture name (file stem) -> its content; the format is described in the folder's README.
CASES: dict[str, dict[str, Any]] = {
    path.stem: json.loads(path.read_text(encoding="utf-8")) for path in FIXTURES
}
