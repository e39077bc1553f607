"""Model repositories in object storage (S3, GCS, Azure), mirrored into local folders."""

from .locations import Location, is_remote, parse
from .mirror import RemoteRepository, StorageError

__all__ = ["Location", "RemoteRepository", "StorageError", "is_remote", "open_remote", "parse"]


def open_remote(url: str, settle_secs: float = 1.0) -> RemoteRepository:
    """A remote repository from Triton's path syntax; ValueError for a malformed one."""
    return RemoteRepository(parse(url), settle_secs)
