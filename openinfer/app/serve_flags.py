"""`openinfer serve` flags: tritonserver's names, defaults and help groups, one sentence each.

The server's own flags are here; each feature adds its own (`Feature.flags`) to the same groups.
The parser is also the source of `docs/cli.md` (`python -m openinfer.app.clidoc`), so a flag's
help where it is declared is the only place it is described.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from ..core.memory.gpu_limit import split_pair
from ..features.flags import FlagGroups, bool_flag, integer, max_input_size, number, port, positive


def parse_cuda_pool(value: str) -> tuple[int, int]:
    """`--cuda-memory-pool-byte-size <GPU device ID>:<pool byte size>`, refused in tritonserver's words."""
    try:
        device, size = split_pair(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    try:
        return int(device), int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value '{value}': both sides must be integers") from None


def default_text(action: argparse.Action) -> str | None:
    """The default as a user would type it, or None when there is nothing worth showing."""
    default = action.default
    if default is None or default in ([], "") or default is argparse.SUPPRESS or action.nargs == 0:
        return None
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


class HelpFormatter(argparse.HelpFormatter):
    """Shows each flag's default after its sentence, and lets long help lines breathe."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=38, width=100)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = default_text(action)
        if shown is None or "%(default)" in text:
            return text
        return f"{text} (default: {shown.replace('%', '%%')})"


class FlagParser(argparse.ArgumentParser):
    """argparse that names an unknown flag with its nearest known spellings, and that reads
    settings given by their Python names as the command line that says the same."""

    #: Raise ValueError with the message instead of printing it and exiting (the in-process API).
    raise_errors = False

    def error(self, message: str) -> NoReturn:
        if self.raise_errors:
            raise ValueError(message)
        super().error(message)

    def flags(self) -> list[argparse.Action]:
        """Every flag's action, in declaration order (argparse keeps no public list of them)."""
        return [action for action in self._actions if action.option_strings and action.dest != "help"]

    def settings(self) -> set[str]:
        """The Python names of the flags (`strict_readiness` for `--strict-readiness`)."""
        return {action.dest for action in self.flags()}

    def command_line(self, values: Mapping[str, Any]) -> list[str]:
        """`values` by their Python names (`strict_readiness=False`, `load_model=["a", "b"]`) as
        the flags that say the same (`--strict-readiness=false --load-model=a --load-model=b`),
        so they are parsed and checked by the very rules the command line is. None leaves a
        flag whose default is None as it is."""
        actions = {action.dest: action for action in self.flags()}
        argv: list[str] = []
        for name, value in values.items():
            action = actions[name]
            flag = next(s for s in action.option_strings if s.startswith("--"))
            if value is None and action.default is None:
                continue
            if action.nargs == 0:  # store_true
                argv += [flag] if value is True else []
            elif isinstance(value, (list, tuple)):  # a repeatable flag, once per item
                for item in value:
                    words = item if isinstance(item, (list, tuple)) else [item]
                    argv += [flag, *map(_word, words)] if action.nargs == "+" else [f"{flag}={_word(item)}"]
            else:
                argv.append(f"{flag}={_word(value)}")
        return argv

    def known_flags(self) -> list[str]:
        """Every long flag a command line may name: `--help` and the settings' flags."""
        return ["--help", *(s for a in self.flags() for s in a.option_strings if s.startswith("--"))]

    def parse_args(self, args: Sequence[str] | None = None, namespace=None):
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(self.unknown_message(extra))
        return parsed

    def unknown_message(self, extra: list[str]) -> str:
        flags = [word for word in extra if word.startswith("-")]
        if not flags:
            return f"unexpected argument(s): {' '.join(extra)} (every option is a --flag)"
        name = flags[0].split("=", 1)[0]
        close = difflib.get_close_matches(name, self.known_flags(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return f"unknown flag '{name}'{hint} (`{self.prog} --help` lists every flag)"


def _word(value: Any) -> str:
    """A value as a command line writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _server(groups: FlagGroups) -> None:
    g = groups["Server"]
    g.add_argument("--id", default="triton", help="server id reported by server metadata")
    g.add_argument("--exit-timeout-secs", type=number, default=30, metavar="SECONDS",
                   help="on shutdown, wait this long for in-flight requests before unloading models")
    g.add_argument("--exit-linger-secs", type=number, default=5, metavar="SECONDS",
                   help="on shutdown, while clients still send requests (each refused 'Server not ready'), "
                        "keep the listeners open until none came for half a second, at most this long: a load "
                        "balancer routes here until its health checks fail (openinfer's own flag)")


def _repository(groups: FlagGroups) -> None:
    g = groups["Model Repository"]
    g.add_argument("--model-repository", "--model-store", action="append", required=True, dest="model_repository",
                   metavar="DIR", help="a model repository folder; repeat the flag to serve several")
    g.add_argument("--model-control-mode", type=str.lower, choices=["none", "poll", "explicit"], default="none",
                   help="none: load everything once; poll: follow repository changes; explicit: load on request")
    g.add_argument("--load-model", action="append", default=[], metavar="NAME",
                   help="with --model-control-mode=explicit, load this model at start-up ('*' for all); repeatable")
    g.add_argument("--repository-poll-secs", type=number, default=15, metavar="SECONDS",
                   help="how often poll mode rescans the repository")
    bool_flag(g, "--exit-on-error", True,
               "exit (code 1) when a model fails to load at start-up; false serves the models that loaded")
    bool_flag(g, "--strict-readiness", True, "report the server ready only when every model is ready")
    bool_flag(g, "--model-namespacing", False,
               "each --model-repository a namespace of its own: the same model name may be in several "
               "(served by name only where one has it; an ensemble runs its own repository's models)")
    g.add_argument("--disable-auto-complete-config", action="store_true",
                   help="use each config.pbtxt as written, without filling in what the backend could infer")
    g.add_argument("--model-config-name", default=None, metavar="NAME",
                   help="read configs/<NAME>.pbtxt instead of config.pbtxt where a model has one")
    g.add_argument("--model-load-thread-count", type=integer, default=4, metavar="N",
                   help="accepted for compatibility: models load concurrently on the event loop")
    g.add_argument("--rate-limit", type=str.lower, choices=["off"], default="off",
                   help="off: instances run whatever requests are ready (the rate limiter's "
                   "execution_count mode is not available)")
    g.add_argument("--model-load-retry-count", type=integer, default=0, metavar="N",
                   help="try a version that fails to load this many times more before giving up")


def _http(groups: FlagGroups) -> None:
    g = groups["HTTP"]
    bool_flag(g, "--allow-http", True, "serve KServe v2 over HTTP")
    g.add_argument("--http-address", default="0.0.0.0", metavar="ADDRESS",
                   help="bind address of the HTTP endpoint (ipv6:[::1] for IPv6)")
    g.add_argument("--http-port", type=port, default=8000, metavar="PORT", help="port of the HTTP endpoint")
    bool_flag(g, "--reuse-http-port", False,
               "let several servers listen on the same HTTP port (SO_REUSEPORT) when every one sets this")
    g.add_argument("--http-max-input-size", type=max_input_size, default=64 * 1024 * 1024, metavar="BYTES",
                   help="largest request body accepted, after decompression; larger ones are refused")
    g.add_argument("--http-restricted-api", action="append", default=[], metavar="API[,API]:KEY=VALUE",
                   help="require header KEY: VALUE for these endpoint groups; repeatable")
    g.add_argument("--http-header-forward-pattern", default=None, metavar="REGEX",
                   help="forward request headers whose names match to models as request parameters")
    g.add_argument("--http-thread-count", type=integer, default=8, metavar="N",
                   help="accepted for compatibility: HTTP runs on event loops (--frontend-processes)")
    g.add_argument("--frontend-processes", type=positive, default=1, metavar="N",
                   help="serve KServe HTTP from N processes that parse and encode requests and send the "
                   "inferences to the one process holding the models and batchers; 1 serves it in that "
                   "process (gRPC, metrics and the OpenAI frontend stay there)")
    g.add_argument("--http-client-timeout-secs", type=number, default=30.0, metavar="SECONDS",
                   help="drop HTTP connections whose request headers take longer than this to arrive, "
                   "or whose body stalls this long (slow clients); all HTTP listeners")


def _grpc(groups: FlagGroups) -> None:
    g = groups["GRPC"]
    bool_flag(g, "--allow-grpc", True, "serve KServe v2 over gRPC")
    g.add_argument("--grpc-address", default="0.0.0.0", metavar="ADDRESS",
                   help="bind address of the gRPC endpoint (ipv6:[::1] for IPv6)")
    g.add_argument("--grpc-port", type=port, default=8001, metavar="PORT", help="port of the gRPC endpoint")
    bool_flag(g, "--reuse-grpc-port", False,
               "let several servers listen on the same gRPC port (SO_REUSEPORT) when every one sets this")
    g.add_argument("--grpc-restricted-protocol", action="append", default=[], metavar="PROTOCOL[,PROTOCOL]:KEY=VALUE",
                   help="require metadata KEY: VALUE for these RPC groups; repeatable")
    g.add_argument("--grpc-header-forward-pattern", default=None, metavar="REGEX",
                   help="forward request metadata whose keys match to models as request parameters")
    g.add_argument("--grpc-infer-response-compression-level", choices=["none", "low", "medium", "high"],
                   default="none", help="compress inference responses: low uses gzip, medium and high deflate")
    g.add_argument("--grpc-infer-thread-count", type=integer, default=2, metavar="N",
                   help="accepted for compatibility: gRPC runs on the event loop")
    g.add_argument("--grpc-infer-allocation-pool-size", type=integer, default=8, metavar="N",
                   help="accepted for compatibility: openinfer keeps no pool of response objects")
    g.add_argument("--grpc-max-response-pool-size", type=positive, default=None, metavar="N",
                   help="accepted for compatibility (must be greater than 0): no response pool")
    _grpc_transport(g)


def _grpc_transport(g: argparse._ArgumentGroup) -> None:
    """TLS and HTTP/2 keep-alive: gRPC's own channel arguments, under tritonserver's names."""
    bool_flag(g, "--grpc-use-ssl", False, "serve gRPC over TLS with --grpc-server-cert and --grpc-server-key")
    bool_flag(g, "--grpc-use-ssl-mutual", False,
               "serve gRPC over TLS and require client certificates signed by --grpc-root-cert")
    g.add_argument("--grpc-server-cert", default="", metavar="PATH", help="PEM file of the server's certificate")
    g.add_argument("--grpc-server-key", default="", metavar="PATH", help="PEM file of the server's private key")
    g.add_argument("--grpc-root-cert", default="", metavar="PATH",
                   help="PEM file of the root certificates client certificates are checked against")
    keepalive = (
        ("--grpc-keepalive-time", 7200000, "MS", "time between keep-alive pings the server sends"),
        ("--grpc-keepalive-timeout", 20000, "MS", "time to wait for a ping's answer before closing"),
        ("--grpc-http2-max-pings-without-data", 2, "N", "pings allowed with no data frame sent (0: no limit)"),
        ("--grpc-http2-min-recv-ping-interval-without-data", 300000, "MS",
         "time a client must leave between pings with no data, else a ping strike"),
        ("--grpc-http2-max-ping-strikes", 2, "N", "bad pings tolerated before GOAWAY (0: any number)"),
        ("--grpc-max-connection-age", None, "MS", "time a connection may live (default: no limit)"),
        ("--grpc-max-connection-age-grace", None, "MS", "time granted after the maximum age"),
    )
    for name, default, metavar, text in keepalive:
        g.add_argument(name, type=integer, default=default, metavar=metavar, help=text)
    bool_flag(g, "--grpc-keepalive-permit-without-calls", False,
               "let clients send keep-alive pings with no call in flight")


def _backend(groups: FlagGroups) -> None:
    g = groups["Backend"]
    g.add_argument("--backend-directory", default="/opt/tritonserver/backends", metavar="DIR",
                   help="where Python-based backends live: a model with backend: \"<name>\" that is not one of "
                   "openinfer's own backends runs <backend-directory>/<name>/model.py")
    g.add_argument("--backend-config", action="append", default=[], metavar="[BACKEND,]KEY=VALUE",
                   help="a setting passed to a backend, or to all backends without BACKEND; repeatable")


def _cache(groups: FlagGroups) -> None:
    g = groups["Response Cache"]
    g.add_argument("--cache-config", action="append", default=[], metavar="CACHE,KEY=VALUE",
                   help="enable the response cache, e.g. local,size=1048576; repeatable")
    g.add_argument("--cache-directory", default="", metavar="DIR",
                   help="accepted for compatibility: only the built-in 'local' cache exists")


def _memory(groups: FlagGroups) -> None:
    # Accepted as tritonserver takes them; openinfer keeps no pinned or CUDA pool of its own,
    # so they have no effect (nor do Triton's on a host without a GPU).
    g = groups["Memory/Device Management"]
    g.add_argument("--pinned-memory-pool-byte-size", type=integer, default=1 << 28, metavar="BYTES",
                   help="accepted for compatibility: no effect (openinfer keeps no pinned memory pool)")
    g.add_argument("--cuda-memory-pool-byte-size", type=parse_cuda_pool, action="append", default=[],
                   metavar="<GPU device ID>:<pool byte size>",
                   help="accepted for compatibility: no effect (openinfer keeps no CUDA memory pool)")
    g.add_argument("--model-load-gpu-limit", action="append", default=[], metavar="<device_id>:<fraction>",
                   help="refuse a model whose GPU instances leave this device's memory more used than the "
                   "fraction; repeatable")
    for name in ("--cuda-virtual-address-size", "--min-supported-compute-capability", "--enable-peer-access",
                 "--buffer-manager-thread-count", "--host-policy"):
        g.add_argument(name, action="append", default=[], metavar="VALUE",
                       help="accepted for compatibility: no effect (CUDA pools, peer access, NUMA and "
                       "buffer threads are Triton's C++ core's)")


def _deprecated(groups: FlagGroups) -> None:
    g = groups["Deprecated"]
    bool_flag(g, "--strict-model-config", False, "true means --disable-auto-complete-config")
    g.add_argument("--response-cache-byte-size", type=integer, default=None, metavar="BYTES",
                   help="use --cache-config local,size=<bytes>")


def serve_parser(features: Iterable[str] | None = None) -> FlagParser:
    """The server's own flags and those of `features` (by default every feature's)."""
    from .. import features as known

    p = FlagParser(
        prog="openinfer serve",
        usage="openinfer serve --model-repository DIR [flags]",
        description="Serve a Triton model repository over KServe v2 HTTP and gRPC, with Prometheus "
        "metrics and, with --openai-port, the OpenAI API.",
        formatter_class=HelpFormatter,
    )
    groups = FlagGroups(p)
    for add in (_server, _repository, _http, _grpc, _backend, _cache, _memory, _deprecated):
        add(groups)
    known.add_flags(groups, known.load(features))
    groups.finish()
    return p
