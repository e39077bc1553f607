"""The command line is parsed once into settings nobody can change afterwards."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from openinfer.app.cli import serve_parser
from openinfer.app.settings import Settings


def _settings(*argv: str) -> Settings:
    return Settings.from_args(serve_parser().parse_args(["--model-repository", "models", *argv]))


def test_settings_read_every_flag_and_refuse_writes():
    settings = _settings("--allow-http", "false", "--load-model", "a", "--load-model", "b")
    assert settings.allow_http is False and settings.http_port == 8000
    assert settings.load_model == ("a", "b")  # lists become tuples: nothing inside changes either
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.allow_http = True  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no setting 'no_such_flag'"):
        _ = settings.no_such_flag
    assert getattr(settings, "no_such_flag", None) is None


def test_openai_restrictions_parse_from_frozen_settings():
    from openinfer.frontends.openai.options import OpenAIOptions

    settings = _settings(
        "--openai-port", "9000", "--openai-restricted-api", "inference", "api-key", "secret",
        "--openai-allowed-origins", "http://a.example,http://b.example",
    )
    options = OpenAIOptions.from_settings(settings)
    assert options.port == 9000 and options.access.rules["inference"].key == "api-key"
    assert options.allowed_origins == ["http://a.example", "http://b.example"]


def test_a_changed_copy_leaves_the_original_and_refuses_unknown_names():
    settings = _settings()
    changed = settings.replace(http_port=0, load_model=["c"])
    assert (changed.http_port, changed.load_model) == (0, ("c",))
    assert (settings.http_port, settings.load_model) == (8000, ())
    with pytest.raises(AttributeError, match="no setting 'htp_port'"):
        settings.replace(htp_port=1)


def test_python_values_read_as_the_command_line_that_says_the_same():
    parser = serve_parser()
    argv = parser.command_line({
        "strict_readiness": False, "load_model": ["a", "b"], "exit_timeout_secs": 5,
        "disable_auto_complete_config": True, "metrics_address": None,
        "openai_restricted_api": [["inference", "api-key", "secret"]],
    })
    assert argv == [
        "--strict-readiness=false", "--load-model=a", "--load-model=b", "--exit-timeout-secs=5",
        "--disable-auto-complete-config", "--openai-restricted-api", "inference", "api-key", "secret",
    ]
    parsed = parser.parse_args(["--model-repository", "models", *argv])
    assert parsed.strict_readiness is False and parsed.load_model == ["a", "b"]
    assert parsed.openai_restricted_api == [["inference", "api-key", "secret"]]


def test_a_raising_parser_says_what_argparse_would_have_printed():
    parser = serve_parser()
    parser.raise_errors = True
    with pytest.raises(ValueError, match="argument --strict-readiness: invalid boolean 'maybe'"):
        parser.parse_args(["--model-repository", "models", *parser.command_line({"strict_readiness": "maybe"})])


def test_the_typed_fields_are_current():
    """openinfer/app/settings_fields.py is written from the parser by `make docs`; rerun it when
    this fails."""
    from openinfer.app.settings_schema import TARGET, render

    assert TARGET.read_text() == render()


def test_every_setting_has_the_type_its_flag_parses_into():
    settings = _settings("--http-port", "9000", "--exit-timeout-secs", "2", "--allow-grpc", "false")
    assert (settings.http_port, settings.exit_timeout_secs, settings.allow_grpc) == (9000, 2.0, False)
    hints = typing.get_type_hints(Settings)
    assert hints["http_port"] is int and hints["allow_grpc"] is bool
    assert hints["load_model"] == tuple[str, ...]
    assert dataclasses.is_dataclass(settings) and "http_port" in {f.name for f in dataclasses.fields(settings)}
