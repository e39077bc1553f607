"""What the repository reads and writes on disk for one model: its configuration, its version
folders, the versions its policy selects, a fingerprint that changes with its files, and the
folder a load with file overrides writes."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ..._proto import model_config_pb2 as mc
from .. import config as configs
from ..errors import InvalidArgumentError

log = logging.getLogger("openinfer.repository")


def read_config(model_dir: Path, override: str | None, file_name: str | None, required: bool = False) -> mc.ModelConfig:
    """The configuration a load uses: the request's override, else the folder's file; an empty
    one when there is none, for the backend to complete, unless auto-completion is off
    (`required`), where Triton refuses the model in its file system's words."""
    if override is not None:
        return configs.parse_config_json(override)
    text = configs.read_config_text(model_dir, file_name)
    if text is None and required:
        raise InvalidArgumentError(
            f"failed to open text file for read {model_dir / 'config.pbtxt'}: No such file or directory"
        )
    return configs.parse_config_text(text) if text is not None else mc.ModelConfig()


#: Folders of a model that are not versions: Triton's warm-up data, initial states and configs.
_NOT_VERSIONS = frozenset({"warmup", "initial_state", "configs"})


def version_dirs(model_dir: Path) -> list[int]:
    """The numbered version folders under a model directory, in order."""
    versions = []
    try:
        names = os.listdir(model_dir)
    except OSError:
        return []
    for name in names:
        if name in _NOT_VERSIONS or not (model_dir / name).is_dir():
            continue
        if len(name) > 1 and name.startswith("0"):
            log.warning("ignore version directory '%s' which contains leading zeros in its directory name", name)
        elif not name.isdigit():
            log.warning("ignore version directory '%s' which fails to convert to integral number", name)
        elif name != "0":
            versions.append(int(name))
    return sorted(versions)


def select_versions(config: mc.ModelConfig, available: list[int]) -> list[int]:
    """The versions the config's version policy serves (the newest one by default)."""
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return available
    if which == "specific":
        wanted = {int(v) for v in policy.specific.versions}
        return [v for v in available if v in wanted]
    count = policy.latest.num_versions if which == "latest" else 1
    return available[-max(count, 1) :]


def fingerprint(model_dir: Path, shared_only: bool = False) -> str:
    """Changes when anything under the model directory changes (names, sizes, mtimes); with
    `shared_only`, when anything but its configuration and version folders does."""
    digest = hashlib.sha1()
    for root, dirs, files in os.walk(model_dir):
        # Bytecode caches appear when a model runs; they must not read as a change to reload.
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        if shared_only and Path(root) == model_dir:
            dirs[:] = [d for d in dirs if d != "configs" and not d.isdigit()]
            files = [f for f in files if f != "config.pbtxt"]
        for name in sorted(files):
            path = Path(root) / name
            try:
                stat = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(model_dir)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def stamps(model_dir: Path) -> dict[str, str]:
    """The fingerprint of each version folder, and under "" of everything they share but the
    configuration: which versions a load must load again."""
    found = {"": fingerprint(model_dir, shared_only=True)}
    for version in version_dirs(model_dir):
        found[str(version)] = fingerprint(model_dir / str(version))
    return found


def write_override_files(name: str, files: dict[str, bytes]) -> Path:
    """A load's `file:<path>` overrides written into a fresh model directory of their own;
    a path that leaves it is refused and nothing stays behind."""
    root = Path(tempfile.mkdtemp(prefix=f"openinfer-{name}-"))
    model_dir = root / name
    model_dir.mkdir()
    for key, content in files.items():
        relative = key[len("file:") :].lstrip("/")  # Triton joins "/1/model.py" under the model
        invalid = InvalidArgumentError(
            f"invalid file override path '{relative}': it must stay inside the model directory"
        )
        try:
            target = (model_dir / relative).resolve()
            if not relative or target == model_dir.resolve() or not target.is_relative_to(model_dir.resolve()):
                raise invalid
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        except (OSError, ValueError):  # a directory's name, a NUL byte, a file where a folder must go
            shutil.rmtree(root, ignore_errors=True)
            raise invalid from None
        except InvalidArgumentError:
            shutil.rmtree(root, ignore_errors=True)
            raise
    return model_dir
