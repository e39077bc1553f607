"""Copies the summary of a bench run into README.md's performance section: the tables above the
per-run listing, and the LLM sections below it.

The section sits between two markers, so a run replaces exactly what the previous run wrote
and nothing a person wrote around it.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"


def llm_sections(results_text: str) -> list[str]:
    """The LLM sections ("## LLM: ...") that follow the per-run listing, each up to the next
    section."""
    tail = results_text.split("\n## Every run", 1)[1] if "\n## Every run" in results_text else ""
    return [part.strip() for part in re.split(r"\n(?=## )", tail) if part.startswith("## LLM")]


def with_llm_sections(results_text: str, llm_text: str) -> str:
    """RESULTS.md with its LLM sections, the last ones (`make bench` appends them), replaced by
    `llm_text`: what a run of `python -m benchmarks.llm` alone leaves."""
    head = results_text.split("\n## LLM: ", 1)[0]
    return head.rstrip("\n") + "\n\n" + llm_text.strip() + "\n"


#: A Markdown link or picture whose target is a path relative to the page (not a URL or an anchor).
RELATIVE_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def _from_repository_root(match: re.Match[str]) -> str:
    """RESULTS.md links from benchmarks/; the README sits one folder up."""
    return f"]({posixpath.normpath(posixpath.join('benchmarks', match.group(1)))})"


def summary(results_text: str) -> str:
    """RESULTS.md without its per-run listing and its title, its LLM sections kept."""
    head = results_text.split("\n## Every run", 1)[0]
    lines = head.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    text = "\n\n".join(["\n".join(lines).strip(), *llm_sections(results_text)])
    return RELATIVE_LINK.sub(_from_repository_root, text)


def update(results_text: str, readme: Path = README) -> bool:
    """Replace the marked section; False (and nothing written) when the markers are missing."""
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        return False
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    body = (
        f"{START}\n{summary(results_text)}\n\n"
        "Full table with every run: [`benchmarks/RESULTS.md`](benchmarks/RESULTS.md).\n"
        f"{END}"
    )
    readme.write_text(before + body + after, encoding="utf-8")
    return True


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("RESULTS.md")
    sys.exit(0 if update(path.read_text(encoding="utf-8")) else 1)
