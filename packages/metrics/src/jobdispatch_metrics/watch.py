"""The store as the endpoint knows it: every record's facts, refreshed by revision.

A scrape must not fold ten thousand records. The store's :meth:`~jobdispatch.records.store.
Surveyed.survey` answers every job's revision from one read transaction without fetching a
record; the watch keeps each job's facts with the revision they were derived from, reads and
folds again only the records whose revision moved, and keeps the sums over every record
(:class:`Tally`) up to date by taking a record's old facts out and putting its new ones in.
So a scrape with nothing changed costs the survey alone.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from datetime import datetime

import attrs
from jobdispatch.errors import Invalid, NotFound
from jobdispatch.records.events import View
from jobdispatch.records.store import Records, Survey, Surveyed
from jobdispatch.types import JobID

from jobdispatch_metrics.facts import JobFacts, facts_of

__all__ = ["BUCKETS", "Histogram", "Tally", "Watch"]

log = logging.getLogger("jobdispatch.metrics")

#: Each histogram's bucket bounds, in seconds. Time to running and recovery span a queue's
#: wait (seconds to a day); a decision follows its evidence within a poll or two.
BUCKETS: Mapping[str, tuple[float, ...]] = {
    "time_to_running": (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
    "recovery": (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
    "decision_latency": (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
}

#: Records read per ``read_many``: one read transaction (one round trip) each.
READ_BATCH = 500


@attrs.define
class Histogram:
    """Observations counted into buckets (each bucket alone, not cumulative: the exposition
    adds them up), with their sum; observations can be taken out again."""

    bounds: tuple[float, ...]
    counts: list[int] = attrs.Factory(list)
    total: float = 0.0
    count: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf

    def add(self, values: Iterable[float], sign: int) -> None:
        for value in values:
            i = next((i for i, b in enumerate(self.bounds) if value <= b), len(self.bounds))
            self.counts[i] += sign
            self.total += sign * value
            self.count += sign

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, observations at or below it), +Inf last, as the exposition wants."""
        out, running = [], 0
        for bound, n in zip([*map(_bound, self.bounds), "+Inf"], self.counts, strict=True):
            running += n
            out.append((bound, running))
        return out


def _bound(value: float) -> str:
    return repr(float(value))


def _change(counter: Counter[Hashable], keys: Iterable[Hashable], sign: int) -> None:
    for key in keys:
        counter[key] += sign
        if not counter[key]:
            del counter[key]


@attrs.define
class Tally:
    """The sums of every record's facts: what the counters and gauges expose."""

    jobs: Counter[Hashable] = attrs.Factory(Counter)
    endings: Counter[Hashable] = attrs.Factory(Counter)
    outcomes: Counter[Hashable] = attrs.Factory(Counter)
    recoveries: Counter[Hashable] = attrs.Factory(Counter)
    histograms: dict[str, Histogram] = attrs.Factory(
        lambda: {name: Histogram(bounds) for name, bounds in BUCKETS.items()}
    )

    def change(self, facts: JobFacts, sign: int) -> None:
        """Put ``facts`` in (``sign`` 1) or take them out (-1)."""
        _change(self.jobs, [facts.state], sign)
        _change(self.endings, facts.endings, sign)
        _change(self.outcomes, [facts.outcome] if facts.outcome is not None else [], sign)
        _change(self.recoveries, facts.recoveries, sign)
        self.histograms["time_to_running"].add(facts.time_to_running, sign)
        self.histograms["recovery"].add(facts.recovery, sign)
        self.histograms["decision_latency"].add(facts.decision_latency, sign)


class Watch:
    """Every record's facts and their sums, brought up to date by :meth:`refresh`. Not
    thread-safe: the collector calls it under its lock."""

    def __init__(self, store: Records, *, read_batch: int = READ_BATCH) -> None:
        if not isinstance(store, Surveyed):
            msg = f"{store!r} cannot be surveyed, so the metrics endpoint cannot watch it"
            raise Invalid(msg)
        self.store = store
        self._surveyed: Surveyed = store
        self.read_batch = read_batch
        self.tally = Tally()
        self.facts: dict[JobID, JobFacts] = {}
        #: Jobs whose record cannot be read or folded, with the revision that could not.
        self.unreadable: dict[JobID, int] = {}
        self.survey: Survey | None = None

    def refresh(self) -> int:
        """Survey the store and fold again each record whose revision moved; returns how
        many were read. Raises what the store raises when it cannot answer (Unavailable):
        the facts are then as of the last refresh that succeeded."""
        survey = self._surveyed.survey()
        changed = [
            job
            for job, revision in survey.revisions.items()
            if _known(self.facts.get(job), self.unreadable.get(job)) != revision
        ]
        for start in range(0, len(changed), self.read_batch):
            chunk = changed[start : start + self.read_batch]
            for job, answer in zip(chunk, self.store.read_many(chunk), strict=True):
                self._update(job, answer, survey.now, survey.revisions[job])
        self.survey = survey
        return len(changed)

    def _update(self, job: JobID, answer: object, now: datetime, surveyed: int) -> None:
        """Replace the job's facts by those of ``answer`` (its View, or why it could not be
        read); an unreadable record is remembered at the revision ``surveyed``, so that it is
        tried again only once it has grown."""
        old = self.facts.pop(job, None)
        if old is not None:
            self.tally.change(old, -1)
        self.unreadable.pop(job, None)
        if isinstance(answer, View):
            try:
                new = facts_of(answer, now)
            except Invalid as exc:
                log.warning("record %s cannot be folded: %s", job, exc)
                self.unreadable[job] = surveyed
                return
            self.facts[job] = new
            self.tally.change(new, 1)
        elif isinstance(answer, NotFound):
            return  # listed, then gone: no store removes records, so a damaged index
        else:
            log.warning("record %s cannot be read: %s", job, answer)
            self.unreadable[job] = surveyed


def _known(facts: JobFacts | None, unreadable: int | None) -> int | None:
    """The revision the watch last derived the job at (None: never)."""
    if facts is not None:
        return facts.revision
    return unreadable
