"""The collector counts what the records hold, reads only what changed, and leaves out (with
a staleness timestamp) what it cannot measure."""

from __future__ import annotations

import urllib.request
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from jobdispatch.errors import Invalid, Unavailable
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Measured
from jobdispatch.types import State
from jobdispatch_metrics import RecordCollector, parse_listen, serve
from jobdispatch_supervise import Supervisor
from metrics_scenario import PREEMPT_RESUBMIT, Scenario, by_name, samples


def _scripted(scenario: Scenario) -> tuple[str, str]:
    """Job a: preempted once, then succeeds; job b: preempted three times under a budget of
    two, so it fails."""
    a = scenario.submit(PREEMPT_RESUBMIT, name="a")
    scenario.preempt_runs(a, [1])
    scenario.complete_run(a, 2)
    assert scenario.run(a).state is State.SUCCEEDED
    b = scenario.submit(PREEMPT_RESUBMIT, name="b")
    scenario.preempt_runs(b, [1, 2, 3])
    assert scenario.run(b).state is State.FAILED
    return a, b


def _expected(scenario: Scenario) -> dict[str, Counter[tuple[str, ...]]]:
    """The counts read from each job's status, as `jobdispatch status` shows it."""
    endings: Counter[tuple[str, ...]] = Counter()
    outcomes: Counter[tuple[str, ...]] = Counter()
    recoveries: Counter[tuple[str, ...]] = Counter()
    for job in scenario.store.list():
        status = scenario.cluster.observer.get(job)
        for sub in status.submissions:
            for x in sub.executions:
                if x.cause is not None:
                    endings[(str(x.cause.kind), str(x.cause.provenance))] += 1
        if status.state.terminal:
            cause = status.cause
            outcomes[(str(cause.kind), str(cause.provenance), str(status.state))] += 1
        assert status.plan is not None
        for r in status.plan.rules:
            if r.firings:
                key = (str(r.effective.action), str(r.enforcer), str(r.index))
                recoveries[key] += r.firings
    return {"endings": endings, "outcomes": outcomes, "recoveries": recoveries}


def _values(found: dict[Any, float], name: str) -> Counter[tuple[str, ...]]:
    return Counter({tuple(v for _, v in k): int(n) for k, n in by_name(found, name).items()})


def test_the_counters_are_what_the_records_hold(scenario: Scenario) -> None:
    _scripted(scenario)
    found = samples(RecordCollector(scenario.store, cluster="edge").collect())
    expected = _expected(scenario)
    assert _values(found, "jobdispatch_execution_endings_total") == expected["endings"]
    assert _values(found, "jobdispatch_job_outcomes_total") == expected["outcomes"]
    assert _values(found, "jobdispatch_recoveries_total") == expected["recoveries"]
    # The story told in numbers: four preemptions and one clean end; two resubmits for a,
    # ... one for a and two for b, each charged to rule 0.
    assert expected["endings"] == {("preempted", "scheduler"): 4, ("none", "none"): 1}
    assert expected["recoveries"] == {("resubmit", "supervisor", "0"): 3}
    assert by_name(found, "jobdispatch_jobs") == {
        (("state", "failed"),): 1,
        (("state", "succeeded"),): 1,
    }
    assert all(labels == (("cluster", "edge"),) or ("cluster", "edge") in labels
               for (_, labels) in found)  # fmt: skip
    # One decision followed each of the five ends: three resubmits, two outcomes.
    assert by_name(found, "jobdispatch_decision_latency_seconds_count") == {(): 5}


def test_a_second_collector_over_the_same_record_counts_the_same(scenario: Scenario) -> None:
    """Counters come from the record, not the process: a restarted endpoint (or one on
    another host) shows the same values, so nothing resets."""
    _scripted(scenario)
    first = samples(RecordCollector(scenario.store, cluster="c").collect())
    second = samples(RecordCollector(scenario.store, cluster="c").collect())
    for name in ("jobdispatch_execution_endings_total", "jobdispatch_recoveries_total"):
        assert by_name(first, name) == by_name(second, name) != {}


def test_a_scrape_with_nothing_changed_reads_no_record(scenario: Scenario) -> None:
    a, _ = _scripted(scenario)
    collector = RecordCollector(scenario.store, cluster="c")
    list(collector.collect())
    assert collector.watch.refresh() == 0
    later = scenario.submit(PREEMPT_RESUBMIT, name="later")
    assert collector.watch.refresh() == 1
    found = samples(collector.collect())
    assert by_name(found, "jobdispatch_jobs")[(("state", "pending"),)] == 1
    assert later != a


def test_per_job_budgets_only_when_asked_and_only_for_unsettled_jobs(
    scenario: Scenario,
) -> None:
    _scripted(scenario)
    waiting = scenario.submit(PREEMPT_RESUBMIT, name="waiting")
    plain = samples(RecordCollector(scenario.store, cluster="c").collect())
    assert not by_name(plain, "jobdispatch_job_budget_remaining")
    found = samples(RecordCollector(scenario.store, cluster="c", per_job=True).collect())
    assert by_name(found, "jobdispatch_job_budget_remaining") == {
        (("action", "resubmit"), ("job_id", waiting), ("rule", "0")): 2
    }
    assert by_name(found, "jobdispatch_job_budget") == {
        (("action", "resubmit"), ("job_id", waiting), ("rule", "0")): 2
    }


def test_supervisors_from_the_members_list_and_the_leases(scenario: Scenario) -> None:
    job = scenario.submit(PREEMPT_RESUBMIT)
    scenario.store.announce("host-a:1:x", timedelta(seconds=30))
    scenario.store.acquire(job, "host-a:1:x", timedelta(seconds=30))
    scenario.clock.advance(10)
    collector = RecordCollector(scenario.store, cluster="c", lease_ttl=timedelta(seconds=30))
    found = samples(collector.collect())
    who = (("supervisor", "host-a:1:x"),)
    assert by_name(found, "jobdispatch_supervisor_leases") == {who: 1}
    assert by_name(found, "jobdispatch_supervisor_announcement_expires_in_seconds") == {who: 20}
    assert by_name(found, "jobdispatch_supervisor_last_poll_age_seconds") == {who: 10}
    assert by_name(found, "jobdispatch_supervisors_live") == {(): 1}
    scenario.clock.advance(25)  # its announcement and its lease have lapsed, nobody pruned it
    found = samples(collector.collect())
    assert by_name(found, "jobdispatch_supervisor_announcement_expires_in_seconds") == {who: -5}
    assert by_name(found, "jobdispatch_supervisor_leases") == {who: 0}
    assert by_name(found, "jobdispatch_supervisors_live") == {(): 0}


def test_poll_duration_and_commit_latency_from_the_members_list_absent_when_unmeasured(
    scenario: Scenario,
) -> None:
    ttl = timedelta(seconds=30)
    scenario.store.announce("a:1:x", ttl, Measured(poll_seconds=0.5, commit_seconds=0.02))
    scenario.store.announce("b:2:y", ttl, Measured(poll_seconds=0.75))
    scenario.store.announce("c:3:z", ttl)  # nothing measured yet
    collector = RecordCollector(scenario.store, cluster="c", lease_ttl=ttl)
    found = samples(collector.collect())
    assert by_name(found, "jobdispatch_supervisor_poll_duration_seconds") == {
        (("supervisor", "a:1:x"),): 0.5,
        (("supervisor", "b:2:y"),): 0.75,
    }
    assert by_name(found, "jobdispatch_supervisor_commit_latency_seconds") == {
        (("supervisor", "a:1:x"),): 0.02
    }
    # A later announcement replaces what the member published; one without figures drops them.
    scenario.store.announce("a:1:x", ttl)
    found = samples(collector.collect())
    assert (("supervisor", "a:1:x"),) not in by_name(
        found, "jobdispatch_supervisor_poll_duration_seconds"
    )


def test_a_store_that_does_not_answer_leaves_the_series_out_and_says_since_when(
    scenario: Scenario,
) -> None:
    answers = False
    now = [1000.0]

    def opener() -> object:
        if not answers:
            raise Unavailable("the database is away")
        return scenario.store

    collector = RecordCollector(opener, cluster="c", wall=lambda: now[0])  # type: ignore[arg-type]
    found = samples(collector.collect())
    assert by_name(found, "jobdispatch_store_up") == {(): 0}
    assert not by_name(found, "jobdispatch_jobs")
    assert not by_name(found, "jobdispatch_execution_endings_total")
    since = by_name(found, "jobdispatch_unmeasured_since_timestamp_seconds")
    assert since == {(("series", s),): 1000.0 for s in ("records", "store_size", "supervisors")}
    now[0] = 1060.0
    found = samples(collector.collect())  # still away: the time it went away stays
    assert (
        by_name(found, "jobdispatch_unmeasured_since_timestamp_seconds")[(("series", "records"),)]
        == 1000.0
    )
    answers = True
    found = samples(collector.collect())
    assert by_name(found, "jobdispatch_store_up") == {(): 1}
    assert by_name(found, "jobdispatch_unmeasured_since_timestamp_seconds") == {}
    assert by_name(found, "jobdispatch_store_size_bytes")[()] > 0


def test_a_store_that_cannot_be_surveyed_is_refused_by_name() -> None:
    with pytest.raises(Invalid, match="cannot be surveyed"):
        RecordCollector(MemoryRecords(), cluster="c")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:0", ("::1", 0)), ("h:1", ("h", 1))],
)
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["9464", ":9464", "host:", "host:port", "h:70000", "[x]:1"])
def test_bad_listen_addresses_are_refused_quoting_them(text: str) -> None:
    with pytest.raises(Invalid, match="HOST:PORT"):
        parse_listen(text)


def test_the_endpoint_serves_the_exposition_over_http(scenario: Scenario) -> None:
    _scripted(scenario)
    endpoint = serve(RecordCollector(scenario.store, cluster="c"), "127.0.0.1:0")
    try:
        with urllib.request.urlopen(endpoint.url, timeout=30) as answer:
            text = answer.read().decode()
    finally:
        endpoint.stop()
    assert (
        'jobdispatch_recoveries_total{action="resubmit",cluster="c",enforcer="supervisor",'
        'rule="0"} 3.0' in text
    )
    assert "python_gc" not in text  # the store's series alone, not the process's


def test_a_serving_supervisor_publishes_its_poll_duration_and_commit_latency(
    scenario: Scenario,
) -> None:
    scenario.submit(PREEMPT_RESUBMIT)
    collector = RecordCollector(scenario.store, cluster="c")
    seen: list[dict[str, Any]] = []
    supervisor: Supervisor | None = None

    def sleep(seconds: float) -> None:
        # Between two polls: the announcement of the poll just made carried the figures of
        # the poll before it, and the endpoint reads them from the store's members list.
        found = samples(collector.collect())
        seen.append(
            {
                "poll": by_name(found, "jobdispatch_supervisor_poll_duration_seconds"),
                "commit": by_name(found, "jobdispatch_supervisor_commit_latency_seconds"),
            }
        )
        scenario.tick(seconds)
        if len(seen) >= 3 and supervisor is not None:
            supervisor.stop()

    supervisor = Supervisor(
        scenario.backend, scenario.store, clock=scenario.clock, sleep=sleep, poll=1.0
    )
    supervisor.serve()
    who = (("supervisor", supervisor.holder),)
    assert seen[0] == {"poll": {}, "commit": {}}  # the first announcement had nothing measured
    assert who in seen[1]["poll"] and seen[1]["poll"][who] >= 0
    assert who in seen[1]["commit"]  # the first poll launched the job: it committed
