"""What the checkpoint logic needs of a store, and nothing more.

Publish, resolve, prune and probe are written once against this protocol; the POSIX and S3 stores
implement it. Keys are relative to the checkpoint root and use "/" on both. The one operation the
whole design rests on is :meth:`Store.create`: it must either write a key that did not exist or
fail with :class:`Exists`, never replace what is there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs

from jobdispatch_publish.entry import FileRecord

__all__ = ["Exists", "LocalFile", "ObjectInfo", "Progress", "Store"]

#: Called with the number of bytes just transferred.
Progress = Callable[[int], None]


class Exists(Exception):
    """A create-only write found the key taken. Internal: callers turn it into a message."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@attrs.frozen
class LocalFile:
    """A file of a save on local disk, and its path relative to the save's folder."""

    path: Path
    relative: str
    size: int


@attrs.frozen
class ObjectInfo:
    size: int
    etag: str | None
    modified: float  # seconds since the epoch


@runtime_checkable
class Store(Protocol):
    """The operations publish, resolve, prune and probe are built from."""

    def describe(self, key: str = "") -> str:
        """A URL or path for messages (never with credentials)."""
        ...

    def check_root(self) -> None:
        """Raise :class:`~jobdispatch_publish.errors.RootUnavailable` unless the root exists and
        can be read; an existing root with nothing under it is fine (nothing published yet)."""
        ...

    def create(self, key: str, data: bytes) -> None:
        """Write ``key`` unless it exists (then raise :class:`Exists`); durable on return."""
        ...

    def write(self, key: str, data: bytes) -> None:
        """Write or replace a small object (pins only)."""
        ...

    def replace_marks(self, key: str, old: Sequence[str]) -> None:
        """Put the empty progress mark ``key`` in place of the marks ``old`` this writer left
        before (removed; missing ones are no error). Cheap rather than durable: a mark is a
        sign of life, and one lost in a crash only makes the job look a little older. Never
        creates the root: a missing one is
        :class:`~jobdispatch_publish.errors.RootUnavailable`."""
        ...

    def read(self, key: str) -> bytes | None:
        """A small object's bytes, or ``None`` when it does not exist."""
        ...

    def stat(self, key: str) -> ObjectInfo | None: ...

    def keys(self, prefix: str, *, limit: int | None = None) -> Iterator[str]:
        """Every key under ``prefix`` at any depth, in ascending order, at most ``limit``."""
        ...

    def children(self, prefix: str) -> Iterator[str]:
        """The immediate sub-folders of ``prefix`` (each ending in "/"), in ascending order."""
        ...

    def delete(self, keys: Iterable[str]) -> None:
        """Delete keys; missing ones are not an error."""
        ...

    def put_files(
        self, files: Sequence[LocalFile], prefix: str, progress: Progress | None = None
    ) -> list[FileRecord]:
        """Copy a save's files under ``prefix`` (a fresh folder) durably; their records."""
        ...

    def get_files(
        self,
        records: Sequence[FileRecord],
        prefix: str,
        dest: Path,
        progress: Progress | None = None,
    ) -> None:
        """Bring a private copy of a published save's files to ``dest`` (never a link to the
        published bytes), checking each file's size and digest against its record."""
        ...

    def local_path(self, key: str) -> Path | None:
        """Where ``key`` is on this machine's file system, if the store is one; else ``None``."""
        ...

    def sweep_incomplete(self, prefix: str, older_than: float) -> int:
        """Remove unfinished writes (partial folders, multipart uploads) begun before
        ``older_than`` (epoch seconds); how many."""
        ...
