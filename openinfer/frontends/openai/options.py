"""The OpenAI frontend's flags (Triton's `openai_frontend/main.py` names) and their parsed form.

`add_flags` extends `openinfer serve`; nothing here imports a web framework, so the CLI stays
fast to start and the flags parse even where the `openai` extra is not installed.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...app.settings import Settings
from ...features.flags import FlagGroups, parse_bool
from ..access import OPENAI_GROUPS, AccessPolicy, Restriction
from .reasoning import PARSERS as REASONING_PARSER_CLASSES
from .tool_parsers import PARSERS as TOOL_PARSER_CLASSES

DEFAULT_PARSE_BYTES = 128 * 1024
DEFAULT_RESPONSES_STORED = 1000
TOOL_PARSERS = tuple(TOOL_PARSER_CLASSES)
REASONING_PARSERS = tuple(REASONING_PARSER_CLASSES)


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"value is not an integer, got {value}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"value must be greater than 0, got {number}")
    return number


def add_flags(groups: FlagGroups) -> None:
    g = groups["OpenAI-compatible frontend"]
    g.add_argument("--openai-port", type=int, default=None, metavar="PORT", help="serve the OpenAI API on this port (off when absent)")
    g.add_argument("--openai-address", default="0.0.0.0", metavar="ADDRESS", help="bind address of the OpenAI frontend")
    g.add_argument("--tokenizer", default=None, metavar="DIR", help="tokenizer directory for chat templates (default: the model's own)")
    g.add_argument("--chat-template", default=None, metavar="FILE", help="a Jinja file that replaces the tokenizer's chat template (and serves chat for models without one)")
    g.add_argument("--backend", choices=["vllm", "tensorrtllm"], default=None, help="force the request format of every model")
    g.add_argument("--lora-separator", default=None, metavar="SEP", help="serve LoRA adapters as <model><separator><adapter>")
    g.add_argument("--tool-call-parser", choices=TOOL_PARSERS, default=None, help="parse tool calls in model output")
    g.add_argument("--reasoning-parser", choices=REASONING_PARSERS, default=None,
                   help="send a reasoning model's thinking apart, as reasoning_content (chat completions)")
    g.add_argument("--max-tool-call-parse-bytes", type=positive_int, default=DEFAULT_PARSE_BYTES, metavar="BYTES",
                   help="cap on streamed text the tool-call parser reads per request (then finish_reason 'length')")
    g.add_argument("--default-max-tokens", type=positive_int, default=None, metavar="N",
                   help="max_tokens when a request gives none (default: the model's generation_config, else its context)")
    g.add_argument("--responses-store-size", type=positive_int, default=DEFAULT_RESPONSES_STORED, metavar="N",
                   help="how many /v1/responses answers are kept for GET and previous_response_id (least recently used leave first)")
    g.add_argument("--openai-restricted-api", nargs="+", action="append", default=[], metavar="API[,API] KEY VALUE",
                   help=f"require header KEY: VALUE for these API groups ({', '.join(OPENAI_GROUPS)}); "
                   "three arguments, or one quoted string of three words")
    g.add_argument("--api-key", action="append", default=[], metavar="KEY", help="require 'Authorization: Bearer <key>' on /v1 (repeatable)")
    g.add_argument("--openai-allowed-origins", "--allowed-origins", action="append", default=None, metavar="ORIGIN",
                   help="CORS origins allowed on the OpenAI port (default: http://localhost)")
    g.add_argument("--enable-kserve-frontends", type=parse_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="also serve KServe v2 HTTP/gRPC and metrics (false: the OpenAI frontend alone)")
    g.add_argument("--uvicorn-log-level", choices=["debug", "info", "warning", "error", "critical", "trace"],
                   default="warning", help="log level of the OpenAI frontend's web server")


def parse_restrictions(specs: Sequence[Sequence[str]]) -> AccessPolicy:
    """`--openai-restricted-api API[,API] KEY VALUE` groups, with Triton's error messages."""
    rules: dict[str, Restriction] = {}
    for spec in specs:
        words = spec[0].split() if len(spec) == 1 else list(spec)
        if len(words) != 3:
            raise ValueError(
                "--openai-restricted-api takes <API>[,<API>...] <restricted-key> <restricted-value>, "
                f"got {len(words)} word(s)"  # never echo what may be a secret
            )
        apis, key, value = words
        for api in (a.strip() for a in apis.split(",")):
            if api not in OPENAI_GROUPS:
                raise ValueError(f"Unknown API '{api}'. Available APIs: {list(OPENAI_GROUPS)}")
            if api in rules:
                raise ValueError(f"restricted api '{api}' can not be specified in multiple config groups")
            if not key or not value:
                raise ValueError(f"restricted api '{api}' needs a non-empty header name and value")
            rules[api] = Restriction(key, value)
    return AccessPolicy(rules)


@dataclass
class OpenAIOptions:
    port: int
    address: str = "0.0.0.0"
    tokenizer: str | None = None
    chat_template: str | None = None
    backend: str | None = None
    lora_separator: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    max_tool_call_parse_bytes: int = DEFAULT_PARSE_BYTES
    default_max_tokens: int | None = None
    responses_store_size: int = DEFAULT_RESPONSES_STORED
    max_input_size: int = 64 * 1024 * 1024
    access: AccessPolicy = field(default_factory=AccessPolicy)
    api_keys: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=lambda: ["http://localhost"])
    log_level: str = "warning"
    model_control_explicit: bool = False

    @classmethod
    def from_settings(cls, args: Settings) -> OpenAIOptions:
        keys = list(args.api_key or [])
        if not keys and os.environ.get("OPENINFER_API_KEY"):
            keys = [os.environ["OPENINFER_API_KEY"]]
        if args.openai_port is None:
            raise ValueError("--openai-port is not set")
        specs = args.openai_allowed_origins
        origins = ["http://localhost"] if specs is None else [
            o.strip() for spec in specs for o in spec.split(",") if o.strip()
        ]
        return cls(
            port=args.openai_port,
            address=args.openai_address,
            tokenizer=args.tokenizer or None,
            chat_template=args.chat_template,
            backend=args.backend,
            lora_separator=args.lora_separator or None,
            tool_call_parser=args.tool_call_parser,
            reasoning_parser=args.reasoning_parser,
            max_tool_call_parse_bytes=args.max_tool_call_parse_bytes,
            default_max_tokens=args.default_max_tokens,
            responses_store_size=args.responses_store_size,
            max_input_size=args.http_max_input_size,
            access=parse_restrictions(args.openai_restricted_api),
            api_keys=keys,
            allowed_origins=origins,
            log_level=args.uvicorn_log_level,
            model_control_explicit=args.model_control_mode == "explicit",
        )
