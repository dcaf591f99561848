"""The cache of settled jobs' goodput figures that ``jobdispatch goodput`` keeps.

Decoding a record's events is what a report over many jobs costs (issue 27); a settled job's
figures (:class:`~jobdispatch.goodput.JobSummary`) end at its settlement, whatever ``now``, so
they need computing once per revision of its record. A settled record may still take events
(an observation, a clean-up), so a summary is kept with the revision it was computed from and
used only while the store (:class:`~jobdispatch.records.store.Revisions`) answers that same
revision; any other revision is a miss, computed again and kept in its place.

The cache is derived data on the command's side, never authoritative: one SQLite file per
store under ``$XDG_CACHE_HOME/jobdispatch/goodput/`` (``~/.cache`` without it), named by a hash
of the store's identity (the LMDB directory's resolved path, or the PostgreSQL server,
database and schema: never a password) so the name says nothing of where the records are.
Figures name jobs and people, so the folders are 0700 and the file 0600. A file this version
cannot use (unreadable, damaged, written by another version of the figures or of this format)
is set aside and started afresh: it costs a cold report, never an error, never a wrong figure.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from jobdispatch.__about__ import __version__ as core_version
from jobdispatch.errors import NotFound, Unreadable
from jobdispatch.goodput import (
    FIGURES_VERSION,
    Blame,
    JobGoodput,
    JobSummary,
    Part,
    QueueReason,
    RunFigures,
    Span,
    Unit,
    summarize,
)
from jobdispatch.records import events as ev
from jobdispatch.records.store import READ_BATCH, Records, Revisions, read_in_batches
from jobdispatch.types import CauseKind, Enforcer, JobID, State

from jobdispatch_cli.private import private_dir

__all__ = [
    "FORMAT",
    "FiguresCache",
    "cache_home",
    "cache_path",
    "decode",
    "encode",
    "read_through",
]

#: How a summary is laid out in the file (:func:`encode`). Raise it with any change to the
#: layout; the file is keyed by it, by the figures' own version and by the core's release, so
#: an upgrade computes every figure afresh even where a change forgot to raise a version.
FORMAT = 1
_VERSION = f"figures {FIGURES_VERSION}, format {FORMAT}, jobdispatch {core_version}"
_FILE_MODE = 0o600
_DIR_MODE = 0o700
#: How long a writer waits for another process's write to the same file before leaving its
#: own figures out (the cache is only an optimisation).
_BUSY_SECONDS = 2.0


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache`` (the XDG base directory spec's default)."""
    env = os.environ if env is None else env
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_path(identity: str, env: Mapping[str, str] | None = None) -> Path:
    """The cache file of the store named ``identity``: a hash of it, so neither the store's
    place nor anything else about it shows in the name."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return cache_home(env) / "jobdispatch" / "goodput" / f"{digest}.sqlite"


def _own_folders(path: Path) -> tuple[Path, ...]:
    """The folders of ``path`` that are the cache's own, to be closed (0700) even when an
    earlier tool left them open: ``.../jobdispatch/goodput`` and ``.../jobdispatch`` of
    :func:`cache_path`'s layout, and nothing else. A file put anywhere else (a test's, a
    benchmark's) has its missing folders made private and no existing folder changed: closing
    the parent of ``/tmp/x/c.sqlite`` would close ``/tmp`` to every other user."""
    goodput = path.parent
    if goodput.name != "goodput" or goodput.parent.name != "jobdispatch":
        return ()
    return (goodput, goodput.parent)


# ------------------------------------------------------------------------------ the layout

_PARTS = {p.value: p for p in Part}
_REASONS = {r.value: r for r in QueueReason}
_CAUSES = {c.value: c for c in CauseKind}
_ENFORCERS = {e.value: e for e in Enforcer}
_STATES = {s.value: s for s in State}
_UNITS = {u.value: u for u in Unit}


def _blame(b: Blame) -> list[Any]:
    return [b.cause.value, b.rule, None if b.enforcer is None else b.enforcer.value]


def _at(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


#: A timedelta divided by it is its whole number of microseconds, exactly.
_MICROSECOND = timedelta(microseconds=1)


def encode(summary: JobSummary) -> bytes:
    """``summary`` as compact JSON: lists in a fixed order rather than named fields, since the
    file is read back whole at every report and only by :func:`decode`."""
    f = summary.figures
    return orjson.dumps(
        [
            f.job,
            f.name,
            f.submitter,
            summary.submitter_id,
            None if f.state is None else f.state.value,
            f.settled,
            f.created_at.isoformat(),
            f.until.isoformat(),
            f.unit.value,
            f.width,
            f.queue,
            [
                [
                    s.start,
                    s.end,
                    s.part.value,
                    None if s.reason is None else s.reason.value,
                    *_blame(s.blame),
                    s.holding,
                ]
                for s in f.spans
            ],
            [
                [
                    r.submission,
                    r.ref,
                    r.index,
                    _at(r.started_at),
                    _at(r.ended_at),
                    *_blame(r.blame),
                    r.running_micros,
                ]
                for r in f.runs
            ],
            [c // _MICROSECOND for c in f.checkpoint_costs],
            [[rule, label] for rule, label in summary.rule_labels.items()],
        ]
    )


def decode(data: bytes) -> JobSummary:
    """The summary :func:`encode` wrote; ValueError (or another error of a malformed value:
    KeyError, TypeError, IndexError) for anything else, which the cache takes as a miss."""
    (
        job,
        name,
        submitter,
        submitter_id,
        state,
        settled,
        created_at,
        until,
        unit,
        width,
        queue,
        spans,
        runs,
        costs,
        labels,
    ) = orjson.loads(data)
    blames: dict[tuple[str, int | None, str | None], Blame] = {}

    def blame(cause: str, rule: int | None, enforcer: str | None) -> Blame:
        key = (cause, rule, enforcer)
        got = blames.get(key)
        if got is None:
            got = blames[key] = Blame(
                _CAUSES[cause], rule, None if enforcer is None else _ENFORCERS[enforcer]
            )
        return got

    fromiso = datetime.fromisoformat
    figures = JobGoodput(
        job=job,
        name=name,
        submitter=submitter,
        state=None if state is None else _STATES[state],
        settled=settled,
        created_at=fromiso(created_at),
        until=fromiso(until),
        unit=_UNITS[unit],
        width=width,
        queue=queue,
        spans=tuple(
            Span(a, b, _PARTS[p], None if r is None else _REASONS[r], blame(c, n, e), h)
            for a, b, p, r, c, n, e, h in spans
        ),
        runs=tuple(
            RunFigures(
                submission=sub,
                ref=ref,
                index=index,
                started_at=None if started is None else fromiso(started),
                ended_at=None if ended is None else fromiso(ended),
                blame=blame(c, n, e),
                running_micros=held,
            )
            for sub, ref, index, started, ended, c, n, e, held in runs
        ),
        checkpoint_costs=tuple(timedelta(microseconds=c) for c in costs),
    )
    return JobSummary(
        figures=figures,
        submitter_id=submitter_id,
        rule_labels={int(rule): str(label) for rule, label in labels},
    )


# ------------------------------------------------------------------------------- the file

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS figures ("
    "job TEXT PRIMARY KEY, revision INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID",
)


class FiguresCache:
    """One store's cache file, open. Every failure of the file (it cannot be made, read or
    written; another process holds it too long) turns the cache off for the rest of the run
    and is never raised: a report then reads what it would have taken from here."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        try:
            self._db = self._open()
        except (OSError, sqlite3.OperationalError):
            # Cannot be made or written, or another process holds it: go without, and leave
            # it as it is.
            return
        except sqlite3.DatabaseError:
            # Damaged, or not a database at all: start afresh, once.
            self._forget()
            with contextlib.suppress(OSError, sqlite3.Error):
                self._db = self._open()

    @property
    def usable(self) -> bool:
        """Whether the file is open (False: every ``get`` misses, every ``put`` is dropped)."""
        return self._db is not None

    def _open(self) -> sqlite3.Connection:
        folder = self.path.parent
        private_dir(folder)
        for own in _own_folders(self.path):
            if stat.S_IMODE(own.stat().st_mode) != _DIR_MODE:
                os.chmod(own, _DIR_MODE)
        # Made 0600 before SQLite sees it (SQLite would use the umask); its journal files
        # take the database file's mode.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, _FILE_MODE)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != _FILE_MODE:
                os.fchmod(fd, _FILE_MODE)
        finally:
            os.close(fd)
        db = sqlite3.connect(self.path, timeout=_BUSY_SECONDS, isolation_level=None)
        try:
            for statement in _SCHEMA:
                db.execute(statement)
            row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
            if row is None or row[0] != _VERSION:
                # Another version's figures (or none yet): none of them can be used.
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM figures")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (_VERSION,))
                db.execute("COMMIT")
        except BaseException:
            db.close()
            raise
        return db

    def _forget(self) -> None:
        """Close the file and set it aside (removed, with any journal beside it), so the next
        open starts it afresh."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def get(self, revisions: Mapping[JobID, int]) -> dict[JobID, JobSummary]:
        """The summaries kept for these jobs at exactly these revisions, in one statement
        (so a batch at a time: :data:`READ_BATCH` jobs, well under SQLite's limit of bound
        values). A kept summary of another revision, or one that does not decode,
        is left out: the caller computes it again."""
        db = self._db
        if db is None or not revisions:
            return {}
        jobs = list(revisions)
        marks = ",".join("?" * len(jobs))
        try:
            rows = db.execute(
                f"SELECT job, revision, data FROM figures WHERE job IN ({marks})",  # noqa: S608
                jobs,
            ).fetchall()
        except sqlite3.OperationalError:
            self._off()
            return {}
        except sqlite3.Error:
            self._forget()  # damaged: the next report starts the file afresh
            return {}
        found: dict[JobID, JobSummary] = {}
        for job, revision, data in rows:
            if revisions.get(job) != revision:
                continue
            try:
                summary = decode(data)
            except (ValueError, KeyError, TypeError, IndexError):
                continue
            if summary.figures.job == job and summary.figures.settled:
                found[job] = summary
        return found

    def put(self, entries: Iterable[tuple[int, JobSummary]]) -> None:
        """Keep each settled job's summary with the revision of the record it was computed
        from (replacing what was kept for the job); summaries of jobs not settled are not
        kept, since their figures move with ``now``. One transaction."""
        db = self._db
        rows: Sequence[tuple[str, int, bytes]] = [
            (s.figures.job, revision, encode(s)) for revision, s in entries if s.figures.settled
        ]
        if db is None or not rows:
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT OR REPLACE INTO figures VALUES (?, ?, ?)", rows)
            db.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            self._off()

    def _off(self) -> None:
        """Stop using the file for this run, leaving it as it is (another process may be
        using it)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def close(self) -> None:
        self._off()

    def __enter__(self) -> FiguresCache:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# ------------------------------------------------------------------------- the reading


def read_through(
    store: Records,
    jobs: Sequence[JobID],
    now: datetime,
    cache: FiguresCache | None,
    unreadable: Callable[[Unreadable], None],
) -> Iterator[ev.View | JobSummary]:
    """What :func:`jobdispatch.goodput.report` takes for each of ``jobs``, in order: the
    summary ``cache`` keeps for a job at its record's current revision, else the record.

    Records are read in batches of :data:`READ_BATCH` (one read transaction, or round trip,
    each); each batch's revisions are asked first (:class:`Revisions`, no event decoded) and
    only the records the cache cannot answer for are read. A settled record read is
    summarized here and its summary kept, under the revision of the view read (the record may
    have grown since its revision was asked); one not settled goes to the report as it is.
    Without a cache, or with a store that cannot tell revisions, every record is read. A
    record that cannot be read goes to ``unreadable``; one listed and then gone is left out;
    any other error of a read is raised."""
    if cache is None or not cache.usable or not isinstance(store, Revisions):
        yield from _read(store, jobs, unreadable)
        return
    for start in range(0, len(jobs), READ_BATCH):
        batch = jobs[start : start + READ_BATCH]
        revisions = dict(zip(batch, store.revisions(batch), strict=True))
        hits = cache.get({j: r for j, r in revisions.items() if r is not None})
        misses = [j for j in batch if j not in hits and revisions[j] is not None]
        fresh: dict[JobID, ev.View | JobSummary] = {}
        keep: list[tuple[int, JobSummary]] = []
        for view in _read(store, misses, unreadable):
            if _settled(view):
                summary = summarize(view, now)
                fresh[view.header.job] = summary
                keep.append((len(view.events), summary))
            else:
                fresh[view.header.job] = view  # its figures move with now: not kept
        cache.put(keep)
        for job in batch:
            got = hits.get(job) or fresh.get(job)
            if got is not None:
                yield got


def _read(
    store: Records, jobs: Sequence[JobID], unreadable: Callable[[Unreadable], None]
) -> Iterator[ev.View]:
    for _, answer in read_in_batches(store, jobs):
        if isinstance(answer, ev.View):
            yield answer
        elif isinstance(answer, Unreadable):
            unreadable(answer)
        elif not isinstance(answer, NotFound):  # NotFound: listed, then gone
            raise answer


def _settled(view: ev.View) -> bool:
    # From the end: a settled record's settlement is among its last events.
    return any(type(e) is ev.Settled for e in reversed(view.events))
