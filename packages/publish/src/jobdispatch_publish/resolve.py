"""Finding the checkpoint to resume from, and bringing it to where training reads it.

The newest checkpoint is the published entry with the highest step that prune has not withdrawn,
whichever execution wrote it. Only entries count, and an entry exists only once its data was
complete, so a half-uploaded save is never resolved.

Fetching takes a *pin* first (``pins/<step>/<holder>``), then checks the step was not withdrawn
meanwhile; prune writes its withdrawal marker first, then looks for pins. Each writes before it
reads the other's mark, so at least one of them sees the other: either resolve skips the step, or
prune leaves its data in place until the pin is gone.

Nothing is handed over unchecked: the files resolve answers with (the published folder itself,
a fresh copy, or a copy fetched earlier into the same ``--into`` folder) are checked against the
sizes and SHA-256 digests their entry recorded, and any difference is :class:`Corrupt`. Entries
of older helpers carry no digests; for them sizes are checked, and a warning says so.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
from jobdispatch.errors import Invalid

from jobdispatch_publish import layout
from jobdispatch_publish.entry import Entry
from jobdispatch_publish.errors import Corrupt
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.marks import record_resumed
from jobdispatch_publish.store import Progress, Store
from jobdispatch_publish.verify import check_folder

__all__ = ["MARKER", "Damaged", "Resolved", "entries", "newest", "resolve"]

log = logging.getLogger(__name__)

#: Written into a fetched checkpoint's folder: which entry it holds.
MARKER = ".jobdispatch-checkpoint.json"


@attrs.frozen
class Resolved:
    entry: Entry
    path: Path  # where training reads it: the fetched copy, or the published folder itself
    #: What was checked before it was handed over: "sha256" (size and digest of every file), or
    #: "size" for an entry written before digests were recorded.
    checked: str = "sha256"


def _checked(entry: Entry) -> str:
    if all(f.sha256 is not None for f in entry.files):
        return "sha256"
    log.warning(
        "%s was published without file digests (by an older jobdispatch-publish): "
        "only its files' sizes were checked",
        entry.describe(),
    )
    return "size"


def _entry_keys(store: Store, job: str, first: int = 16) -> Iterator[tuple[int, str]]:
    """Log keys, newest first: a short first page (the usual answer), then the rest."""
    seen = 0
    for key in store.keys(layout.log_prefix(job), limit=first):
        seen += 1
        step = layout.parse_entry_key(key)
        if step is not None:
            yield step, key
    if seen < first:
        return
    for i, key in enumerate(store.keys(layout.log_prefix(job))):
        if i < seen:
            continue
        step = layout.parse_entry_key(key)
        if step is not None:
            yield step, key


def _read_entry(store: Store, job: str, step: int, key: str) -> Entry:
    raw = store.read(key)
    if raw is None:
        msg = f"publication entry {store.describe(key)} was listed but cannot be read"
        raise Corrupt(msg)
    entry = Entry.from_json(raw, key=store.describe(key))
    if entry.job != job or entry.step != step:
        msg = f"publication entry {store.describe(key)} is for job {entry.job} step {entry.step}"
        raise Corrupt(msg)
    return entry


@attrs.frozen
class Damaged:
    """A listed entry that cannot be used: its step (from its name) and why."""

    step: int
    error: Corrupt


def entries(store: Store, job: str) -> Iterator[Entry | Damaged]:
    """Every published entry of the job, newest first (withdrawn ones included). An entry that
    is damaged is told as :class:`Damaged` in its place, so one bad entry hides no other."""
    for step, key in _entry_keys(store, job, first=1000):
        try:
            yield _read_entry(store, job, step, key)
        except Corrupt as exc:
            yield Damaged(step, exc)


def newest(store: Store, job: str, *, skip: frozenset[int] = frozenset()) -> Entry | None:
    """The newest entry that is not withdrawn (and not in ``skip``); ``None`` if there is none."""
    for step, key in _entry_keys(store, job):
        if step in skip or store.stat(layout.pruned_key(job, step)) is not None:
            continue
        return _read_entry(store, job, step, key)
    return None


def _holder() -> str:
    host = "".join(c if c.isalnum() or c in "-_." else "-" for c in socket.gethostname())[:64]
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


def _reuse(dest: Path, entry: Entry) -> bool:
    """``dest`` holds this very checkpoint already (a restarted resolve); else refuse a non-empty
    folder rather than mix two checkpoints."""
    if not dest.exists():
        return False
    if not dest.is_dir():
        msg = f"--into {dest} exists and is not a folder"
        raise Invalid(msg)
    marker = dest / MARKER
    if marker.is_file():
        try:
            held = json.loads(marker.read_bytes())
        except ValueError:
            held = {}  # not a marker this helper wrote: the folder is refused below
        if (
            isinstance(held, dict)
            and held.get("data") == entry.data
            and held.get("step") == entry.step
        ):
            try:
                check_folder(entry.files, dest)
            except Corrupt as exc:
                msg = (
                    f"--into {dest} holds step {entry.step} but was changed after it was fetched "
                    f"({exc.message}); remove it, or give an empty folder"
                )
                raise Corrupt(msg) from None
            return True
    if any(dest.iterdir()):
        msg = (
            f"--into {dest} is not empty and does not hold step {entry.step}; give an empty folder"
        )
        raise Invalid(msg)
    dest.rmdir()
    return False


class _Withdrawn(Exception):
    pass


def _fetch(store: Store, entry: Entry, dest: Path, progress: Progress | None) -> None:
    job, step = entry.job, entry.step
    pin = layout.pin_key(job, step, _holder())
    store.write(pin, json.dumps({"pinned_at": time.time()}).encode())
    try:
        if store.stat(layout.pruned_key(job, step)) is not None:
            raise _Withdrawn
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.parent / f".{dest.name}.partial-{secrets.token_hex(4)}"
        partial.mkdir()
        try:
            store.get_files(entry.files, entry.data, partial, progress)
            (partial / MARKER).write_bytes(entry.to_json())
            os.rename(partial, dest)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    finally:
        store.delete([pin])


def resolve(
    store: Store,
    job: str,
    *,
    into: Path | None = None,
    progress: Progress | None = None,
    identity: Identity | None = None,
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> Resolved | None:
    """The newest checkpoint, fetched (or linked) ``into`` a folder when one is given.

    Without ``into`` the published folder itself is answered, which only a POSIX root has; an S3
    root needs ``into``. Either way every file is checked against its entry first. ``None`` when
    the job has no published checkpoint; a root that does not exist or cannot be read raises
    :class:`~jobdispatch_publish.errors.RootUnavailable` instead, since "nothing published" would
    restart training from step 0.

    Given the ``identity`` of the execution that resumes, a create-only ``resumed`` entry names
    it and the step it resumes from (none when nothing is published), among the root's progress
    keys, once the checkpoint is handed over (:func:`~jobdispatch_publish.marks.record_resumed`).
    """
    if identity is not None and identity.job != job:
        msg = f"resolve of job {job} for an execution of job {identity.job}"
        raise Invalid(msg)
    found = _resolve(store, job, into, progress)
    if identity is not None:
        record_resumed(store, identity, None if found is None else found.entry.step, clock())
    return found


def _resolve(
    store: Store, job: str, into: Path | None, progress: Progress | None
) -> Resolved | None:
    store.check_root()
    skip: set[int] = set()
    while True:
        entry = newest(store, job, skip=frozenset(skip))
        if entry is None:
            return None
        if into is None:
            local = store.local_path(entry.data)
            if local is None:
                msg = (
                    f"the root {store.describe()} is remote: "
                    f"pass --into DIR to fetch step {entry.step}"
                )
                raise Invalid(msg)
            check_folder(entry.files, local)
            return Resolved(entry, local, _checked(entry))
        if _reuse(into, entry):
            return Resolved(entry, into, _checked(entry))
        try:
            _fetch(store, entry, into, progress)
        except _Withdrawn:
            log.info("step %d was withdrawn by prune while resolving; trying the next", entry.step)
            skip.add(entry.step)
            continue
        return Resolved(entry, into, _checked(entry))
