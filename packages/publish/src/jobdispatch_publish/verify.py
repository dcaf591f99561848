"""Digests of checkpoint files: taken at publication, checked before a resume is handed over.

A published checkpoint is only as good as the bytes a resume reads. Sizes catch a truncated or
missing file; a SHA-256 per file, recorded in the publication entry, also catches a file rewritten
in place at the same size (a zombie, or a framework saving into the folder it loaded from). The
digest is taken while the bytes are copied anyway (POSIX publish, POSIX fetch), so it costs CPU
but no extra read, except where nothing is copied: a save published in place, the published
folder handed over as it is, an S3 upload or download (read once more, beside the transfer).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from jobdispatch_publish.entry import FileRecord
from jobdispatch_publish.errors import Corrupt
from jobdispatch_publish.store import Progress
from jobdispatch_publish.throttle import Throttle

__all__ = ["check_folder", "clone_or_copy", "copy_hashing", "drop_write", "hash_file"]

log = logging.getLogger(__name__)

CHUNK = 8 * 1024 * 1024
#: ioctl(2) request of Linux's FICLONE: share the source's extents (btrfs, XFS, bcachefs, ...).
_FICLONE = 0x40049409


def hash_file(path: Path) -> tuple[int, str]:
    """The size and SHA-256 of a file, read once."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
        return f.tell(), digest.hexdigest()


def drop_write(fd: int) -> None:
    """Make the open file ``fd`` read-only for everyone, changing nothing else about its mode.

    The one rule for published files (docs/specs/0006): publishing takes away write permission
    and nothing more. Who may read a published file is what the umask (or, for a save published
    in place, the program that wrote it) decided, as for the folders holding it, so a root kept
    private by umask 077 stays private (0400 files in 0700 folders) and a shared one stays
    shared (0444 in 0755 under umask 022). Folders keep their owner's write permission: prune
    deletes the files of withdrawn steps."""
    os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~0o222)


def copy_hashing(
    src: Path,
    dest: Path,
    *,
    throttle: Throttle | None = None,
    progress: Progress | None = None,
    read_only: bool = False,
) -> tuple[int, str]:
    """Copy ``src`` to a new file ``dest``, synced, hashing the bytes written; (size, sha256)."""
    digest = hashlib.sha256()
    copied = 0
    with open(src, "rb") as fin, open(dest, "xb") as fout:
        while chunk := fin.read(CHUNK):
            fout.write(chunk)
            digest.update(chunk)
            copied += len(chunk)
            if throttle is not None:
                throttle.spend(len(chunk))
            if progress is not None:
                progress(len(chunk))
        fout.flush()
        if read_only:
            drop_write(fout.fileno())
        os.fsync(fout.fileno())
    return copied, digest.hexdigest()


def _clone(src: Path, dest: Path) -> bool:
    """Make ``dest`` a reflink of ``src`` where the file system can; False where it cannot."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return False
    with open(src, "rb") as fin, open(dest, "xb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL):
                ok = False
            else:
                raise
        else:
            ok = True
    if not ok:
        dest.unlink()
    return ok


def clone_or_copy(src: Path, dest: Path) -> tuple[int, str]:
    """A private copy of ``src`` at ``dest``: a reflink where the file system has them (no bytes
    copied, and writes to either side never reach the other), else a copy; (size, sha256) of
    what ``dest`` now holds."""
    if _clone(src, dest):
        return hash_file(dest)
    return copy_hashing(src, dest)


def check_file(record: FileRecord, path: Path, size: int, sha256: str | None) -> None:
    """:class:`Corrupt` unless ``size`` and ``sha256`` (of ``path``) are what ``record`` says."""
    if size != record.size:
        msg = f"{path} is {size} bytes, its publication entry says {record.size}"
        raise Corrupt(msg)
    if record.sha256 is not None and sha256 != record.sha256:
        msg = (
            f"{path} is not the file that was published: its SHA-256 is {sha256}, "
            f"the publication entry says {record.sha256}"
        )
        raise Corrupt(msg)


def check_folder(records: Sequence[FileRecord], folder: Path) -> bool:
    """Check every file of ``records`` under ``folder`` against its size and digest.

    :class:`Corrupt` names the first file that is missing or differs. Returns whether every file
    had a digest to check; False for an entry of an older helper, whose sizes alone were checked
    (the content is then not read at all).
    """
    digests = all(r.sha256 is not None for r in records)
    for r in records:
        path = folder / r.path
        try:
            if r.sha256 is None:
                size, sha = path.stat().st_size, None
            else:
                size, sha = hash_file(path)
        except FileNotFoundError:
            msg = f"{path} is listed in the publication entry but missing"
            raise Corrupt(msg) from None
        check_file(r, path, size, sha)
    return digests
