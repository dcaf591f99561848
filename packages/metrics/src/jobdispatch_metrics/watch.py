"""The store as the endpoint knows it: every record's facts, refreshed by revision.

A scrape must not fold ten thousand records: the watch is a :class:`~jobdispatch.records.
derived.Derived` of each record's facts (only records whose revision moved are read again),
and keeps the sums over every record (:class:`Tally`) up to date by taking a record's old
facts out and putting its new ones in. So a scrape with nothing changed costs the survey alone.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping

import attrs
from jobdispatch.records.derived import READ_BATCH, Derived
from jobdispatch.records.store import Records
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


class Watch(Derived[JobFacts]):
    """Every record's facts and their sums, brought up to date by :meth:`refresh`. Not
    thread-safe: the collector calls it under its lock."""

    def __init__(self, store: Records, *, read_batch: int = READ_BATCH) -> None:
        super().__init__(store, facts_of, reader="metrics endpoint", log=log, read_batch=read_batch)
        self.tally = Tally()

    @property
    def facts(self) -> dict[JobID, JobFacts]:
        """Each readable job's facts."""
        return self.values

    def changed(self, job: JobID, old: JobFacts | None, new: JobFacts | None) -> None:
        """Take the record's old facts out of the sums and put its new ones in."""
        if old is not None:
            self.tally.change(old, -1)
        if new is not None:
            self.tally.change(new, 1)
