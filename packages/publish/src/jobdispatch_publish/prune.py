"""Pruning: withdraw old checkpoints and delete their data, keeping what resume may need.

The rule (:func:`select`) is pure, so its properties are tested on their own: the newest
checkpoint is never pruned, nor the last ``keep_last``, nor any step that is a multiple of
``keep_every`` (steps, not positions: a multiple of K stays one however many saves come later,
so a checkpoint kept once is kept for good), nor one pinned by a resolve in progress.

Withdrawal is a create-only marker (``pruned/<step>``), written before the data is touched; the
log itself is never rewritten. Data is deleted only when no fresh pin holds the step, and a
``swept/<step>`` marker records that it was. Prune also removes what publishes left behind:
data folders no entry points to (a lost race, a killed upload) and unfinished multipart uploads,
once they are older than ``grace``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterable

import attrs
from jobdispatch.errors import Invalid

from jobdispatch_publish import layout
from jobdispatch_publish.entry import Entry
from jobdispatch_publish.store import Exists, Store

__all__ = ["PruneReport", "prune", "select"]

log = logging.getLogger(__name__)


def select(
    steps: Iterable[int],
    *,
    keep_last: int,
    keep_every: int | None = None,
    pinned: Iterable[int] = (),
) -> set[int]:
    """The steps to prune out of ``steps``."""
    if keep_last < 1:
        msg = f"keep_last must be at least 1 (the newest is always kept), got {keep_last}"
        raise Invalid(msg)
    if keep_every is not None and keep_every < 1:
        msg = f"keep_every must be at least 1, got {keep_every}"
        raise Invalid(msg)
    ordered = sorted(set(steps), reverse=True)
    keep = set(ordered[:keep_last]) | set(pinned)
    if keep_every:
        keep |= {s for s in ordered if s % keep_every == 0}
    return set(ordered) - keep


@attrs.define
class PruneReport:
    withdrawn: list[int] = attrs.field(factory=list)  # newly marked pruned
    deleted: list[int] = attrs.field(factory=list)  # data deleted this run
    held: list[int] = attrs.field(factory=list)  # withdrawn but pinned: data left for now
    kept: list[int] = attrs.field(factory=list)
    orphans: int = 0  # data folders no entry points to
    unfinished: int = 0  # partial writes and multipart uploads


def _steps(store: Store, prefix: str, parse: object) -> set[int]:
    found = set()
    for key in store.keys(prefix):
        step = parse(key)  # type: ignore[operator]
        if step is not None:
            found.add(step)
    return found


def _pinned(store: Store, job: str, now: float, ttl: float) -> set[int]:
    """Steps with a pin younger than ``ttl`` (an older pin is a resolve that died)."""
    held = set()
    for key in store.keys(layout.pins_prefix(job)):
        parts = key.split("/")
        if len(parts) < 4 or not parts[2].isdigit():
            continue
        info = store.stat(key)
        if info is not None and info.modified > now - ttl:
            held.add(int(parts[2]))
    return held


def prune(
    store: Store,
    job: str,
    *,
    keep_last: int,
    keep_every: int | None = None,
    pin_ttl: float = 6 * 3600,
    grace: float = 24 * 3600,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    now = time.time() if now is None else now
    report = PruneReport()
    steps = _steps(store, layout.log_prefix(job), layout.parse_entry_key)
    withdrawn = _steps(store, layout.pruned_prefix(job), layout.step_of_marker)
    pinned = _pinned(store, job, now, pin_ttl)
    chosen = select(steps, keep_last=keep_last, keep_every=keep_every, pinned=pinned)
    report.kept = sorted(steps - chosen - withdrawn)
    for step in sorted(chosen - withdrawn):
        report.withdrawn.append(step)
        if dry_run:
            continue
        marker = json.dumps({"pruned_at": now, "keep_last": keep_last, "keep_every": keep_every})
        with contextlib.suppress(Exists):  # another prune withdrew it first
            store.create(layout.pruned_key(job, step), marker.encode())
    if dry_run:
        return report

    # Pins are read again *after* the markers are written: see resolve.py for why.
    pinned = _pinned(store, job, now, pin_ttl)
    swept = _steps(store, layout.swept_prefix(job), layout.step_of_marker)
    for step in sorted((withdrawn | set(report.withdrawn)) - swept):
        if step in pinned:
            report.held.append(step)
            continue
        raw = store.read(layout.entry_key(job, step))
        if raw is not None:
            entry = Entry.from_json(raw, key=store.describe(layout.entry_key(job, step)))
            store.delete(list(store.keys(entry.data)))
        with contextlib.suppress(Exists):
            store.create(layout.swept_key(job, step), json.dumps({"swept_at": now}).encode())
        report.deleted.append(step)

    report.orphans = _sweep_orphans(store, job, now - grace)
    report.unfinished = store.sweep_incomplete(layout.job_prefix(job), now - grace)
    return report


def _sweep_orphans(store: Store, job: str, cutoff: float) -> int:
    """Delete data folders older than ``cutoff`` that no entry points to."""
    removed = 0
    entries: dict[int, str | None] = {}
    for submission in store.children(layout.executions_prefix(job)):
        for execution in store.children(submission):
            for folder in store.children(execution):
                parsed = layout.parse_data_folder(folder)
                if parsed is None or parsed[1] >= cutoff:
                    continue  # not a folder publish made, or one that may still be uploading
                step = parsed[0]
                if step not in entries:
                    raw = store.read(layout.entry_key(job, step))
                    entries[step] = (
                        None if raw is None else Entry.from_json(raw, key=f"step {step}").data
                    )
                if entries[step] != folder:
                    log.info("removing %s: no entry points to it", store.describe(folder))
                    store.delete(list(store.keys(folder)))
                    removed += 1
    return removed
