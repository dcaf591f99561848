"""Every way an execution ends on this machine, with its typed cause."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from jobdispatch.errors import Invalid
from jobdispatch.spi import ObjectObs, ObjectRef, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import Actor, Cause, CauseKind, JobSpec, ObjectState, Provenance
from jobdispatch_local import LocalBackend, cgroups, procs
from jobdispatch_local.testing import Puppets, make_backend, wait_for

Request = Callable[..., StartRequest]


def run(backend: LocalBackend, req: StartRequest) -> ObjectRef:
    ref = backend.start(req)
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is not ObjectState.GATED, "opened")
    return ref


def ended(backend: LocalBackend, ref: ObjectRef) -> tuple[ObjectObs, Cause]:
    obs = wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    cause = obs.executions[-1].cause
    assert cause is not None
    return obs, cause


def started(backend: LocalBackend, ref: ObjectRef) -> None:
    wait_for(backend, ref, lambda o: o.state is ObjectState.RUNNING, "running")


def test_success(backend: LocalBackend, request_for: Request) -> None:
    ref = run(backend, request_for(JobSpec(command=("true",), nodes=2, procs_per_node=2)))
    obs, cause = ended(backend, ref)
    assert (cause.kind, cause.exit_code) == (CauseKind.NONE, 0)
    [execution] = obs.executions
    assert execution.started_at is not None and execution.ended_at is not None
    assert execution.ended_at >= execution.started_at


def test_a_failing_rank_ends_the_execution_with_its_code(
    backend: LocalBackend, request_for: Request, puppets: Puppets
) -> None:
    ref = run(backend, request_for(nodes=2))
    started(backend, ref)
    puppets.tell(ref, "exit 3", rank=1)
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION)
    assert cause.exit_code == 3
    assert cause.detail == "rank 1 exited 3"
    record = json.loads((backend.object_dir(ref) / "execution-0.json").read_text())
    rank0 = record["ranks"][0]
    # The puppet turns SIGTERM into exit 143, as many launchers do.
    assert (rank0["exit_code"], rank0["signal"]) in ((143, None), (None, 15)), rank0


def test_a_signal_kills_a_rank(
    backend: LocalBackend, request_for: Request, puppets: Puppets
) -> None:
    ref = run(backend, request_for())
    started(backend, ref)
    puppets.tell(ref, f"signal {int(signal.SIGSEGV)}")
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION)
    assert (cause.signal, cause.exit_code) == (signal.SIGSEGV, 128 + signal.SIGSEGV)
    assert "SIGSEGV" in cause.detail


def test_the_time_limit_is_enforced(backend: LocalBackend, request_for: Request) -> None:
    spec = JobSpec(command=("sleep", "30"), time_limit=timedelta(seconds=0.5))
    began = time.monotonic()
    ref = run(backend, request_for(spec))
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.TIME_LIMIT, Provenance.SCHEDULER)
    assert time.monotonic() - began < 10


def test_sigterm_is_followed_by_sigkill_after_the_grace_period(
    backend: LocalBackend, request_for: Request, tmp_path: Path
) -> None:
    # The rank says when it ignores TERM: a TERM sent between the rank's start and its trap
    # would end it by TERM, which is not what this test is about (it did, on a loaded CI).
    ready = tmp_path / "ignoring-term"
    stubborn = JobSpec(command=("sh", "-c", f"trap '' TERM; touch {ready}; sleep 30"))
    ref = run(backend, request_for(stubborn))
    started(backend, ref)
    eventually(ready.exists, "the rank to ignore TERM")
    backend.set_time_limit(ref, 0.001)
    _, cause = ended(backend, ref)
    assert cause.kind is CauseKind.TIME_LIMIT
    assert '"signal": 9' in (backend.object_dir(ref) / "execution-0.json").read_text()


def test_preemption_is_the_schedulers(backend: LocalBackend, request_for: Request) -> None:
    ref = run(backend, request_for())
    started(backend, ref)
    backend.preempt(ref, by=Actor.human("ops"))
    obs = backend.inspect(ref)  # preempt waits for the end by default
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[0].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.SCHEDULER)
    with pytest.raises(Invalid, match="not running"):
        backend.preempt(ref)


def test_a_dead_runner_is_a_lost_node_and_takes_its_ranks(
    backend: LocalBackend, request_for: Request
) -> None:
    ref = run(backend, request_for(nodes=2))
    started(backend, ref)
    ranks = [
        r["process"]
        for e in backend.object_dir(ref).glob("execution-*.json")
        for r in __import__("json").loads(e.read_text())["ranks"]
    ]
    assert backend.kill_runner(ref)
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.NODE_LOST, Provenance.SCHEDULER)
    eventually(
        lambda: [r for r in ranks if procs.alive(r)],
        "the ranks to die with their runner",
        holds=lambda alive: not alive,
    )
    # The end was recorded once, and every later look shows the same.
    assert backend.inspect(ref) == backend.inspect(ref)


def test_a_program_that_cannot_start_is_a_launch_failure(
    backend: LocalBackend, request_for: Request, tmp_path: Path
) -> None:
    ref = run(backend, request_for(JobSpec(command=("/no/such/program",))))
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)
    assert "/no/such/program" in cause.detail
    missing = JobSpec(command=("true",), working_dir=str(tmp_path / "missing"))
    ref = run(backend, request_for(missing))
    _, cause = ended(backend, ref)
    assert cause.kind is CauseKind.LAUNCH_FAILED
    assert "does not exist" in cause.detail


def test_a_file_that_is_not_executable_is_a_launch_failure(
    backend: LocalBackend, request_for: Request, tmp_path: Path
) -> None:
    # Issue 14.6: what a shell would exit 126 for is the launch's failure, not the program's.
    plain = tmp_path / "train.py"
    plain.write_text("print('never')\n")
    ref = run(backend, request_for(JobSpec(command=(str(plain),), nodes=2)))
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)
    assert "Permission denied" in cause.detail and cause.exit_code is None


@pytest.mark.parametrize("status", [126, 127])
def test_a_program_that_exits_126_or_127_itself_is_a_non_zero_exit(
    backend: LocalBackend, request_for: Request, status: int
) -> None:
    ref = run(backend, request_for(JobSpec(command=("sh", "-c", f"exit {status}"))))
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION)
    assert cause.exit_code == status


_MEMORY, _WHY = cgroups.probe()


@pytest.mark.cgroups
@pytest.mark.skipif(_MEMORY is None, reason=f"no writable memory controller: {_WHY}")
def test_out_of_memory_under_a_cgroup_limit(
    state_dir: Path, request_for: Request, puppets: Puppets
) -> None:
    backend = make_backend(state_dir, memory_limit="48M")
    assert str(backend.memory_support().answer) == "yes"
    ref = run(backend, request_for(nodes=2))
    started(backend, ref)
    puppets.tell(ref, "oom", rank=1)
    _, cause = ended(backend, ref)
    assert (cause.kind, cause.provenance) == (CauseKind.OUT_OF_MEMORY, Provenance.APPLICATION)
    assert cause.signal == signal.SIGKILL
    assert "rank 1" in cause.detail


def test_memory_support_is_honest_without_a_limit_or_controller(state_dir: Path) -> None:
    assert str(make_backend(state_dir).memory_support().answer) == "no"
    off = make_backend(state_dir, memory_limit="1G", cgroups="off")
    support = off.memory_support()
    assert str(support.answer) == "no"
    assert "turned off" in support.detail
