"""How often the supervisor polls: the adapter's pacing, jittered, woken early by a Watcher,
and what it observed handed to a reporter (docs/specs/0004-supervisor.md, D5)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from jobdispatch import Actor, Cluster, Invalid, JobSpec, ObjectState, State, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.spi import Discovery, ObjectObs, Pacing
from jobdispatch.testing import PATIENCE, eventually, job_of
from jobdispatch_supervise import Supervisor

from .conftest import serving, slurm_jobs, wait_all_running

DEADLINE = PATIENCE  # a join ends on the supervisor stopping; this only bounds a hang


class Paced(MemoryBackend):
    """The memory adapter paced like a costly scheduler."""

    pacing = Pacing(interval=30.0, floor=2.0)


class Streaming(MemoryBackend):
    """The memory adapter with a watch that waits for news (as a Kubernetes watch does), and a
    poll interval of an hour, so only a wake can make the supervisor notice news soon."""

    pacing = Pacing(interval=3600.0, floor=0.001, watch=True)

    def watch(self, job: str) -> Iterator[ObjectObs]:
        end = time.monotonic() + 1.0
        cursor: list[ObjectObs] = []
        while time.monotonic() < end:
            now = list(super().watch(job))
            fresh = [o for o in now if o not in cursor]
            cursor = now
            yield from fresh
            time.sleep(0.01)


def _submit(cluster: Cluster, n: int = 1) -> list[str]:
    return [
        job_of(
            cluster.operator.submit(JobSpec(command=["x"]), by=Actor.human("ops"), supervised=True)
        )
        for _ in range(n)
    ]


def test_the_poll_is_the_adapter_s_unless_told_and_never_below_its_floor() -> None:
    store = MemoryRecords()
    assert Supervisor(Paced(), store).poll == 30.0
    assert Supervisor(Paced(), store, poll=5).poll == 5.0
    assert Supervisor(Paced(), store, poll_floor=10).pacing.floor == 10.0
    with pytest.raises(Invalid, match=r"a poll interval of 1 s is below the poll floor of 2 s"):
        Supervisor(Paced(), store, poll=1)
    with pytest.raises(Invalid, match=r"a poll floor of 1 s is below the adapter's floor of 2 s"):
        Supervisor(Paced(), store, poll_floor=1)


def test_each_sleep_is_the_interval_jittered_by_the_injected_draw() -> None:
    backend = Paced(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    (job,) = _submit(compose(backend, store=store))
    draws = iter([0.0, 0.5, 0.25, 0.75] * 10)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 4:
            sup.stop()

    sup = Supervisor(backend, store, sleep=sleep, draw=lambda: next(draws))
    sup.run(job)
    # Launched and running: nothing is due, so each sleep is the interval, early by the
    # fraction of its jitter (20 %) the draw says.
    assert slept == pytest.approx([30.0, 27.0, 28.5, 25.5])


def test_a_watcher_wakes_the_supervisor_long_before_its_interval() -> None:
    backend = Streaming(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    (job,) = _submit(cluster)
    sup = Supervisor(backend, store)
    thread = threading.Thread(target=sup.run, args=(job,), daemon=True)
    thread.start()
    try:
        eventually(
            lambda: cluster.observer.get(job), "running", holds=lambda s: s.state is State.RUNNING
        )
        (ref,) = backend.env.objects_of(job)
        backend.env.complete(ref)
        # Without the watch's news the supervisor would sleep out its hour.
        thread.join(timeout=DEADLINE)
        assert not thread.is_alive(), "the supervisor slept through the watch's news"
    finally:
        sup.stop()
        thread.join(timeout=10)
    assert cluster.observer.get(job).state is State.SUCCEEDED


@pytest.mark.parametrize("jobs", [1, 20])
def test_serve_reports_what_its_own_poll_showed_and_asks_nothing_more(jobs: int) -> None:
    backend, store, cluster, submitted = slurm_jobs(jobs)
    seen: dict[str, Discovery] = {}
    sup = Supervisor(backend, store, poll=0.02, on_observed=seen.__setitem__)
    with serving(sup):

        def all_running() -> bool:
            return set(seen) == set(submitted) and all(
                any(o.state is ObjectState.RUNNING for o in seen[j].objects) for j in submitted
            )

        eventually(all_running, "every job reported running")
        before = dict(backend.env.calls)
        eventually(
            lambda: backend.env.calls["find_many"],
            "five polls more",
            holds=lambda polls: polls >= before.get("find_many", 0) + 5,
        )
        after = dict(backend.env.calls)
    quiet = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    # Five or more quiet polls, one query each, and the reports asked the backend nothing.
    assert {k for k, v in quiet.items() if v} == {"find_many"}
    # Each report is built from the poll's Discovery, with no query of its own.
    status = cluster.observer.get(submitted[0], seen[submitted[0]])
    assert status.state is State.RUNNING


def test_jobs_ending_cost_no_query_of_their_own_beyond_the_poll() -> None:
    # Recording an ending, its outcome and the settling call nothing on the backend, so the
    # passes after them reuse the poll's Find: before, each looked again (a find per job, on
    # Slurm an squeue and an sacct each) after every one of those steps.
    backend, store, cluster, submitted = slurm_jobs(5)
    sup = Supervisor(backend, store, poll=0.02)
    with serving(sup):
        wait_all_running(cluster, submitted)
        before = backend.env.calls["find"]
        for job in submitted:
            (ref,) = backend.env.objects_of(job)
            backend.env.complete(ref)
        eventually(
            lambda: all(store.read(j).header and _settled(cluster, j) for j in submitted),
            "every job settled",
        )
        after = backend.env.calls["find"]
    assert after - before == 0


def _settled(cluster: Cluster, job: str) -> bool:
    return cluster.observer.get(job, Discovery(job=job, complete=False)).settled


def test_a_launch_under_serve_never_records_its_new_object_absent() -> None:
    # The poll's Find predates the Start: reused after a call (the canonical pass after the
    # start), it lacked the object just created, and its absence was recorded as evidence.
    from jobdispatch.records import events as ev

    backend, store, cluster, submitted = slurm_jobs(3)
    sup = Supervisor(backend, store, poll=0.02)
    with serving(sup):
        wait_all_running(cluster, submitted)
    absent = [e for j in submitted for e in store.read(j).events if isinstance(e, ev.Absent)]
    assert absent == []


def test_a_launch_under_serve_asks_one_query_a_round_not_one_a_job() -> None:
    # After a round's calls (the starts, the opens) the poll's Find is stale: the round after
    # them looks again with one batched Find for every job that called, never a find per job
    # (on Slurm an squeue and an sacct each, 2N commands a round while N jobs launch).
    backend, store, cluster, submitted = slurm_jobs(8)
    sup = Supervisor(backend, store, poll=0.02)
    with serving(sup):
        # Judged from the record alone (an empty, incomplete Discovery): the observer's own
        # Find would be counted.
        eventually(
            lambda: all(
                cluster.observer.get(j, Discovery(job=j, complete=False)).state is State.RUNNING
                for j in submitted
            ),
            "every job running",
        )
        finds = backend.env.calls["find"]
    assert backend.env.calls["find_many"] > 0
    assert finds == 0
