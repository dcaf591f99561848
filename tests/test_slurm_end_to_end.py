"""A 2-node job preempted on the real Slurm cluster is recovered by the supervisor.

The job resubmits on preemption (budget 2). Submission 1 runs on node1 and node2 until a job
in the ``high`` partition takes node1 and Slurm preempts it; it was submitted ``--no-requeue``
(no native offer), so it ends PREEMPTED. The supervisor sees the cause, fires the rule, and
submission 2 runs and succeeds. Then the record and Slurm's own accounting must agree: each
submission's object has exactly the executions the record shows, with the same causes.
"""

from __future__ import annotations

import subprocess
import threading

import jobdispatch
import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch_slurm import Settings, SlurmBackend
from jobdispatch_slurm.parse import SACCT_FIELDS, SacctRow, parse_sacct
from jobdispatch_slurm.testing import (
    SlurmDriver,
    cancel_helpers,
    cluster_problem,
    require,
    resume_nodes,
    stop_quietly,
)
from jobdispatch_supervise import Supervisor

pytestmark = pytest.mark.slurm

#: Submission 1 waits to be preempted; any later submission works for 3 s and succeeds.
COMMAND = (
    "bash",
    "-c",
    'if [ "$JOBDISPATCH_SUBMISSION" = 1 ]; then sleep 600; else sleep 3; fi',
)


def sacct_rows(job_id: str) -> list[SacctRow]:
    """Slurm's own accounting of ``job_id``: one row per run (``-D``), times in UTC."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-D", "-X", "-j", job_id, "-o", ",".join(SACCT_FIELDS)],
        capture_output=True,
        text=True,
        env={"TZ": "UTC", "PATH": "/usr/bin:/bin:/usr/sbin"},
        check=True,
    ).stdout
    return parse_sacct(out)


def accounting(job_id: str) -> list[tuple[str, str]]:
    return [(r.state, ",".join(r.nodes)) for r in sacct_rows(job_id)]


def test_preempted_two_node_job_is_recovered_by_the_supervisor() -> None:
    require(cluster_problem())
    backend = SlurmBackend(Settings())
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    spec = JobSpec(
        name="e2e-preempted",
        command=COMMAND,
        nodes=2,
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)]
        ),
    )
    plan = cluster.operator.submit(spec, by=Actor.human("e2e"), supervised=True)
    job_id = job_of(plan)
    assert str(plan.rules[0].enforcer) == "supervisor"
    supervisor = Supervisor(backend, store, poll=2.0)  # the adapter's floor
    errors: list[BaseException | None] = []

    def supervise() -> None:
        try:
            supervisor.run(job_id)
            errors.append(None)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    runner = threading.Thread(target=supervise, daemon=True)
    runner.start()
    observer = cluster.observer
    driver = SlurmDriver(backend)
    try:
        first = eventually(
            lambda: observer.get(job_id),
            "submission 1 running on two nodes",
            holds=lambda s: (
                s.state is State.RUNNING
                and len(s.submissions) > 0
                and len(s.submissions[0].executions) > 0
                and len(s.submissions[0].executions[-1].nodes) == 2
            ),
            within=60,
            every=0.5,
        )
        victim = first.submissions[0].canonical
        assert victim is not None
        driver.preempt(victim)

        done = eventually(
            lambda: observer.get(job_id),
            "the job succeeding after recovery",
            holds=lambda s: s.state.terminal,
            within=150,
            every=0.5,
        )
        runner.join(timeout=60)
        assert not runner.is_alive(), "the supervisor did not return once the job settled"
        assert errors == [None], errors

        assert done.state is State.SUCCEEDED, done
        assert done.plan is not None and done.plan.rules[0].firings == 1
        assert [s.n for s in done.submissions] == [1, 2]
        one, two = done.submissions
        assert [(e.index, e.cause.kind) for e in one.executions if e.cause] == [
            (0, CauseKind.PREEMPTED)
        ]
        assert [(e.index, e.cause.kind) for e in two.executions if e.cause] == [(0, CauseKind.NONE)]
        # Slurm's accounting shows exactly these executions: one run each, on both nodes.
        assert one.canonical is not None and two.canonical is not None
        assert accounting(one.canonical.id) == [("PREEMPTED", "node1,node2")]
        assert accounting(two.canonical.id) == [("COMPLETED", "node1,node2")]
        assert [e.nodes for e in one.executions] == [("node1", "node2")]
    finally:
        supervisor.stop()
        runner.join(timeout=30)
        stop_quietly(backend, [o.ref for o in backend.find(job_id).objects])
        driver.cleanup()
        cancel_helpers()
        resume_nodes()
        backend.close()
