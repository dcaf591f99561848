"""Publishing one save: its data first, durably, then its entry, create-only.

The order is the whole guarantee. Data goes to a folder no other publish uses; only when every
file is durable (synced on POSIX, listed with its ETag on S3) is the entry written, with a
create-only write keyed by the step. Killed at any point before that write, a publish leaves data
nobody can resolve (prune sweeps it later); the write itself either happens whole or not at all.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path

from jobdispatch.errors import Invalid

from jobdispatch_publish import layout
from jobdispatch_publish.entry import Entry
from jobdispatch_publish.errors import AlreadyPublished, SaveChanged
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.marks import record_publication
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.store import Exists, LocalFile, Progress, Store

__all__ = ["Published", "publish", "scan_save"]

log = logging.getLogger(__name__)


def scan_save(folder: Path) -> list[LocalFile]:
    """Every regular file under ``folder`` (symbolic links followed), in a stable order."""
    if not folder.is_dir():
        msg = f"save {folder} is not a folder"
        raise Invalid(msg)
    files = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            st = path.stat()
            if not path.is_file():
                msg = f"{path} in save {folder} is not a regular file"
                raise Invalid(msg)
            files.append(LocalFile(path, path.relative_to(folder).as_posix(), st.st_size))
    if not files:
        msg = f"save {folder} has no files"
        raise Invalid(msg)
    return files


def _fingerprint(files: list[LocalFile]) -> list[tuple[int, int]]:
    out = []
    for f in files:
        st = f.path.stat()
        out.append((st.st_size, st.st_mtime_ns))
    return out


class Published:
    """The result of :func:`publish`: the entry and whether this call wrote it."""

    def __init__(self, entry: Entry, *, written: bool) -> None:
        self.entry = entry
        self.written = written


def _in_place_prefix(store: Store, identity: Identity, folder: Path) -> str | None:
    """The save's key prefix when it already sits in this execution's folder of a POSIX root."""
    if not isinstance(store, PosixStore):
        return None
    root = store.root.resolve()
    folder = folder.resolve()
    if root not in folder.parents:
        return None
    own = (root / layout.execution_prefix(identity)).resolve()
    if own not in folder.parents:
        msg = (
            f"save {folder} is inside the checkpoint root but not in this execution's folder "
            f"{own}: an execution publishes only what it wrote"
        )
        raise Invalid(msg)
    return folder.relative_to(root).as_posix() + "/"


def publish(
    store: Store,
    identity: Identity,
    folder: Path,
    step: int,
    *,
    progress: Progress | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> Published:
    """Publish the save in ``folder`` as ``step`` of ``identity.job``.

    Publishing a step this execution published already is a no-op (``written`` is false), so a
    restarted watcher does no harm. A step published by another execution raises
    :class:`AlreadyPublished`, before any data moves when it can be seen in advance. A
    publication also leaves its step and time among the root's progress keys
    (:func:`~jobdispatch_publish.marks.record_publication`).
    """
    layout.check_step(step)
    store.check_root()
    key = layout.entry_key(identity.job, step)
    existing = _existing(store, key, identity, step)
    if existing is not None:
        return Published(existing, written=False)

    files = scan_save(folder)
    before = _fingerprint(files)
    in_place = _in_place_prefix(store, identity, folder)
    if in_place is not None:
        data = in_place
        records = store.seal(data, files) if isinstance(store, PosixStore) else []
    else:
        data = layout.data_prefix(identity, step)
        log.info("uploading %d files to %s", len(files), store.describe(data))
        records = store.put_files(files, data, progress)
    if _fingerprint(files) != before:
        _discard(store, data, in_place)
        msg = f"save {folder} changed while it was being published; it was not published"
        raise SaveChanged(msg)

    now = clock()
    entry = Entry(
        job=identity.job,
        submission=identity.submission,
        execution=identity.execution,
        step=step,
        data=data,
        files=tuple(records),
        published_at=now.isoformat(timespec="milliseconds"),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    try:
        store.create(key, entry.to_json())
    except Exists:
        _discard(store, data, in_place)
        winner = _existing(store, key, identity, step)
        if winner is not None:  # ourselves, through another process of this execution
            return Published(winner, written=False)
        raise AssertionError(key) from None  # _existing raised for anyone else
    log.info("published %s at %s", entry.describe(), store.describe(key))
    # Every publication is progress: leave it where the supervisor's one listing finds it.
    record_publication(store, identity, step, now)
    return Published(entry, written=True)


def _existing(store: Store, key: str, identity: Identity, step: int) -> Entry | None:
    """This execution's entry for the step; :class:`AlreadyPublished` if another's; else None."""
    raw = store.read(key)
    if raw is None:
        return None
    entry = Entry.from_json(raw, key=store.describe(key))
    if entry.identity == identity:
        return entry
    by = f"submission {entry.submission} execution {entry.execution}"
    msg = f"step {step} of job {identity.job} was already published by {by} at {entry.published_at}"
    raise AlreadyPublished(msg, step=step, by=by)


def _discard(store: Store, data: str, in_place: str | None) -> None:
    """Best effort: remove the data of a publish that lost (never a save written in place)."""
    if in_place is not None:
        return
    try:
        store.delete(list(store.keys(data)))
    except Exception as exc:
        log.warning("could not remove %s (prune will): %s", store.describe(data), exc)
