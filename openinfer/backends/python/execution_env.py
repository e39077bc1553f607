"""`EXECUTION_ENV_PATH`: a Python model's own interpreter and packages.

Why: a model may need packages, or a Python, that the server does not have. As in Triton, its
config names an environment in `parameters { key: "EXECUTION_ENV_PATH" ... }`: a packed archive
(conda-pack's `.tar.gz`) or an already unpacked folder, `$$TRITON_MODEL_DIRECTORY` standing for
the model's folder. The model's worker processes then run on the environment's `bin/python`,
with the variables Triton's stub launcher sets (`VIRTUAL_ENV`, `PATH` and `LD_LIBRARY_PATH`
leading into the environment, no `PYTHONHOME`) and only openinfer's own package added to the
path. The environment must hold numpy, as Triton's stub requires, and a Python openinfer runs on.

An archive is unpacked once per path and modification time, into a private folder under the
temporary directory that the server removes when it exits. Unpacking follows libarchive's secure
extraction, which Triton uses: a member with an absolute path, a `..` element, or a path through
a symlink is refused, the load fails with libarchive's words, and nothing is written outside
the folder.
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import logging
import os
import shutil
import stat
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import InternalError

log = logging.getLogger("openinfer.python")

PARAMETER = "EXECUTION_ENV_PATH"
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
#: libarchive's ARCHIVE_FAILED, the code Triton reports a refused member with.
_ARCHIVE_FAILED = -25
_ARCHIVE_FATAL = -30
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ExecutionEnv:
    """An environment ready to run workers: its folder, interpreter and process variables."""

    root: str
    python: str
    variables: dict[str, str]


def configured_path(ctx: Any) -> str | None:
    """The model's `EXECUTION_ENV_PATH` with `$$TRITON_MODEL_DIRECTORY` replaced by the model's
    folder; None when the config names no environment."""
    params = ctx.config.parameters
    if PARAMETER not in params:
        return None
    return params[PARAMETER].string_value.replace(MODEL_DIRECTORY, str(ctx.model_dir), 1)


async def prepare(ctx: Any) -> ExecutionEnv | None:
    """The environment a worker of this model starts in (unpacked on first use); None for the
    server's own interpreter."""
    path = configured_path(ctx)
    if path is None:
        return None
    _announce(ctx, path)
    root = await asyncio.to_thread(_EXTRACTIONS.resolve, path)
    return activate(root)


_announced: dict[tuple[str, int], int] = {}


def _announce(ctx: Any, path: str) -> None:
    """Triton's info line, once per loaded version rather than once per worker."""
    key = (ctx.name, ctx.version)
    if _announced.get(key) != id(ctx):
        _announced[key] = id(ctx)
        log.info("Using Python execution env %s", path)


def activate(root: str) -> ExecutionEnv:
    """What Triton's stub launcher derives from an environment folder, checked as it checks it."""
    activate_script = os.path.join(root, "bin", "activate")
    if not os.path.exists(activate_script):
        raise InternalError(
            f"Path {activate_script} does not exist. The Python environment should contain an "
            "'activate' script."
        )
    python = next(
        (p for p in (os.path.join(root, "bin", n) for n in ("python", "python3")) if os.access(p, os.X_OK)),
        None,
    )
    if python is None:
        raise InternalError(
            f"no Python interpreter in the execution environment '{root}': bin/python is missing "
            "or not executable"
        )
    variables = {
        "VIRTUAL_ENV": root,
        "VIRTUAL_ENV_PROMPT": f"({root})",
        "PATH": _prepend(os.path.join(root, "bin"), os.environ.get("PATH")),
        "LD_LIBRARY_PATH": _prepend(os.path.join(root, "lib"), os.environ.get("LD_LIBRARY_PATH")),
        # The worker imports openinfer and nothing else of the server's: the environment's own
        # packages must win over whatever the server's interpreter has installed.
        "PYTHONPATH": _prepend(_EXTRACTIONS.package_path(), os.environ.get("PYTHONPATH")),
    }
    if "PYTHONHOME" in os.environ:
        variables["PYTHONHOME"] = ""  # an empty PYTHONHOME counts as unset
    return ExecutionEnv(root, python, variables)


def _prepend(first: str, rest: str | None) -> str:
    return f"{first}{os.pathsep}{rest}" if rest else first


class _Extractions:
    """The unpacked archives of this server process, by canonical path and modification time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: str | None = None
        self._count = 0
        self._done: dict[str, tuple[int, str]] = {}
        self._package_path: str | None = None

    def base(self) -> str:
        if self._base is None:
            self._base = tempfile.mkdtemp(prefix="python_env_")
            atexit.register(shutil.rmtree, self._base, True)
        return self._base

    def package_path(self) -> str:
        """A folder holding only `openinfer` (a link to this package), for the worker's path."""
        with self._lock:
            if self._package_path is None:
                folder = os.path.join(self.base(), "openinfer_path")
                os.makedirs(folder, exist_ok=True)
                link = os.path.join(folder, "openinfer")
                if not os.path.islink(link):
                    os.symlink(Path(__file__).resolve().parents[2], link)
                self._package_path = folder
            return self._package_path

    def resolve(self, env_path: str) -> str:
        """The folder of the environment `env_path` names, unpacking an archive when its path or
        modification time is new."""
        with self._lock:
            if not os.path.exists(env_path):
                raise InternalError(f"Failed to get the canonical path for {env_path}.")
            canonical = os.path.realpath(env_path)
            info = os.stat(canonical)
            if stat.S_ISDIR(info.st_mode):
                log.debug(
                    "Returning canonical path since EXECUTION_ENV_PATH does not contain compressed "
                    "path. Path: %s", canonical,
                )
                return canonical
            known = self._done.get(canonical)
            if known is not None and known[0] == info.st_mtime_ns:
                return known[1]
            log.debug("Extracting Python execution env %s", canonical)
            # A changed archive goes to a new folder: workers still running on the previous one
            # keep their files until the server exits.
            target = os.path.join(self.base(), str(self._count))
            self._count += 1
            try:
                os.mkdir(target, 0o755)
            except OSError:
                raise InternalError(f"Failed to create environment directory for '{target}'.") from None
            try:
                extract(canonical, target)
            except BaseException:
                shutil.rmtree(target, ignore_errors=True)
                raise
            self._done[canonical] = (info.st_mtime_ns, target)
            return target


_EXTRACTIONS = _Extractions()


# ------------------------------------------------------------------------------ extraction
class _Refused(Exception):
    """A member libarchive's secure extraction would refuse, in its words."""


def extract(archive: str, target: str) -> None:
    """Unpack a tar (gzip, bz2 or xz compressed, or not) into the existing folder `target` with
    libarchive's rules for ARCHIVE_EXTRACT_SECURE_NODOTDOT, _NOABSOLUTEPATHS and _SYMLINKS,
    member times kept (ARCHIVE_EXTRACT_TIME)."""
    try:
        tar = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError):
        raise InternalError("archive_read_open_filename() failed.") from None
    directories: list[tuple[str, float]] = []
    with tar:
        while True:
            try:
                member = tar.next()
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise InternalError(_read_error("archive_read_next_header", exc)) from None
            if member is None:
                break
            try:
                written = _write(tar, member, target)
            except _Refused as exc:
                raise InternalError(
                    f"archive_write_header() failed with error code = {_ARCHIVE_FAILED} error message is {exc}"
                ) from None
            except (tarfile.TarError, EOFError) as exc:
                raise InternalError(_read_error("archive_read_data_block", exc)) from None
            except OSError as exc:
                raise InternalError(
                    f"archive_write_header() failed with error code = {_ARCHIVE_FAILED} error message is "
                    f"Can't create '{member.name}': {exc.strerror or exc}"
                ) from None
            if written is not None and member.isdir():
                directories.append((written, member.mtime))
    for path, mtime in reversed(directories):  # a folder's time once nothing more goes into it
        _set_time(path, mtime)


def _read_error(step: str, exc: BaseException) -> str:
    return f"{step}() failed with error code = {_ARCHIVE_FATAL} error message is {exc or type(exc).__name__}"


def _clean(name: str) -> list[str]:
    """A member name's elements, refused as libarchive refuses them (empty, absolute, `..`);
    `.` and empty elements dropped."""
    if not name:
        raise _Refused("Invalid empty pathname")
    if name.startswith("/"):
        raise _Refused("Path is absolute")
    parts = name.split("/")
    if ".." in parts:
        raise _Refused("Path contains '..'")
    return [p for p in parts if p not in ("", ".")]


def _check_symlinks(target: str, parts: list[str], shown: str, link_target: bool = False) -> None:
    """No element on the way to the member may be a symlink; one in the last place is removed
    so the member replaces it (unless it is where a hard link points)."""
    path = target
    for index, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        last = index == len(parts) - 1
        if stat.S_ISLNK(info.st_mode):
            if not last:
                raise _Refused(f"Cannot extract through symlink {shown}")
            if not link_target:
                os.unlink(path)
            return
        if not last and not stat.S_ISDIR(info.st_mode):
            raise _Refused(f"Could not stat {shown}")


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: str) -> str | None:
    """Write one member under `target`; its path, or None for what is not written."""
    parts = _clean(member.name)
    if not parts:
        return None  # the folder itself ("." or "./")
    shown = "/".join(parts)
    _check_symlinks(target, parts, shown)
    path = os.path.join(target, *parts)
    if len(parts) > 1:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    if member.isdir():
        if os.path.lexists(path) and not os.path.isdir(path):
            os.unlink(path)
        try:
            os.mkdir(path, (member.mode & 0o777) | 0o700)
        except FileExistsError:
            pass
        return path
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)  # a folder in the way of a file (fails, as libarchive does, unless empty)
    elif os.path.lexists(path):
        os.unlink(path)
    if member.issym():
        os.symlink(member.linkname, path)  # any target: only writing through it is refused
        _set_time(path, member.mtime)
        return path
    if member.islnk():
        link_parts = _clean(member.linkname)
        _check_symlinks(target, link_parts, "/".join(link_parts), link_target=True)
        os.link(os.path.join(target, *link_parts), path, follow_symlinks=False)
        return path
    if not member.isreg():
        return None  # devices and fifos: nothing a Python environment needs
    source = tar.extractfile(member)
    assert source is not None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags, member.mode & 0o777)  # the umask applies, as in libarchive
    with os.fdopen(descriptor, "wb") as out:
        while True:
            chunk = source.read(_CHUNK)
            if not chunk:
                break
            out.write(chunk)
    _set_time(path, member.mtime)
    return path


def _set_time(path: str, mtime: float) -> None:
    try:
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EPERM, errno.EROFS):
            raise
