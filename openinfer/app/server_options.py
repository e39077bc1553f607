"""The core's options from the command line: repositories, control mode, backend configuration,
GPU limits, and the deprecated cache flag in the syntax of the flag that replaced it.
A flag the server cannot take ends the process here, before anything starts."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import features as known_features
from ..core.memory import gpu_limit
from ..core.repository import storage
from ..core.repository.repository import ControlMode, RepositoryOptions
from ..core.repository.storage import RemoteRepository
from ..core.server import ServerOptions
from ..features import Feature
from .settings import Settings

log = logging.getLogger("openinfer")


def cache_specs(args: Settings) -> list[str]:
    """`--cache-config`, and the deprecated `--response-cache-byte-size` in its syntax."""
    size = getattr(args, "response_cache_byte_size", None)
    if size is None:
        return list(args.cache_config)
    print(f"Warning: '--response-cache-byte-size' has been deprecated! This will default to the 'local' cache "
          f"implementation with the provided byte size for its config. Please use '--cache-config' instead. The "
          f"equivalent --cache-config CLI args would be: '--cache-config=local,size={size}'", file=sys.stderr)
    return [f"local,size={size}", *args.cache_config]


def _backend_config(specs: Sequence[str], backend_directory: str | None = None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if backend_directory:  # every backend sees it, as Triton passes it in each backend's cmdline config
        out[""] = {"backend-directory": backend_directory}
    for spec in specs:
        backend, _, pair = spec.partition(",")
        key, _, value = pair.partition("=")
        if not pair:  # a global setting: `--backend-config default-max-batch-size=8`
            key, _, value = backend.partition("=")
            backend = ""
        out.setdefault(backend, {})[key] = value
    return out


def _repositories(specs: Sequence[str], exit_on_error: bool) -> tuple[list[Path], list[RemoteRepository], str]:
    """Local folders and object-storage repositories (`s3://`, `gs://`, `as://`), in order, and
    why the server cannot initialize ("" when it can). A path that is not a folder ends the
    process, in Triton's words, unless `--exit-on-error=false` asks to serve anyway."""
    local: list[Path] = []
    remotes: list[RemoteRepository] = []
    for spec in dict.fromkeys(specs):  # a path given twice is one repository, as in Triton
        if storage.is_remote(spec):
            try:
                remotes.append(storage.open_remote(spec))
            except ValueError as exc:
                raise SystemExit(f"error: {exc}") from None
        elif not Path(spec).is_dir():
            error = (f"Internal - failed to stat file {spec}" if not Path(spec).exists()
                     else "Invalid argument - repository path is not a valid directory")
            if exit_on_error:
                raise SystemExit(f"error: creating server: {error}")
            log.error("%s", error.replace(" - ", ": ", 1))
            return [], [], error
        else:
            local.append(Path(spec))
    return local, remotes, ""


def _gpu_limits(values: Sequence[str]) -> dict[int, float]:
    try:
        return gpu_limit.parse(values)
    except ValueError as exc:
        raise SystemExit(f"error: --model-load-gpu-limit: {exc}") from None


def server_options(args: Settings, features: Sequence[Feature] | None = None) -> ServerOptions:
    """The core's options from the command line, with the protocol extensions of `features` (by
    default every feature) to report; a flag the server cannot take ends the process."""
    mode = ControlMode(args.model_control_mode)
    if args.load_model and mode is not ControlMode.EXPLICIT:
        raise SystemExit("error: --load-model requires --model-control-mode=explicit")
    if "*" in args.load_model and len(args.load_model) > 1:
        raise SystemExit("error: --load-model=* must be the only --load-model")
    local, remotes, init_error = _repositories(args.model_repository, args.exit_on_error)
    repo_options = RepositoryOptions(
        control_mode=mode,
        startup_models=list(args.load_model),
        poll_secs=args.repository_poll_secs if mode is ControlMode.POLL else 0,
        auto_complete=not (args.disable_auto_complete_config or args.strict_model_config),
        model_config_name=args.model_config_name,
        backend_config=_backend_config(args.backend_config, args.backend_directory),
        exit_timeout_secs=args.exit_timeout_secs,
        remotes=remotes,
        load_retry=max(args.model_load_retry_count, 0),
        gpu_limits=_gpu_limits(args.model_load_gpu_limit),
        namespacing=args.model_namespacing,
    )
    return ServerOptions(
        model_repositories=local + [remote.local for remote in remotes],
        server_id=args.id,
        extensions=known_features.extension_names(known_features.load() if features is None else features),
        strict_readiness=args.strict_readiness,
        repository=repo_options,
        init_error=init_error,
    )
