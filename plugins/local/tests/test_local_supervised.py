"""The local adapter under the supervisor: recovery by resubmit and by requeue, end to end in
one process, and its registration and configuration."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import jobdispatch
import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.errors import ValidationError
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.spi import ObjectRef
from jobdispatch.status import Status
from jobdispatch.testing import eventually
from jobdispatch.types import Enforcer, StallRule, Tristate
from jobdispatch_local import LocalBackend, Settings
from jobdispatch_local.testing import Puppets
from jobdispatch_supervise import Supervisor

ME = Actor.human("ops")


def wait_status(cluster: jobdispatch.Cluster, job: str, ok: Callable[[Status], bool]) -> Status:
    return eventually(lambda: cluster.observer.get(job), f"job {job}'s status to hold", holds=ok)


def supervise(backend: LocalBackend, store: MemoryRecords, job: str) -> threading.Thread:
    supervisor = Supervisor(backend, store, poll=0.05)
    thread = threading.Thread(target=supervisor.run, args=(job,), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("action", [Action.RESUBMIT, Action.REQUEUE])
def test_a_preempted_job_is_recovered_and_succeeds(
    backend: LocalBackend, puppets: Puppets, action: Action
) -> None:
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    spec = JobSpec(
        name="finetune",
        command=puppets.command(),
        nodes=2,
        recovery=RecoveryPolicy(rules=[Rule(on=[CauseKind.PREEMPTED], action=action, budget=2)]),
    )
    plan = cluster.operator.submit(spec, by=ME, supervised=True)
    assert plan.rules[0].enforcer is Enforcer.SUPERVISOR
    thread = supervise(backend, store, plan.job or "")
    job = plan.job or ""
    status = wait_status(cluster, job, lambda s: s.state is State.RUNNING)
    first = status.submissions[0].canonical
    assert first is not None
    backend.preempt(first)
    if action is Action.RESUBMIT:
        status = wait_status(
            cluster, job, lambda s: s.state is State.RUNNING and len(s.submissions) == 2
        )
        current = status.submissions[1].canonical
    else:
        status = wait_status(
            cluster,
            job,
            lambda s: s.state is State.RUNNING and len(s.submissions[0].executions) == 2,
        )
        current = first
    assert status.plan is not None and status.plan.rules[0].firings == 1
    assert current is not None
    puppets.tell(current, "exit 0")
    thread.join(timeout=20)
    assert not thread.is_alive()
    final = cluster.observer.get(job)
    assert (final.state, final.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    assert final.settled


def test_cancel_stops_the_running_object(backend: LocalBackend, puppets: Puppets) -> None:
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    plan = cluster.operator.submit(JobSpec(command=puppets.command()), by=ME, supervised=True)
    job = plan.job or ""
    thread = supervise(backend, store, job)
    status = wait_status(cluster, job, lambda s: s.state is State.RUNNING)
    receipt = cluster.operator.cancel(job, by=ME, reason="enough")
    assert receipt.committed and receipt.cleanup_complete
    thread.join(timeout=20)
    obs = backend.inspect(status.submissions[0].canonical or ObjectRef(""))
    assert obs.executions[0].cause is not None
    assert obs.executions[0].cause.kind is CauseKind.CANCELLED


def test_registered_through_the_plugin_manager(state_dir: Path) -> None:
    from jobdispatch import plugins

    loaded = plugins.load()
    entry = loaded.registry("adapter").get("local")
    assert "real processes" in entry.summary
    backend = jobdispatch.new_backend("local", {"state_dir": str(state_dir)})
    assert isinstance(backend, LocalBackend)
    with pytest.raises(ValidationError, match="gracee"):
        jobdispatch.new_backend("local", {"state_dir": str(state_dir), "gracee": 1})


def test_config_is_checked_and_defaults_to_xdg_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    settings = Settings.from_config({})
    assert settings.state_dir == tmp_path / "jobdispatch" / "local"
    assert Settings.from_config({"memory_limit": "1.5G"}).memory_limit == 3 << 29
    assert (
        Settings.from_config({"memory_limit": 4096}).memory_limit == 4096 << 20
    )  # MiB, as job files
    with pytest.raises(ValidationError) as err:
        Settings.from_config({"memory_limit": "lots", "grace": -1})
    assert set(err.value.paths) == {"grace", "memory_limit"}


def test_capabilities_and_rules(backend: LocalBackend) -> None:
    caps = backend.capabilities()
    assert set(caps) == set(jobdispatch.Capability)
    assert caps[jobdispatch.Capability.CONTAINER_IMAGE].answer is Tristate.NO
    assert caps[jobdispatch.Capability.HOLD].answer is Tristate.YES
    policy = RecoveryPolicy(
        rules=[
            Rule(on=[CauseKind.OUT_OF_MEMORY], action=Action.RESUBMIT, budget=1),
            Rule(on=[CauseKind.PREEMPTED], action=Action.RESTART, budget=1),
        ]
    )
    oom, restart = backend.rules(JobSpec(command=("true",)), policy)
    assert oom.native.answer is Tristate.NO and oom.perform.answer is Tristate.YES
    assert "out-of-memory is never reported here" in oom.perform.detail
    assert restart.perform.answer is Tristate.NO


#: A job that writes a line a tenth of a second for a second and then, in its first submission,
#: hangs writing nothing; in a later one it exits 0. It marks no progress and names no
#: checkpoint root: only its output's growth shows it alive.
_WRITES_THEN_HANGS = (
    'for i in 1 2 3 4 5 6 7 8 9 10; do echo "step $i"; sleep 0.1; done; '
    'if [ "$JOBDISPATCH_SUBMISSION" = 1 ]; then exec sleep 600; fi'
)


def test_output_that_stops_growing_is_named_stalled_and_the_job_resubmitted(
    backend: LocalBackend,
) -> None:
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    spec = JobSpec(
        name="quiet",
        command=["sh", "-c", _WRITES_THEN_HANGS],
        stall=StallRule(after=timedelta(seconds=3), startup_grace=timedelta(seconds=30)),
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    plan = cluster.operator.submit(spec, by=ME, supervised=True)
    assert plan.stall is not None and plan.stall.enforcer is Enforcer.SUPERVISOR
    assert plan.stall.sources == ("output growth",)
    job = plan.job or ""
    thread = supervise(backend, store, job)
    final = wait_status(cluster, job, lambda s: s.settled)
    thread.join(timeout=20)
    assert (final.state, final.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    first = final.submissions[0].executions[-1]
    assert first.cause is not None and first.cause.kind is CauseKind.STALLED
    assert "(output, submission 1)" in first.cause.detail
    # Judged on the output read in the poll; what the record keeps of it is output growth
    # (none yet when the run stalled before the end of the job's first 5-minute recording
    # window, which its phase places anywhere in the first five minutes).
    seen = [e for e in store.read(job).events if isinstance(e, ev.ProgressSeen)]
    assert all(e.origin is ev.Origin.OUTPUT for e in seen)
