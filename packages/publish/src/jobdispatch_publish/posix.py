"""The checkpoint store on a POSIX file system (local disk, NFS, Lustre, ...).

Durability follows the usual recipe, in this order: write to a hidden temporary name, ``fsync``
the file, move it into place, ``fsync`` the folder that now holds it. A save's folder is filled
under a hidden ``.partial`` name and renamed into place once every file and folder in it is
synced, so a reader never sees half a save. Publication entries use ``link`` rather than
``rename`` to move into place: ``rename`` silently replaces an existing file, ``link`` fails with
``EEXIST``, which makes it the file system's create-only write (the analogue of S3's
``If-None-Match: *``) and is atomic on local file systems and NFS alike.

Published files are made read-only (their write bits taken away, nothing else changed:
:func:`~jobdispatch_publish.verify.drop_write`), so nothing that resumes from the published folder
itself can rewrite it by accident, and ``resolve --into`` hands out a private copy (a reflink where
the file system has them), never a hard link: a link shares the inode, and an execution rewriting
its resume copy in place would rewrite the published checkpoint with it.

Names starting with "." are writes in progress and are never listed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from jobdispatch.durable import fsync_dir

from jobdispatch_publish.entry import FileRecord
from jobdispatch_publish.errors import Corrupt, RootUnavailable, SaveChanged
from jobdispatch_publish.store import Exists, LocalFile, ObjectInfo, Progress
from jobdispatch_publish.throttle import Throttle
from jobdispatch_publish.verify import (
    check_file,
    clone_or_copy,
    copy_hashing,
    drop_write,
    hash_file,
)

__all__ = ["PosixStore"]

T = TypeVar("T")


def _seal_file(path: Path) -> None:
    """Make a file written in place read-only and durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        drop_write(fd)
        os.fsync(fd)
    finally:
        os.close(fd)


def _makedirs(path: Path) -> None:
    """Create ``path`` and any missing parents, syncing each parent that gained an entry."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        fsync_dir(d.parent)


#: How many times a write into a folder is tried again after the folder vanished under it.
_FOLDER_RACES = 100


def _made_in(folder: Path, make: Callable[[], T]) -> T:
    """``make()`` an entry inside ``folder``, making ``folder`` first.

    :meth:`PosixStore.delete` removes the folders its deletions emptied, so a folder made here
    may be removed by another process before the entry is made in it: every rank of a job
    resolving at once pins and unpins the same step's folder, and about one resolve in 160
    failed with ``FileNotFoundError`` when four resolved together. Once the entry exists the
    folder is not empty and stays, so on that error (from the entry, or from a parent removed
    while the folders were being made) the folders are made again and the entry tried again;
    each retry means another process emptied a folder meanwhile.
    """
    for _ in range(_FOLDER_RACES - 1):
        try:
            _makedirs(folder)
            return make()
        except FileNotFoundError:
            continue
    _makedirs(folder)
    return make()


class PosixStore:
    """A :class:`~jobdispatch_publish.store.Store` rooted at a folder."""

    def __init__(self, root: Path, *, max_bandwidth: int | None = None) -> None:
        self.root = root
        self.max_bandwidth = max_bandwidth

    def describe(self, key: str = "") -> str:
        return str(self.root / key) if key else str(self.root)

    def local_path(self, key: str) -> Path:
        return self.root / key

    def check_root(self) -> None:
        """:class:`RootUnavailable` unless the root is a folder this process can list.

        A missing root is a typo or a shared file system not mounted on this node, never "nothing
        published yet": that answer would restart training from step 0.
        """
        try:
            is_dir = self.root.is_dir()
            exists = is_dir or self.root.exists()
        except OSError as exc:  # ELOOP, ENAMETOOLONG, EACCES on a parent, a stale NFS handle
            msg = f"{self.root} cannot be examined: {exc.strerror or exc}"
            raise RootUnavailable(msg) from None
        if not exists:
            msg = (
                f"{self.root} does not exist (a typo, or a shared file system that is not "
                "mounted on this node?)"
            )
            raise RootUnavailable(msg)
        if not is_dir:
            msg = f"{self.root} is not a folder"
            raise RootUnavailable(msg)
        if not os.access(self.root, os.R_OK | os.X_OK):
            msg = f"{self.root} cannot be read by this process (permission denied)"
            raise RootUnavailable(msg)

    # -- small objects -------------------------------------------------------------------------

    def _temp_for(self, final: Path) -> Path:
        return final.parent / f".tmp-{final.name}-{secrets.token_hex(6)}"

    def _write_temp(self, final: Path, data: bytes) -> Path:
        self.check_root()
        temp = self._temp_for(final)

        def make() -> None:
            with open(temp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

        _made_in(final.parent, make)
        return temp

    def create(self, key: str, data: bytes) -> None:
        final = self.root / key
        temp = self._write_temp(final, data)
        try:
            os.link(temp, final)
        except FileExistsError:
            raise Exists(key) from None
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(final.parent)

    def write(self, key: str, data: bytes) -> None:
        final = self.root / key
        temp = self._write_temp(final, data)
        os.replace(temp, final)
        fsync_dir(final.parent)

    def replace_marks(self, key: str, old: Sequence[str]) -> None:
        """One ``rename`` of the previous mark to the new name (atomic: a reader sees the one or
        the other, never both or neither), else a create; no ``fsync`` (see the protocol)."""
        final = self.root / key
        moved = False
        for prev in old:
            if prev == key:
                moved = True
                continue
            path = self.root / prev
            try:
                if moved:
                    path.unlink()
                else:
                    os.rename(path, final)
                    moved = True
            except FileNotFoundError:
                continue
        if moved:
            return
        try:
            fd = os.open(final, os.O_WRONLY | os.O_CREAT, 0o666)
        except FileNotFoundError:
            # The progress folder is missing: make it, never the root (a root that is not there
            # is a typo or an unmounted file system, which a mark must not paper over).
            self.check_root()
            with contextlib.suppress(FileExistsError):
                os.mkdir(final.parent)
            fd = os.open(final, os.O_WRONLY | os.O_CREAT, 0o666)
        os.close(fd)

    def read(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def stat(self, key: str) -> ObjectInfo | None:
        try:
            st = (self.root / key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return ObjectInfo(st.st_size, None, st.st_mtime)

    # -- listing -------------------------------------------------------------------------------

    def _sorted(self, folder: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(folder) as it:
                found = [e for e in it if not e.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return []
        # The order S3 would list them in: a folder sorts as its name followed by "/".
        return sorted(found, key=lambda e: e.name + ("/" if e.is_dir() else ""))

    def _walk(self, folder: Path, key: str) -> Iterator[str]:
        for e in self._sorted(folder):
            if e.is_dir(follow_symlinks=False):
                yield from self._walk(Path(e.path), f"{key}{e.name}/")
            else:
                yield f"{key}{e.name}"

    def keys(self, prefix: str, *, limit: int | None = None) -> Iterator[str]:
        folder_key, _, start = prefix.rpartition("/")
        folder_key = f"{folder_key}/" if folder_key else ""
        count = 0
        for e in self._sorted(self.root / folder_key):
            if not e.name.startswith(start):
                continue
            keys: Iterable[str]
            if e.is_dir(follow_symlinks=False):
                keys = self._walk(Path(e.path), f"{folder_key}{e.name}/")
            else:
                keys = (f"{folder_key}{e.name}",)
            for k in keys:
                if limit is not None and count >= limit:
                    return
                count += 1
                yield k

    def children(self, prefix: str) -> Iterator[str]:
        for e in self._sorted(self.root / prefix):
            if e.is_dir(follow_symlinks=False):
                yield f"{prefix}{e.name}/"

    def delete(self, keys: Iterable[str]) -> None:
        touched: set[Path] = set()
        for key in keys:
            path = self.root / key
            try:
                path.unlink()
            except (FileNotFoundError, NotADirectoryError):
                continue
            touched.add(path.parent)
        # Remove the folders the deletions emptied, deepest first, never the root itself.
        for folder in sorted(touched, key=lambda p: len(p.parts), reverse=True):
            p = folder
            while p != self.root and self.root in p.parents:
                try:
                    p.rmdir()
                except OSError:
                    break
                touched.add(p.parent)
                p = p.parent
        for folder in touched:
            # A folder another deleter emptied and removed meanwhile needs no sync here.
            with contextlib.suppress(FileNotFoundError):
                fsync_dir(folder)

    # -- saves ---------------------------------------------------------------------------------

    def put_files(
        self, files: Sequence[LocalFile], prefix: str, progress: Progress | None = None
    ) -> list[FileRecord]:
        self.check_root()
        final = self.root / prefix.rstrip("/")
        partial = final.parent / f".{final.name}.partial"
        _made_in(final.parent, partial.mkdir)
        throttle = Throttle(self.max_bandwidth)
        records = []
        folders = {partial}
        for f in files:
            dest = partial / f.relative
            if not dest.parent.exists():
                dest.parent.mkdir(parents=True)
            folders.update(p for p in dest.parents if partial in p.parents or p == partial)
            copied, sha256 = copy_hashing(
                f.path, dest, throttle=throttle, progress=progress, read_only=True
            )
            if copied != f.size:
                msg = f"{f.path} changed size while it was copied ({f.size} -> {copied} bytes)"
                raise SaveChanged(msg)
            records.append(FileRecord(f.relative, copied, sha256=sha256))
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        os.rename(partial, final)
        fsync_dir(final.parent)
        return records

    def seal(self, prefix: str, files: Sequence[LocalFile]) -> list[FileRecord]:
        """Make a save written straight into the store durable where it is, without copying:
        each file is hashed, made read-only and synced."""
        folders: set[Path] = {self.root / prefix.rstrip("/")}
        records = []
        for f in files:
            size, sha256 = hash_file(f.path)
            if size != f.size:
                msg = f"{f.path} changed size while it was published ({f.size} -> {size} bytes)"
                raise SaveChanged(msg)
            _seal_file(f.path)
            folders.add(f.path.parent)
            records.append(FileRecord(f.relative, size, sha256=sha256))
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        fsync_dir((self.root / prefix.rstrip("/")).parent)
        return records

    def get_files(
        self,
        records: Sequence[FileRecord],
        prefix: str,
        dest: Path,
        progress: Progress | None = None,
    ) -> None:
        """Give ``dest`` a private copy of each published file, checked against its record.

        A reflink where the file system has them (btrfs, XFS: no bytes copied), else a copy; never
        a hard link, which would let a write to the copy change the published checkpoint. The size
        and SHA-256 of what ``dest`` holds are checked against the entry as the copy is made.
        """
        src_root = self.root / prefix
        for r in records:
            src = src_root / r.path
            target = dest / r.path
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                size, sha256 = clone_or_copy(src, target)
            except FileNotFoundError:
                if src.exists():
                    raise
                msg = f"{src} is listed in the publication entry but missing"
                raise Corrupt(msg) from None
            check_file(r, src, size, sha256)
            if progress is not None:
                progress(r.size)

    def sweep_incomplete(self, prefix: str, older_than: float) -> int:
        removed = 0
        base = self.root / prefix
        if not base.is_dir():
            return 0
        for dirpath, dirnames, filenames in os.walk(base):
            for name in list(dirnames):
                p = Path(dirpath) / name
                if name.endswith(".partial") and name.startswith("."):
                    dirnames.remove(name)
                    if p.stat().st_mtime < older_than:
                        shutil.rmtree(p, ignore_errors=True)
                        removed += 1
            for name in filenames:
                p = Path(dirpath) / name
                if name.startswith(".tmp-") and p.stat().st_mtime < older_than:
                    p.unlink(missing_ok=True)
                    removed += 1
        return removed
