"""What start-up reports: the model table Triton prints, and the models that failed to load
(which end the process under `--exit-on-error`)."""

from __future__ import annotations

from ..core.server import InferenceServer
from .settings import Settings


def model_table(server: InferenceServer) -> str:
    rows = [("Model", "Version", "Status")]
    for row in server.repository_index():
        if not row.version:
            continue
        status = row.state + (f": {row.reason}" if row.reason else "")
        rows.append((row.name, row.version, status))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line]
    for index, cells in enumerate(rows):
        out.append("| " + " | ".join(cell.ljust(w) for cell, w in zip(cells, widths)) + " |")
        if index == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def startup_failures(server: InferenceServer, args: Settings) -> list[str]:
    """The models that failed to load at start-up: UNAVAILABLE ones, those whose poll failed,
    and in explicit mode the `--load-model` names the repository does not hold; and object
    stores that could not be read."""
    index = server.repository_index()
    failed = {f"model repository {r.url}" for r in server.options.repository.remotes if r.last_error}
    failed |= {r.name for r in index if r.state == "UNAVAILABLE" and r.reason != "unloaded"}
    failed |= set(server.repository.poll_failed())
    known = {r.name for r in index if r.version}
    failed.update(name for name in args.load_model if name != "*" and name not in known)
    return sorted(failed)
