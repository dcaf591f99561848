"""One poll's readings of progress: every checkpoint root listed at most once.

The supervisor makes one :class:`ProgressPoll` per poll and hands it to every batch of the
poll's rounds. The first batch holds every owned job: the poll groups the jobs that name a
progress source by their checkpoint root and lists each root once, through the injected
:class:`~jobdispatch.progress.ProgressReader`, whatever the number of jobs under it; later
rounds reuse those listings. A root that cannot be listed (the source raises, or no source is
configured where this supervisor runs) makes every job under it :class:`Blind`, which ``next``
records and never declares a stall on (spec 0004, "Progress").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from jobdispatch.progress import Blind, JobProgress, ProgressReader, Reading
from jobdispatch.records import events as ev
from jobdispatch.types import JobID

__all__ = ["ProgressPoll"]

log = logging.getLogger("jobdispatch.supervise")

_NOTHING_YET = JobProgress()


class ProgressPoll:
    """The progress readings of one poll, made lazily, one listing per root."""

    def __init__(
        self, source: ProgressReader | None, holder: str = "", unreadable: set[str] | None = None
    ) -> None:
        self._source = source
        self._holder = holder
        self._roots: dict[str, Mapping[JobID, JobProgress] | Blind] = {}
        #: The roots found unreadable by earlier polls (the supervisor keeps the set across
        #: polls): an outage is logged once when it begins and once when it ends, not per poll.
        self._unreadable = set() if unreadable is None else unreadable

    @property
    def listings(self) -> int:
        """How many roots this poll has listed (or tried to)."""
        return len(self._roots)

    def readings(self, headers: Mapping[JobID, ev.Header]) -> dict[JobID, Reading]:
        """The reading of every job of ``headers`` that names a progress source; roots not yet
        listed this poll are listed now, once each, for all of their jobs at once."""
        wanted: dict[str, set[JobID]] = {}
        for job, header in headers.items():
            source = header.spec.progress
            if source is not None:
                wanted.setdefault(source.root, set()).add(job)
        for root, jobs in wanted.items():
            if root not in self._roots:
                self._roots[root] = self._list(root, jobs)
        out: dict[JobID, Reading] = {}
        for root, jobs in wanted.items():
            listed = self._roots[root]
            for job in jobs:
                out[job] = listed if isinstance(listed, Blind) else listed.get(job, _NOTHING_YET)
        return out

    def _list(self, root: str, jobs: set[JobID]) -> Mapping[JobID, JobProgress] | Blind:
        if self._source is None:
            who = f" {self._holder}" if self._holder else ""
            return Blind(f"no progress source is configured on supervisor{who}")
        try:
            found = self._source.read(root, jobs)
        except Exception as exc:  # any failure to read is blindness, never a stall
            if root not in self._unreadable:
                self._unreadable.add(root)
                log.warning(
                    "progress under %s unreadable (%d job%s blind until it reads again): %s",
                    root,
                    len(jobs),
                    "" if len(jobs) == 1 else "s",
                    exc,
                )
            return Blind(f"{type(exc).__name__}: {exc}")
        if root in self._unreadable:
            self._unreadable.discard(root)
            log.warning("progress under %s reads again", root)
        return found
