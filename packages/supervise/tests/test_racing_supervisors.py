"""Two supervisors over one store and one backend never both act on a job."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from jobdispatch import (
    Action,
    Actor,
    CauseKind,
    JobSpec,
    RecoveryPolicy,
    Rule,
    State,
    Status,
    compose,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch_supervise import Supervisor

from .conftest import slurm_jobs


def test_two_supervisor_threads_over_one_store_never_both_act() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = compose(backend, store=store)
    spec = JobSpec(
        command=["train"],
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3)]
        ),
    )
    jobs = [
        job_of(cluster.operator.submit(spec, by=Actor.human("ops"), supervised=True))
        for _ in range(4)
    ]
    sups = [
        Supervisor(backend, store, poll=0.01, lease_ttl=timedelta(seconds=0.5), holder=f"s{i}")
        for i in range(2)
    ]
    threads = [threading.Thread(target=s.serve, daemon=True) for s in sups]
    for t in threads:
        t.start()
    preempted: set[str] = set()

    def scheduler_round() -> list[Status]:
        """The statuses seen, after the scheduler preempted each running job's first two
        submissions and let its third succeed."""
        statuses = [cluster.observer.get(j) for j in jobs]
        for s in statuses:
            if s.state is State.RUNNING:
                ref = s.submissions[-1].canonical
                assert ref is not None, s
                if len(s.submissions) < 3 and ref.id not in preempted:
                    preempted.add(ref.id)
                    backend.env.preempt(ref)
                elif len(s.submissions) >= 3:
                    backend.env.complete(ref)
        return statuses

    try:
        eventually(
            scheduler_round,
            "every job settled",
            holds=lambda statuses: all(s.settled for s in statuses),
        )
    finally:
        for s in sups:
            s.stop()
        for t in threads:
            t.join(timeout=10)
    for job in jobs:
        status = cluster.observer.get(job)
        assert status.settled and status.state is State.SUCCEEDED, status
        assert not backend.env.history.overlapping_live(job)
        decisions = [e for e in store.read(job).events if e.decision]
        holders = {e.by.id for e in decisions}
        # Tokens never go backwards: a decision is always made under the newest lease.
        tokens = [e.token for e in decisions if e.token is not None]
        assert len(tokens) == len(decisions), "a decision was committed without a token"
        assert tokens == sorted(tokens), (holders, tokens)
        authorized = [e for e in store.read(job).events if isinstance(e, ev.SubmissionAuthorized)]
        assert [e.n for e in authorized] == [1, 2, 3]


def test_supervisors_share_the_jobs_a_newcomer_gets_work_and_a_dead_ones_jobs_move() -> None:
    backend, store, _, jobs = slurm_jobs(6)
    ended = threading.Event()
    frozen: dict[str, threading.Event] = {}

    def start(name: str) -> tuple[Supervisor, threading.Thread]:
        frozen[name] = threading.Event()

        def sleep(delay: float) -> None:
            # A frozen supervisor is dead as the others see a crashed one: it polls, renews
            # and announces no more, and releases nothing (until the test ends).
            if frozen[name].is_set():
                ended.wait()
            else:
                time.sleep(delay)

        sup = Supervisor(
            backend, store, poll=0.02, lease_ttl=timedelta(seconds=2), holder=name, sleep=sleep
        )
        thread = threading.Thread(target=sup.serve, daemon=True)
        thread.start()
        return sup, thread

    def holdings(sups: list[Supervisor]) -> list[int]:
        return [sum(s.ownership.held(j) is not None for j in jobs) for s in sups]

    def wait_for(sups: list[Supervisor], want: list[int]) -> None:
        eventually(lambda: holdings(sups), f"jobs held {want}", holds=lambda held: held == want)

    running = [start("a")]
    try:
        wait_for([running[0][0]], [6])
        running.append(start("b"))
        wait_for([s for s, _ in running], [3, 3])  # a newcomer gets work, evenly
        running.append(start("c"))
        wait_for([s for s, _ in running], [2, 2, 2])
        frozen["c"].set()  # c dies holding two leases
        wait_for([s for s, _ in running[:2]], [3, 3])  # its jobs moved to the living
    finally:
        ended.set()
        for s, _ in running:
            s.stop()
        for _, t in running:
            t.join(timeout=10)
    # Nothing ran twice: every job was started once, however often its lease moved.
    assert backend.env.calls["start"] == len(jobs)
