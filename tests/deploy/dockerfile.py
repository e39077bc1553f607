"""Read our Dockerfile and .dockerignore, so tests replay exactly what an image build runs.

Only what our own Dockerfile uses is understood: stages, ARG defaults, ENV, WORKDIR, COPY (from
the context or an earlier stage), RUN in shell form, exec-form ENTRYPOINT/CMD/HEALTHCHECK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str]:
        """The JSON array of an exec-form instruction (after HEALTHCHECK's options and CMD)."""
        return json.loads(self.args[self.args.index("[") :])


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        return self.all(keyword)[-1]


def instructions(text: str) -> list[Instruction]:
    """Instructions with comments dropped and backslash continuations joined."""
    out: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        keyword, _, args = whole.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip()))
    return out


def stages(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the build stages, in order."""
    global_args: dict[str, str] = {}
    result: list[Stage] = []
    for inst in instructions(text):
        if inst.keyword == "FROM":
            words = inst.args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append(Stage(words[0], name))
        elif not result:
            if inst.keyword == "ARG":
                key, _, value = inst.args.partition("=")
                global_args[key] = value
        else:
            result[-1].instructions.append(inst)
    return global_args, result


def arg_defaults(stage: Stage) -> dict[str, str]:
    return dict(i.args.partition("=")[::2] for i in stage.all("ARG"))  # type: ignore[misc]


def env(stage: Stage) -> dict[str, str]:
    """ENV key=value pairs (the form our Dockerfile uses), values unexpanded."""
    pairs: dict[str, str] = {}
    for inst in stage.all("ENV"):
        for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', inst.args):
            pairs[key] = value.strip('"')
    return pairs


def copy_sources(inst: Instruction) -> tuple[str | None, list[str], str]:
    """(stage named by --from, sources, destination) of a COPY."""
    words = inst.args.split()
    source_stage = None
    plain = []
    for word in words:
        if word.startswith("--from="):
            source_stage = word.split("=", 1)[1]
        elif not word.startswith("--"):
            plain.append(word)
    return source_stage, plain[:-1], plain[-1]


def _regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match plus `**`) as a regex over '/'-paths."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def read_patterns(root: Path) -> list[str]:
    lines = (root / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves `path` (relative, '/'-separated) out: the last match decides,
    and a pattern matching a parent folder matches everything below it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            verdict = not negate
    return verdict


def build_context(root: Path, target: Path) -> Path:
    """Copy `root` into `target` as the engine would send it: what .dockerignore lets through."""
    patterns = read_patterns(root)
    reincluded = [p[1:].strip("/") for p in patterns if p.startswith("!")]
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        base = "" if base == "." else base + "/"
        # Walk into an ignored folder only when a `!` pattern may bring something below it back.
        dirs[:] = [
            d for d in dirs
            if not os.path.islink(os.path.join(folder, d))
            and (not ignored(base + d, patterns) or any(p.startswith(base + d + "/") for p in reincluded))
        ]
        for name in files:
            relative = base + name
            source = Path(folder) / name
            if not source.is_symlink() and not ignored(relative, patterns):
                destination = target / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)
    return target
