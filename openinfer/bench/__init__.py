"""`openinfer bench`: a load generator for any KServe v2 or OpenAI-compatible server.

It speaks perf_analyzer's and genai-perf's option names so that Triton users can keep their
command lines, spreads load over worker processes so the generator is not what gets measured,
validates every response it counts, and, when the server exposes the statistics extension,
splits latency into the server's queue and compute time.

Entry point: :func:`openinfer.bench.cli.main` (also ``python -m openinfer.bench``).
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the bench CLI; imported lazily so that importing the package stays cheap."""
    from .cli import main as _main

    return _main(argv)
