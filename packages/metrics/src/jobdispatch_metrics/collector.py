"""The Prometheus collector: the watch's sums as metric families, computed at scrape time.

Every series is read from the store when Prometheus scrapes, never counted by this process, so
what it exposes is what the record holds (see :mod:`jobdispatch_metrics.facts`). A series that
cannot be measured now (the store does not answer, or cannot tell its size) is left out, and
``jobdispatch_unmeasured_since_timestamp_seconds{series=...}`` says since when: an alert or a
graph then shows a gap, never a zero that reads as "nothing happened".

The series issue 19 (stalled jobs, blind supervisors) and issue 20 (goodput and badput seconds
by cause) will add are derived from the same records: they plug in through ``more``, each a
function of the :class:`~jobdispatch_metrics.watch.Watch` yielding its families.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta

from jobdispatch.errors import DispatchError, Unavailable
from jobdispatch.records.store import Records
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from jobdispatch_metrics.watch import Watch

__all__ = ["SERIES", "RecordCollector"]

log = logging.getLogger("jobdispatch.metrics")

#: What ``jobdispatch_unmeasured_since_timestamp_seconds`` names in its ``series`` label: the
#: record-derived series (jobs, endings, outcomes, recoveries, histograms, budgets), the
#: supervisors' (members and leases), and the store's size.
SERIES = ("records", "supervisors", "store_size")

#: Extra families derived from the watch (issues 19 and 20 add theirs here).
More = Callable[[Watch, str], Iterable[Metric]]


class RecordCollector(Collector):
    """Reads ``store`` at each scrape and exposes its records' sums.

    Args:
        store: a store that can be surveyed (LMDB, PostgreSQL), opened read-only by the
            caller; or a function that opens one, called at each scrape until it succeeds,
            so that an endpoint started while the store is away serves ``store_up 0`` rather
            than failing. The collector only reads the store and takes no lease.
        cluster: the ``cluster`` label of every series (a store holds one cluster's jobs).
        per_job: also expose each unsettled job's budget left per rule (a series per job:
            off by default, so that labels stay bounded).
        lease_ttl: the supervisors' ``--lease-ttl``, which is also how long each member's
            announcement lasts: the age of a member's last poll is this minus the time its
            announcement has left. The members list keeps only the expiry, so a supervisor
            run with another ttl shows a skewed age.
        more: extra families derived from the watch (see the module docstring).
        wall: the clock of the staleness timestamps (seconds since the epoch).
    """

    def __init__(
        self,
        store: Records | Callable[[], Records],
        *,
        cluster: str,
        per_job: bool = False,
        lease_ttl: timedelta = timedelta(seconds=30),
        more: Sequence[More] = (),
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._open: Callable[[], Records] | None = None
        self._watch: Watch | None = None
        if isinstance(store, Records):
            self._watch = Watch(store)
        else:
            self._open = store
        self.cluster = cluster
        self.per_job = per_job
        self.lease_ttl = lease_ttl
        self.more = tuple(more)
        self.wall = wall
        self._lock = threading.Lock()
        self._unmeasured: dict[str, float] = {}
        self._refresh_seconds = 0.0
        self._refreshed_at: float | None = None

    def describe(self) -> Iterable[Metric]:
        """Nothing: registering must not read the store (the registry would call
        ``collect`` to learn the names otherwise)."""
        return ()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            started = time.perf_counter()
            try:
                if self._watch is None:
                    assert self._open is not None
                    self._watch = Watch(self._open())
                self._watch.refresh()
            except DispatchError as exc:
                log.warning("the record store did not answer the scrape: %s", exc)
                for series in SERIES:
                    self._unmeasured.setdefault(series, self.wall())
                return list(self._down())
            self._refresh_seconds = time.perf_counter() - started
            self._refreshed_at = self.wall()
            for series in ("records", "supervisors"):
                self._unmeasured.pop(series, None)
            return list(self._families())

    @property
    def watch(self) -> Watch:
        """The records' facts and sums; Unavailable before the store was first opened."""
        if self._watch is None:
            msg = "the record store has not answered yet"
            raise Unavailable(msg)
        return self._watch

    # ------------------------------------------------------------------------------ families

    def _gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=["cluster", *labels])

    def _down(self) -> Iterator[Metric]:
        up = self._gauge("jobdispatch_store_up", "Whether the record store answered the scrape.")
        up.add_metric([self.cluster], 0)
        yield up
        yield self._staleness()

    def _staleness(self) -> Metric:
        stale = self._gauge(
            "jobdispatch_unmeasured_since_timestamp_seconds",
            "Since when a series could not be measured (it is absent meanwhile, never zero).",
            ["series"],
        )
        for series, since in sorted(self._unmeasured.items()):
            stale.add_metric([self.cluster, series], since)
        return stale

    def _families(self) -> Iterator[Metric]:
        watch, c = self.watch, self.cluster
        tally = watch.tally
        survey = watch.survey
        assert survey is not None  # refreshed just now

        up = self._gauge("jobdispatch_store_up", "Whether the record store answered the scrape.")
        up.add_metric([c], 1)
        yield up

        jobs = self._gauge("jobdispatch_jobs", "Jobs by state, as their records show.", ["state"])
        for (state,), n in _sorted_items(tally.jobs):
            jobs.add_metric([c, state], n)
        yield jobs

        unreadable = self._gauge(
            "jobdispatch_records_unreadable",
            "Records that cannot be read or folded (each left out of every other series).",
        )
        unreadable.add_metric([c], len(watch.unreadable))
        yield unreadable

        yield self._counter(
            "jobdispatch_execution_endings",
            "Execution ends the records observed, by cause and provenance.",
            ["cause", "provenance"],
            tally.endings,
        )
        yield self._counter(
            "jobdispatch_job_outcomes",
            "Jobs whose outcome is decided, by state, cause and provenance.",
            ["state", "cause", "provenance"],
            tally.outcomes,
        )
        yield self._counter(
            "jobdispatch_recoveries",
            "Firings of recovery rules, by the rule's index in its job's plan, its action "
            "and who enforces it.",
            ["rule", "action", "enforcer"],
            tally.recoveries,
        )
        for name, key, doc in (
            (
                "jobdispatch_time_to_running_seconds",
                "time_to_running",
                "From a job's creation to the start of its first run.",
            ),
            (
                "jobdispatch_recovery_seconds",
                "recovery",
                "From the end of a run to the start of the job's next run.",
            ),
            (
                "jobdispatch_decision_latency_seconds",
                "decision_latency",
                "From the commit of the observation of a run's end to the commit of the "
                "decision it led to (a recovery, a submission, the outcome).",
            ),
        ):
            histogram = tally.histograms[key]
            family = HistogramMetricFamily(name, doc, labels=["cluster"])
            family.add_metric([c], histogram.cumulative(), sum_value=histogram.total)
            yield family

        if self.per_job:
            yield from self._budgets()

        yield from self._supervisors()

        size = self._gauge("jobdispatch_store_size_bytes", "The room the record store takes.")
        if survey.size_bytes is None:
            self._unmeasured.setdefault("store_size", self.wall())
        else:
            self._unmeasured.pop("store_size", None)
            size.add_metric([c], survey.size_bytes)
        yield size

        refresh = self._gauge(
            "jobdispatch_scrape_refresh_seconds",
            "How long this scrape took to bring the records' sums up to date.",
        )
        refresh.add_metric([c], self._refresh_seconds)
        yield refresh
        if self._refreshed_at is not None:
            at = self._gauge(
                "jobdispatch_records_measured_timestamp_seconds",
                "When the record-derived series were last measured.",
            )
            at.add_metric([c], self._refreshed_at)
            yield at
        yield self._staleness()
        for more in self.more:
            yield from more(watch, c)

    def _counter(
        self, name: str, doc: str, labels: Sequence[str], counts: Mapping[Hashable, int]
    ) -> Metric:
        family = CounterMetricFamily(name, doc, labels=["cluster", *labels])
        for key, n in _sorted_items(counts):
            family.add_metric([self.cluster, *key], n)
        return family

    def _budgets(self) -> Iterator[Metric]:
        left = self._gauge(
            "jobdispatch_job_budget_remaining",
            "Firings left to each rule of each unsettled job (only with --per-job).",
            ["job_id", "rule", "action"],
        )
        total = self._gauge(
            "jobdispatch_job_budget",
            "Each rule's whole budget, per unsettled job (only with --per-job).",
            ["job_id", "rule", "action"],
        )
        for job, facts in sorted(self.watch.facts.items()):
            if facts.settled:
                continue
            for b in facts.budgets:
                labels = [self.cluster, job, str(b.rule), b.action]
                left.add_metric(labels, b.remaining)
                total.add_metric(labels, b.budget)
        yield left
        yield total

    def _supervisors(self) -> Iterator[Metric]:
        survey = self.watch.survey
        assert survey is not None
        leases = self._gauge(
            "jobdispatch_supervisor_leases",
            "Unexpired job leases each supervisor holds.",
            ["supervisor"],
        )
        expires = self._gauge(
            "jobdispatch_supervisor_announcement_expires_in_seconds",
            "Time left to each member's last announcement (negative: it stopped announcing "
            "and no other member has pruned it yet).",
            ["supervisor"],
        )
        age = self._gauge(
            "jobdispatch_supervisor_last_poll_age_seconds",
            "How long ago each member last announced itself, which it does every poll "
            "(the lease ttl less the time its announcement has left).",
            ["supervisor"],
        )
        live = self._gauge(
            "jobdispatch_supervisors_live", "Members whose announcement has not lapsed."
        )
        poll = self._gauge(
            "jobdispatch_supervisor_poll_duration_seconds",
            "How long each member's latest complete poll took, as it published with its "
            "announcement (absent until it has measured one).",
            ["supervisor"],
        )
        commit = self._gauge(
            "jobdispatch_supervisor_commit_latency_seconds",
            "The longest durable commit of each member's latest poll that committed, as it "
            "published with its announcement (absent until it has committed).",
            ["supervisor"],
        )
        holders = set(survey.leases) | set(survey.members)
        for holder in sorted(holders):
            leases.add_metric([self.cluster, holder], survey.leases.get(holder, 0))
        count = 0
        for member, until in sorted(survey.members.items()):
            left = (until - survey.now).total_seconds()
            count += left > 0
            expires.add_metric([self.cluster, member], left)
            age.add_metric([self.cluster, member], self.lease_ttl.total_seconds() - left)
            measured = survey.measured.get(member)
            if measured is not None and measured.poll_seconds is not None:
                poll.add_metric([self.cluster, member], measured.poll_seconds)
            if measured is not None and measured.commit_seconds is not None:
                commit.add_metric([self.cluster, member], measured.commit_seconds)
        live.add_metric([self.cluster], count)
        yield from (leases, expires, age, live, poll, commit)


def _sorted_items(counts: Mapping[Hashable, int]) -> list[tuple[tuple[str, ...], int]]:
    """(label values, count) in a stable order; keys are tuples of strings or one string."""
    items = [
        (tuple(map(str, key)) if isinstance(key, tuple) else (str(key),), n)
        for key, n in counts.items()
    ]
    return sorted(items)
