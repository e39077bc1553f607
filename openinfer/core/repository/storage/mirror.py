"""A remote model repository mirrored into a local folder that the repository loads from.

Only complete models are copied. A model is complete when
  1. it has at least one version folder (a number) holding at least one file, and
  2. its listing (every object's key, size and ETag or generation) reads the same twice,
     `settle_secs` apart: objects in S3, GCS and Azure appear whole, so a model whose upload
     is under way shows up as a listing that still changes.
An incomplete model is skipped (poll mode tries again at the next poll; an explicit load fails),
and a model already copied keeps its last complete copy. A model is replaced in one rename, so
a reader never sees a mix of old and new files. When the store cannot be reached, nothing in
the folder changes: what is loaded keeps serving and the error is the caller's to log.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .locations import Location

log = logging.getLogger("openinfer.storage")

#: A model's listing: relative path -> "size:etag".
Listing = dict[str, str]


class StorageError(OSError):
    """The remote store could not be listed or read."""


def _signature(info: dict[str, Any]) -> str:
    tag = (
        info.get("ETag")
        or info.get("etag")
        or info.get("generation")
        or info.get("md5Hash")
        or info.get("LastModified")
        or info.get("last_modified")
    )
    return f"{info.get('size')}:{tag}"


def _complete(listing: Listing) -> bool:
    for relative in listing:
        version, sep, rest = relative.partition("/")
        if sep and rest and version.isdigit() and not version.startswith("0"):
            return True
    return False


class RemoteRepository:
    """One `s3://`, `gs://` or `as://` repository and its local copy (`local`)."""

    def __init__(self, location: Location, settle_secs: float = 1.0) -> None:
        self.location = location
        self.settle_secs = settle_secs
        self._fs: Any = location.filesystem()  # refuses early when the SDK is not installed
        parent = location.mount_directory
        if parent is not None:
            os.makedirs(parent, exist_ok=True)
        self.local = Path(tempfile.mkdtemp(prefix="openinfer-repo-", dir=parent)).resolve()
        self._copied: dict[str, Listing] = {}  # model -> the listing its local copy was made from
        self._known: set[str] = set()  # models at the last listing
        self._lock = threading.Lock()
        #: Why the last sync failed (None once one succeeds): start-up reports it.
        self.last_error: str | None = None

    @property
    def url(self) -> str:
        return self.location.url

    def names(self) -> set[str]:
        """Models the store held at the last listing (complete or not), and those copied."""
        return self._known | set(self._copied)

    # ------------------------------------------------------------------ listing
    def _filesystem(self) -> Any:
        return self._fs

    def _list(self, under: str = "") -> dict[str, Listing]:
        """model -> listing, for the whole repository or one model (`under`)."""
        fs = self._filesystem()
        root = self.location.root
        prefix = f"{root}/{under}" if under else root
        try:
            fs.invalidate_cache()
            found = fs.find(prefix, detail=True)
        except FileNotFoundError:
            found = {}
        except Exception as exc:  # botocore, aiohttp, azure: each SDK has its own errors
            raise StorageError(f"cannot list {self.url}: {exc}") from exc
        models: dict[str, Listing] = {}
        for path, info in found.items():
            if info.get("type") == "directory" or path.endswith("/"):
                continue
            relative = path[len(root) :].lstrip("/")
            model, sep, inside = relative.partition("/")
            if not sep or not inside or model.startswith("."):
                continue
            if under and model != under:
                continue
            models.setdefault(model, {})[inside] = _signature(info)
        return models

    # --------------------------------------------------------------------- sync
    def sync(self, names: Iterable[str] | None = None) -> None:
        """Bring the local copy up to date: every model (`None`: also drop the ones deleted from
        the store) or only `names`. Raises StorageError when the store cannot be read."""
        try:
            self._sync(names)
        except StorageError as exc:
            self.last_error = str(exc)
            raise
        self.last_error = None

    def _sync(self, names: Iterable[str] | None) -> None:
        with self._lock:
            wanted = None if names is None else set(names)
            one = next(iter(wanted)) if wanted is not None and len(wanted) == 1 else ""
            listing = self._list(one)
            if one:
                self._known.discard(one)
            self._known.update(listing)
            if wanted is None:
                self._known = set(listing)
            else:
                listing = {name: files for name, files in listing.items() if name in wanted}
            changed = [name for name, files in listing.items() if self._copied.get(name) != files]
            if changed:
                time.sleep(self.settle_secs)
                again = self._list(one)
                for name in changed:
                    if again.get(name) != listing[name] or not _complete(listing[name]):
                        log.info("model '%s' in %s is incomplete (still being uploaded?): not copied", name, self.url)
                        continue
                    self._fetch(name, listing[name])
            for name in list(self._copied):
                if name not in listing and (wanted is None or name in wanted):
                    self._drop(name)

    def _fetch(self, name: str, listing: Listing) -> None:
        fs = self._filesystem()
        staging = self.local / f".staging-{name}-{uuid.uuid4().hex[:8]}"
        remote = [f"{self.location.root}/{name}/{relative}" for relative in listing]
        local = [str(staging / relative) for relative in listing]
        try:
            for path in local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            fs.get(remote, local)
        except Exception as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise StorageError(f"cannot fetch model '{name}' from {self.url}: {exc}") from exc
        target = self.local / name
        retired = self.local / f".retired-{name}-{uuid.uuid4().hex[:8]}"
        if target.exists():
            os.rename(target, retired)
        os.rename(staging, target)
        shutil.rmtree(retired, ignore_errors=True)
        self._copied[name] = listing
        log.info("copied model '%s' from %s (%d files)", name, self.url, len(listing))

    def _drop(self, name: str) -> None:
        shutil.rmtree(self.local / name, ignore_errors=True)
        self._copied.pop(name, None)
        log.info("model '%s' was deleted from %s", name, self.url)

    def close(self) -> None:
        """The local copy goes with the server (as Triton's temporary copies do)."""
        shutil.rmtree(self.local, ignore_errors=True)
