"""Two supervisors over one store and one backend never both act on a job."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch_supervise import Supervisor


def test_two_supervisor_threads_over_one_store_never_both_act():
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
        cluster.operator.submit(spec, by=Actor.human("ops"), supervised=True).job for _ in range(4)
    ]
    sups = [
        Supervisor(backend, store, poll=0.01, lease_ttl=timedelta(seconds=0.5), holder=f"s{i}")
        for i in range(2)
    ]
    threads = [threading.Thread(target=s.serve, daemon=True) for s in sups]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    preempted: set[str] = set()
    try:
        while time.monotonic() < deadline:
            statuses = {j: cluster.observer.get(j) for j in jobs}
            if all(s.settled for s in statuses.values()):
                break
            for s in statuses.values():
                if s.state is State.RUNNING:
                    ref = s.submissions[-1].canonical
                    if len(s.submissions) < 3 and ref.id not in preempted:
                        preempted.add(ref.id)
                        backend.env.preempt(ref)
                    elif len(s.submissions) >= 3:
                        backend.env.complete(ref)
            time.sleep(0.01)
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
        tokens = [e.token for e in decisions]
        assert tokens == sorted(tokens), (holders, tokens)
        authorized = [e for e in store.read(job).events if isinstance(e, ev.SubmissionAuthorized)]
        assert [e.n for e in authorized] == [1, 2, 3]
