"""Two supervisor *processes* over one LMDB store: the owner is SIGKILLed in the middle of a
recovery (after committing an attempt, with its Start call made and its reply not yet
recorded), and the other takes over once the lease expires. The job finishes with no duplicate
execution and no budget overspent.

The backend is the memory adapter living in this test process and served to the supervisors
over a multiprocessing manager, so both processes act on one scheduler, as two hosts would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.records import events as ev
from jobdispatch.testing import eventually, job_of
from shared_scheduler import REMOTE_BACKEND, serve

lmdb_store = pytest.importorskip("jobdispatch_records_lmdb")

CHILD = REMOTE_BACKEND + textwrap.dedent("""
    from jobdispatch_records_lmdb import LmdbRecords

    slow = int(os.environ.get("JD_SLOW_START_FROM", "0"))

    class SlowToReply(Remote):
        def start(self, request):
            ref = super().start(request)
            if slow and request.submission >= slow:
                print("started", ref, flush=True)
                time.sleep(600)  # killed here: the object exists, its reply is not recorded
            return ref

    store = LmdbRecords(sys.argv[1])
    Supervisor(SlowToReply(), store, poll=0.02, lease_ttl=timedelta(seconds=2),
               holder=sys.argv[3]).run(sys.argv[2])
    print("settled", flush=True)
""")


def test_the_owner_killed_mid_recovery_is_taken_over_without_a_duplicate(tmp_path: Path) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    server = serve(backend, "127.0.0.1")
    addr = f"{server.host}:{server.port}"

    path = tmp_path / "records"
    store = lmdb_store.LmdbRecords(path)
    cluster = compose(backend, store=store)
    spec = JobSpec(
        command=["train"],
        nodes=2,
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    job = job_of(cluster.operator.submit(spec, by=Actor.human("ops"), supervised=True))
    script = tmp_path / "child.py"
    script.write_text(CHILD)

    def spawn(holder: str, slow: int) -> subprocess.Popen[str]:
        env = {**os.environ, "JD_SCHEDULER": addr, "JD_SLOW_START_FROM": str(slow)}
        return subprocess.Popen(
            [sys.executable, str(script), str(path), job, holder],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    owner = spawn("owner", slow=2)
    other = None
    try:
        running = eventually(
            lambda: cluster.observer.get(job),
            "submission 1 running",
            holds=lambda s: s.state is State.RUNNING,
        )
        first = running.submissions[0].canonical
        assert first is not None
        backend.env.preempt(first)
        # The owner authorizes submission 2, commits its attempt and makes the Start call...
        assert owner.stdout is not None
        assert owner.stdout.readline().startswith("started")
        view = store.read(job)
        assert any(isinstance(e, ev.AttemptStarted) and e.submission == 2 for e in view.events)
        assert not any(isinstance(e, ev.AttemptReplied) and e.submission == 2 for e in view.events)
        # ...and dies before recording the reply.
        owner.send_signal(signal.SIGKILL)
        owner.communicate(timeout=10)
        other = spawn("other", slow=0)
        running = eventually(
            lambda: cluster.observer.get(job),
            "submission 2 running under the other supervisor",
            holds=lambda s: s.state is State.RUNNING and len(s.submissions) == 2,
        )
        second = running.submissions[1].canonical
        assert second is not None
        backend.env.complete(second)
        _, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
    finally:
        for p in (owner, other):
            if p is not None and p.poll() is None:
                p.kill()
            if p is not None:
                p.communicate()

    status = cluster.observer.get(job)
    assert status.settled and status.state is State.SUCCEEDED
    assert status.plan is not None
    assert len(status.submissions) == 2 and status.plan.rules[0].firings == 1
    # The object whose reply was lost was found by its name and became canonical: no duplicate.
    assert status.submissions[1].attempts == 1 and not status.submissions[1].retired
    assert not backend.env.history.overlapping_live(job)
    decisions = [e for e in store.read(job).events if e.decision]
    assert {e.by.id for e in decisions} == {"owner", "other"}
    assert [e.token for e in decisions] == sorted(e.token for e in decisions)
    store.close()
    server.stop()
