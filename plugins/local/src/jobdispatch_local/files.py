"""Durable files: atomic JSON writes, directory syncs and the per-object lock.

Everything the local scheduler knows is in files, so that a runner, a supervisor and a CLI in
separate processes agree, and so that nothing is lost when one of them dies. A file is written
to a temporary name, flushed and fsynced, renamed over its final name, and its directory fsynced:
a reader sees the old content or the new, never half of it, and after a crash or power cut the
rename that returned is there.

Every folder and file made here is the owner's alone (0700 and 0600), whatever the umask:
``object.json`` holds the job's ``env`` verbatim (tokens, keys), and a rank's output may print
them.

This module is imported by the runner, which must start fast: it uses the standard library only,
and the core's :mod:`jobdispatch.durable`, which does too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jobdispatch.durable import fsync_dir

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "LockBusy",
    "append_private",
    "fsync_dir",
    "locked",
    "private_dir",
    "read_json",
    "write_json",
]

#: The modes of everything the scheduler creates: readable and writable by its owner only.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> None:
    """Create ``path`` and each missing parent as a private folder (0700, whatever the umask);
    folders that exist are left as they are. ``Path.mkdir(parents=True)`` gives the parents
    the umask's mode, which is why each one is made here."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # another process made it meanwhile: its mode is its maker's
        os.chmod(folder, PRIVATE_DIR)


def append_private(path: Path) -> int:
    """A descriptor appending to ``path``, created private (0600) when missing (a rank's
    output, the runner's log); the caller closes it."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)


def write_json(path: Path, data: Any, *, sync_dir: bool = True) -> None:
    """Write ``data`` as JSON to ``path`` atomically and durably (write, fsync, rename, fsync)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = json.dumps(data, indent=1, sort_keys=True).encode() + b"\n"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when the file does not exist."""
    try:
        with path.open("rb") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class LockBusy(Exception):
    """Another process holds the object's lock and did not let it go in the time allowed.

    Every holder's critical section is a few small reads and writes; one that keeps the lock
    longer has been paused (SIGSTOP, a frozen VM) or is stuck, and nobody may wait on it.
    """


#: How often a bounded lock attempt tries again while another process holds the lock.
_RETRY = 0.005


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False, wait: float | None = None) -> Iterator[None]:
    """Hold the object's lock file: exclusive to change its control state, shared to read a
    consistent snapshot. ``flock`` locks die with their process, so a crash never leaves one.

    With ``wait`` (seconds, 0 for a single try), give up with :class:`LockBusy` once it has
    passed instead of waiting as long as the holder likes: a paused holder then delays its
    own object only. Without it, wait for the lock (the runner, which serves just this object).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if wait is None:
            fcntl.flock(fd, mode)
        else:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        msg = f"{path} is held by another process"
                        raise LockBusy(msg) from None
                    time.sleep(min(_RETRY, left))
        yield
    finally:
        os.close(fd)  # closing releases the lock
