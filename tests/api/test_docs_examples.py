"""The examples of docs/python-api.md run as written: as a script, and as notebook cells
(top-level `await` inside an already running event loop)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

from tests.helpers import ROOT

BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python-api.md").read_text(), re.DOTALL)


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_script_example():
    out = _run(BLOCKS[0])
    assert "[11. 22. 33. 44.]" in out
    assert "['OUTPUT1']" in out
    assert "[7]\n[8]\n[9]\n" in out


def test_notebook_example():
    cell = "async def cell():\n" + textwrap.indent(BLOCKS[1], "    ") + "\nimport asyncio\nasyncio.run(cell())\n"
    out = _run(cell)
    assert "[2. 4. 6. 8.]" in out
    assert "[1]\n[2]\n" in out
    assert "[0. 0. 0. 0.]" in out
