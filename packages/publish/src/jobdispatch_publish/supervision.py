"""The helper's reader as the supervisor's progress source: :class:`RootsReader`.

The supervisor reads progress through :class:`jobdispatch.progress.ProgressReader` (spec 0004
D10): ``read(root, jobs)``, one listing of a checkpoint root per call, answering the core's
value types. This module answers it with :class:`~jobdispatch_publish.reader.ProgressReader`,
one per root (each keeps its store and S3 client from poll to poll), and translates what a
listing shows into those types; it adds no I/O of its own. A root that cannot be listed raises
the reader's ``ProgressUnreadable``, and the supervisor is blind for it (never a stall).

    supervisor = Supervisor(backend, store, progress=RootsReader(env=os.environ))
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from jobdispatch import progress as core

from jobdispatch_publish import reader

__all__ = ["RootsReader", "to_core"]

_ORIGIN = {"mark": core.Origin.MARK, "published": core.Origin.PUBLICATION}


def _aware(at: dt.datetime) -> dt.datetime:
    """The time as the record needs it: with its offset (the helper writes UTC)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def _mark(seen: reader.Seen | None) -> core.Mark | None:
    if seen is None:
        return None
    return core.Mark(
        step=seen.step,
        at=_aware(seen.at),
        submission=seen.submission,
        execution=seen.execution,
        origin=_ORIGIN[seen.source],
    )


def to_core(found: reader.JobProgress) -> core.JobProgress:
    """One job of a listing in the core's terms. A resumed entry without a step (the execution
    started fresh: nothing was published yet) names no checkpoint, so it is left out."""
    return core.JobProgress(
        latest=_mark(found.newest),
        checkpoint=_mark(found.checkpoint),
        resumed=tuple(
            core.Resumed(
                submission=r.submission, execution=r.execution, step=r.step, at=_aware(r.at)
            )
            for r in found.resumed
            if r.step is not None
        ),
    )


class RootsReader:
    """Every checkpoint root the supervisor's jobs name, each read by the helper's own reader.

    ``env`` and ``config`` are what each root's reader is built with (the ``AWS_*`` variables,
    ``JOBDISPATCH_PUBLISH_CONFIG``, a configuration file): see
    :class:`~jobdispatch_publish.reader.ProgressReader`. A root spelt wrong raises ``Invalid``
    at its first read, which the supervisor takes as blindness for that root's jobs."""

    def __init__(self, *, env: Mapping[str, str] | None = None, config: str | None = None) -> None:
        self.env: Mapping[str, str] = dict(env or {})
        self.config = config
        self._readers: dict[str, reader.ProgressReader] = {}

    def read(self, root: str, jobs: Collection[str]) -> Mapping[str, core.JobProgress]:
        """One listing of ``root``: each job of ``jobs`` it holds anything of."""
        found = self._readers.get(root)
        if found is None:
            found = reader.ProgressReader(root, env=self.env, config=self.config)
            self._readers[root] = found
        snapshot = found.read()
        wanted = jobs if isinstance(jobs, set | frozenset) else set(jobs)
        return {job: to_core(p) for job, p in snapshot.jobs.items() if job in wanted}
