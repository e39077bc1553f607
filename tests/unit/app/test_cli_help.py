"""The command line explains itself: version, grouped help with defaults, named mistakes, docs/cli.md."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openinfer import TRITON_PROTOCOL_VERSION, __version__
from openinfer.app.clidoc import render
from openinfer.app.scaffold import new_model_parser
from openinfer.app.serve_flags import serve_parser
from tests.helpers import ROOT

GROUPS = ["Server", "Logging", "Model Repository", "HTTP", "GRPC", "Metrics", "Tracing", "Backend",
          "Response Cache", "Memory/Device Management", "OpenAI-compatible frontend", "Deprecated"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openinfer", *args], check=False, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag):
    out = _cli(flag)
    assert out.returncode == 0
    assert out.stdout.strip() == f"openinfer {__version__} (Triton protocol {TRITON_PROTOCOL_VERSION})"


def test_top_level_help_lists_every_command():
    out = _cli("--help")
    assert out.returncode == 0
    for command in ("serve", "openai", "new-model", "bench", "--version"):
        assert command in out.stdout


@pytest.mark.parametrize("parser", [serve_parser, new_model_parser])
def test_every_flag_has_a_sentence(parser):
    missing = [a.option_strings for a in parser()._actions if not (a.help or "").strip()]
    assert missing == []


def test_serve_help_groups_flags_as_tritonserver_and_shows_defaults():
    out = _cli("serve", "--help")
    assert out.returncode == 0
    positions = [out.stdout.index(f"\n{title}:\n") for title in GROUPS]
    assert positions == sorted(positions)
    http = out.stdout[positions[3]:positions[4]]
    assert "--http-port PORT" in http and "(default: 8000)" in http
    assert "(default: none)" in out.stdout  # --model-control-mode
    assert "--openai-port" in out.stdout[positions[10]:]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--htp-port", "1"], "unknown flag '--htp-port'; did you mean --http-port"),
        (["--hepl"], "unknown flag '--hepl'; did you mean --help?"),
        (["--http-port", "http"], "argument --http-port: expected a port number 0-65535, got 'http'"),
        (["--allow-grpc", "maybe"], "argument --allow-grpc: invalid boolean 'maybe' (use true/false/on/off/1/0)"),
        (["--model-control-mode", "lazy"], "argument --model-control-mode: invalid choice: 'lazy'"),
    ],
)
def test_mistakes_name_the_flag_and_the_accepted_values(args, expected):
    out = _cli("serve", "--model-repository", "unused", *args)
    assert out.returncode == 2
    assert expected in out.stderr
    if "invalid choice" in expected:  # the quoting of the choices differs between Python versions
        assert all(choice in out.stderr.split("choose from")[1] for choice in ("none", "poll", "explicit"))


def test_unknown_command_lists_the_commands():
    out = _cli("srve")
    assert out.returncode == 2
    assert "unknown command 'srve' (commands: serve, openai, new-model, bench)" in out.stderr


def test_flag_reference_is_current():
    """docs/cli.md is written by `make docs`; rerun it when this fails."""
    assert (ROOT / "docs" / "cli.md").read_text() == render()
