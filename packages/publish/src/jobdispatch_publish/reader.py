"""Every job's progress under one checkpoint root, from one listing: what a supervisor polls.

The helper leaves its progress in key names (:mod:`jobdispatch_publish.layout`), so one listing
of the root's ``_progress/`` folder (one ``ListObjectsV2`` pagination on S3, one ``scandir`` on
POSIX) tells, for every job at once, its newest progress, its newest published checkpoint and
which checkpoint each execution resumed from, without reading any object. The work is split in
two: :func:`read_keys` lists (I/O, every failure turned into :class:`ProgressUnreadable`), and
:func:`summarize` makes sense of the names (pure, tested as properties).

A root that cannot be read is never an empty answer: a supervisor that took it for "no progress"
would declare every job stalled, and one that took it for progress would miss every stall.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

import attrs
from jobdispatch.exitcodes import ExitCode

from jobdispatch_publish import layout
from jobdispatch_publish.errors import ProgressUnreadable, RootUnavailable, exit_code_for
from jobdispatch_publish.store import Store

__all__ = [
    "JobProgress",
    "ProgressReader",
    "ProgressSnapshot",
    "Resumed",
    "Seen",
    "read_keys",
    "read_progress",
    "summarize",
]

Source = Literal["mark", "published"]


class Seen(NamedTuple):
    """One execution of the job was at ``step`` at ``at`` (the writer's clock, UTC), as told by
    a progress ``mark`` or a publication (``published``).

    Named tuples rather than attrs classes, here and below: a poll builds one per job, tens of
    thousands, and a tuple is built several times faster."""

    step: int
    at: dt.datetime
    submission: int
    execution: str
    source: Source


class Resumed(NamedTuple):
    """Execution ``submission``/``execution`` resumed from the checkpoint of ``step`` (``None``:
    nothing was published, it started fresh), as its ``resolve`` wrote at ``at``."""

    submission: int
    execution: str
    step: int | None
    at: dt.datetime


class JobProgress(NamedTuple):
    """What the listing tells of one job.

    ``newest``: the latest progress by time (a mark or a publication; of two at the same
    millisecond, the higher step). ``checkpoint``: the publication with the highest step, the
    newest checkpoint. ``resumed``: every resumed entry, oldest first.
    """

    job: str
    newest: Seen | None
    checkpoint: Seen | None
    resumed: tuple[Resumed, ...]


@attrs.frozen
class ProgressSnapshot:
    """Every job's progress under one root, from one listing. ``listed`` counts the keys the
    listing returned, ``strays`` those that are not progress keys (ignored)."""

    root: str
    jobs: Mapping[str, JobProgress]
    listed: int
    strays: int


def _resumed_order(r: Resumed) -> tuple[dt.datetime, int, str, int]:
    return (r.at, r.submission, r.execution, -1 if r.step is None else r.step)


def summarize(keys: Iterable[str], *, root: str = "") -> ProgressSnapshot:
    """Make sense of a listing of the progress folder: pure, in any order of ``keys``.

    Tens of thousands of keys per poll: each is matched once and compared as a tuple, and
    objects are built only for what is answered.
    """
    # job -> (millis, step, submission, execution, kind) of the newest progress, and of the
    # highest published step as (step, millis, submission, execution)
    newest: dict[str, tuple[int, int, int, str, Source]] = {}
    checkpoint: dict[str, tuple[int, int, int, str]] = {}
    resumed: dict[str, list[tuple[int, int, str, int | None]]] = {}
    jobs: set[str] = set()
    listed = strays = 0
    for key in keys:
        listed += 1
        fields = layout.progress_fields(key)
        if fields is None:
            strays += 1
            continue
        job, millis, kind, submission, step, execution = fields
        jobs.add(job)
        if kind == "resumed":
            resumed.setdefault(job, []).append((millis, submission, execution, step))
            continue
        assert step is not None  # only a resumed key may lack one
        seen = (millis, step, submission, execution, kind)
        best = newest.get(job)
        # The whole tuple decides, so keys alike in time and step (two executions marking the
        # same step in the same millisecond) give one answer whatever the listing's order.
        if best is None or seen > best:
            newest[job] = seen
        if kind == "published":
            top = checkpoint.get(job)
            candidate = (step, millis, submission, execution)
            if top is None or candidate > top:
                checkpoint[job] = candidate
    out: dict[str, JobProgress] = {}
    for job in sorted(jobs):
        n = newest.get(job)
        c = checkpoint.get(job)
        out[job] = JobProgress(
            job,
            None if n is None else Seen(n[1], layout.time_of(n[0]), n[2], n[3], n[4]),
            None if c is None else Seen(c[0], layout.time_of(c[1]), c[2], c[3], "published"),
            tuple(
                sorted(
                    (
                        Resumed(sub, ex, step, layout.time_of(ms))
                        for ms, sub, ex, step in resumed.get(job, ())
                    ),
                    key=_resumed_order,
                )
            ),
        )
    return ProgressSnapshot(root, out, listed, strays)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RootUnavailable):
        return "root"
    return _REASONS.get(exit_code_for(exc), "failed")


#: Why a root could not be read, by the exit code the helper gives the failure.
_REASONS = {
    ExitCode.USAGE: "invalid",
    ExitCode.UNAUTHORIZED: "credentials",
    ExitCode.UNREACHABLE: "unreachable",
    ExitCode.ROOT_UNAVAILABLE: "root",
}


def read_keys(store: Store) -> list[str]:
    """Every key of the root's progress folder: one listing. :class:`ProgressUnreadable` when
    the root is missing or cannot be listed, whatever the reason."""
    try:
        local = store.local_path(layout.PROGRESS_PREFIX)
        if local is None:
            # On S3 the listing itself fails for a missing bucket, and an empty prefix is an
            # empty root: one pagination and no other request.
            return list(store.keys(layout.PROGRESS_PREFIX))
        # A folder that is not there lists as empty: ask first (a stat, not a listing). Then one
        # scandir, unsorted (summarize takes any order), hidden names (writes in progress) left
        # out as the store does.
        store.check_root()
        try:
            with os.scandir(local) as found:
                return [
                    layout.PROGRESS_PREFIX + e.name for e in found if not e.name.startswith(".")
                ]
        except FileNotFoundError:
            return []  # the root is there, and nobody has marked progress under it yet
    except Exception as exc:
        raise ProgressUnreadable(store.describe(), _reason(exc), exc) from exc


def read_progress(store: Store) -> ProgressSnapshot:
    """Every job's progress under the store's root, from one listing."""
    return summarize(read_keys(store), root=store.describe())


class ProgressReader:
    """Reads one checkpoint root's progress for a supervisor, poll after poll.

    ``root`` is spelt as in a job's ``JOBDISPATCH_CHECKPOINT_ROOT`` (a path, ``file://`` or
    ``s3://bucket/prefix``); ``env`` (default: none, so nothing leaks from the supervisor's own
    environment unless passed) gives what the helper reads from a job's environment, the
    ``AWS_*`` variables and ``JOBDISPATCH_PUBLISH_CONFIG``; ``config`` names a configuration file
    (S3 endpoint, credential sources, proxy) as ``--config`` does. A root that is spelt wrong is
    :class:`~jobdispatch.errors.Invalid` here, at once; everything that can come and go
    (credentials, the store, the root itself) is :class:`ProgressUnreadable` from :meth:`read`,
    whatever went wrong underneath: a reader that cannot see says so, it never guesses.
    The store (and its S3 client) is built at the first read that can build it and kept.
    """

    def __init__(
        self, root: str, *, env: Mapping[str, str] | None = None, config: str | None = None
    ) -> None:
        from jobdispatch_publish.root import parse_root

        self.root = parse_root(root, where="checkpoint root")
        self.env: Mapping[str, str] = dict(env or {})
        self.config = config
        self._store: Store | None = None

    def _open(self) -> Store:
        from jobdispatch_publish.config import load_settings
        from jobdispatch_publish.stores import open_store

        settings = load_settings(self.config, self.env)
        return open_store(self.root, settings, self.env)

    def store(self) -> Store:
        """The store, built now if it is not yet; :class:`ProgressUnreadable` if it cannot be
        (credentials missing or refused, a configuration file that does not parse)."""
        if self._store is None:
            try:
                self._store = self._open()
            except Exception as exc:  # whatever it is, the root is not read: blind
                raise ProgressUnreadable(str(self.root), _reason(exc), exc) from exc
        return self._store

    def read(self) -> ProgressSnapshot:
        """Every job's progress under the root: one listing, or :class:`ProgressUnreadable`."""
        return summarize(read_keys(self.store()), root=str(self.root))
