"""The checkpoint store on a POSIX file system (local disk, NFS, Lustre, ...).

Durability follows the usual recipe, in this order: write to a hidden temporary name, ``fsync``
the file, move it into place, ``fsync`` the folder that now holds it. A save's folder is filled
under a hidden ``.partial`` name and renamed into place once every file and folder in it is
synced, so a reader never sees half a save. Publication entries use ``link`` rather than
``rename`` to move into place: ``rename`` silently replaces an existing file, ``link`` fails with
``EEXIST``, which makes it the file system's create-only write (the analogue of S3's
``If-None-Match: *``) and is atomic on local file systems and NFS alike.

Names starting with "." are writes in progress and are never listed.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from jobdispatch.errors import Invalid

from jobdispatch_publish.entry import FileRecord
from jobdispatch_publish.errors import Corrupt
from jobdispatch_publish.store import Exists, LocalFile, ObjectInfo, Progress
from jobdispatch_publish.throttle import Throttle

__all__ = ["PosixStore", "fsync_dir"]

_CHUNK = 8 * 1024 * 1024


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (creations, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
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


class PosixStore:
    """A :class:`~jobdispatch_publish.store.Store` rooted at a folder."""

    def __init__(self, root: Path, *, max_bandwidth: int | None = None) -> None:
        self.root = root
        self.max_bandwidth = max_bandwidth

    def describe(self, key: str = "") -> str:
        return str(self.root / key) if key else str(self.root)

    def local_path(self, key: str) -> Path:
        return self.root / key

    def _check_root(self) -> None:
        if not self.root.is_dir():
            msg = f"checkpoint root {self.root} does not exist or is not a folder"
            raise Invalid(msg)

    # -- small objects -------------------------------------------------------------------------

    def _temp_for(self, final: Path) -> Path:
        return final.parent / f".tmp-{final.name}-{secrets.token_hex(6)}"

    def _write_temp(self, final: Path, data: bytes) -> Path:
        self._check_root()
        _makedirs(final.parent)
        temp = self._temp_for(final)
        with open(temp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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
            if folder.is_dir():
                fsync_dir(folder)

    # -- saves ---------------------------------------------------------------------------------

    def _copy(
        self, src: LocalFile, dest: Path, throttle: Throttle, progress: Progress | None
    ) -> int:
        copied = 0
        with open(src.path, "rb") as fin, open(dest, "xb") as fout:
            while chunk := fin.read(_CHUNK):
                fout.write(chunk)
                copied += len(chunk)
                throttle.spend(len(chunk))
                if progress is not None:
                    progress(len(chunk))
            fout.flush()
            os.fsync(fout.fileno())
        return copied

    def put_files(
        self, files: Sequence[LocalFile], prefix: str, progress: Progress | None = None
    ) -> list[FileRecord]:
        self._check_root()
        final = self.root / prefix.rstrip("/")
        _makedirs(final.parent)
        partial = final.parent / f".{final.name}.partial"
        partial.mkdir()
        throttle = Throttle(self.max_bandwidth)
        records = []
        folders = {partial}
        for f in files:
            dest = partial / f.relative
            if not dest.parent.exists():
                dest.parent.mkdir(parents=True)
            folders.update(p for p in dest.parents if partial in p.parents or p == partial)
            copied = self._copy(f, dest, throttle, progress)
            if copied != f.size:
                msg = f"{f.path} changed size while it was copied ({f.size} -> {copied} bytes)"
                raise Invalid(msg)
            records.append(FileRecord(f.relative, copied))
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        os.rename(partial, final)
        fsync_dir(final.parent)
        return records

    def seal(self, prefix: str, files: Sequence[LocalFile]) -> list[FileRecord]:
        """Make a save written straight into the store durable where it is, without copying."""
        folders: set[Path] = {self.root / prefix.rstrip("/")}
        for f in files:
            _fsync_file(f.path)
            folders.add(f.path.parent)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            fsync_dir(folder)
        fsync_dir((self.root / prefix.rstrip("/")).parent)
        return [FileRecord(f.relative, f.size) for f in files]

    def get_files(
        self,
        records: Sequence[FileRecord],
        prefix: str,
        dest: Path,
        progress: Progress | None = None,
    ) -> None:
        """Hard-link the published files into ``dest`` (a copy across file systems).

        Links share the published bytes without copying them, and keep them readable even if the
        checkpoint is pruned while training reads it.
        """
        src_root = self.root / prefix
        for r in records:
            src = src_root / r.path
            try:
                size = src.stat().st_size
            except FileNotFoundError:
                msg = f"{src} is listed in the publication entry but missing"
                raise Corrupt(msg) from None
            if size != r.size:
                msg = f"{src} is {size} bytes, its publication entry says {r.size}"
                raise Corrupt(msg)
            target = dest / r.path
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, target)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                    raise
                shutil.copyfile(src, target)
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
