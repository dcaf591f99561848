"""Holds by instance, requeue as the next execution, and output read and followed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from jobdispatch.errors import Invalid, NotFound, Rejected
from jobdispatch.spi import ObjectRef, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import Actor, CallMeta, CauseKind, HoldMeta, JobSpec, ObjectState
from jobdispatch_local import LocalBackend
from jobdispatch_local.testing import Puppets, start_running, wait_file, wait_for

Request = Callable[..., StartRequest]
ME = Actor.human("ops")


def soon() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=30)


def hold(instance: int, deadline: datetime | None = None) -> HoldMeta:
    return HoldMeta(instance=instance, deadline=deadline or soon(), by=ME)


def test_a_held_object_does_not_start_until_its_instance_is_released(
    backend: LocalBackend, request_for: Request
) -> None:
    ref = backend.start(request_for())
    backend.hold(ref, hold(1))
    assert backend.inspect(ref).state is ObjectState.HELD
    backend.open(ref)
    time.sleep(0.4)
    obs = backend.inspect(ref)
    assert (obs.state, obs.executions, obs.hold_instance) == (ObjectState.HELD, (), 1)
    backend.hold(ref, hold(2))  # a new instance replaces the standing one
    backend.release(ref, hold(1))  # not the standing instance: no effect
    time.sleep(0.2)
    assert backend.inspect(ref).state is ObjectState.HELD
    backend.release(ref, hold(2))
    obs = wait_for(backend, ref, lambda o: o.state is ObjectState.RUNNING, "running")
    assert obs.hold_instance is None


def test_hold_refuses_a_running_object_and_a_passed_deadline(
    backend: LocalBackend, request_for: Request
) -> None:
    ref = backend.start(request_for())
    past = datetime.now(UTC) - timedelta(seconds=1)
    with pytest.raises(Rejected, match="deadline"):
        backend.hold(ref, hold(1, past))
    with pytest.raises(Rejected, match="deadline"):
        backend.release(ref, hold(1, past))
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.RUNNING, "running")
    with pytest.raises(Rejected, match="running"):
        backend.hold(ref, hold(1))


def test_requeue_ends_the_running_execution_and_reruns_as_the_next(
    backend: LocalBackend, request_for: Request, puppets: Puppets
) -> None:
    ref = start_running(backend, request_for())
    meta = CallMeta(deadline=soon(), by=ME, reason="a person asked")
    backend.requeue(ref, meta)
    obs = wait_for(
        backend,
        ref,
        lambda o: len(o.executions) == 2 and o.state is ObjectState.RUNNING,
        "running its second execution",
    )
    first = obs.executions[0]
    assert first.cause is not None
    assert (first.cause.kind, first.cause.actor) == (CauseKind.REQUEUED, ME)
    assert obs.executions[1].index == 1
    env_file = puppets.folder / f"{ref.id}.0.env"
    wait_file(env_file)
    eventually(
        lambda: json.loads(env_file.read_text()),
        "rank 0 of the second execution to leave its environment",
        holds=lambda env: env["JOBDISPATCH_EXECUTION"] == "1",
    )
    first_end, second_start = first.ended_at, obs.executions[1].started_at
    assert first_end is not None and second_start is not None and first_end <= second_start


def test_requeue_of_an_ended_object_reruns_it(backend: LocalBackend, request_for: Request) -> None:
    ref = backend.start(request_for(JobSpec(command=("sh", "-c", "exit 4"))))
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    backend.requeue(ref, CallMeta(deadline=soon(), by=ME))
    obs = wait_for(
        backend,
        ref,
        lambda o: o.state is ObjectState.ENDED and len(o.executions) == 2,
        "ended twice",
    )
    assert [e.index for e in obs.executions] == [0, 1]
    assert all(e.cause and e.cause.exit_code == 4 for e in obs.executions)


def test_requeue_of_a_gated_object_has_no_effect(
    backend: LocalBackend, request_for: Request
) -> None:
    ref = backend.start(request_for())
    backend.requeue(ref, CallMeta(deadline=soon()))
    assert backend.inspect(ref).state is ObjectState.GATED
    with pytest.raises(Rejected, match="deadline"):
        backend.requeue(ref, CallMeta(deadline=datetime.now(UTC) - timedelta(seconds=1)))


def test_output_is_read_per_rank_and_stream(backend: LocalBackend, request_for: Request) -> None:
    spec = JobSpec(
        command=("sh", "-c", 'echo "out $RANK"; echo "err $RANK" >&2'), nodes=1, procs_per_node=2
    )
    ref = backend.start(request_for(spec))
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    assert backend.output(ref, rank=1).read() == b"out 1\n"
    assert backend.output(ref, stream="stderr", rank=0).read() == b"err 0\n"
    with pytest.raises(Invalid):
        backend.output(ref, stream="stdlog")
    with pytest.raises(NotFound):
        backend.output(ref, rank=2)


def test_output_is_followed_until_the_object_ends(
    backend: LocalBackend, request_for: Request, puppets: Puppets
) -> None:
    ref = start_running(backend, request_for())
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(backend.output(ref, follow=True).read()))
    reader.start()
    puppets.tell(ref, "write stdout aGVsbG8K")  # hello
    time.sleep(0.3)
    assert reader.is_alive(), "following waits while the object runs"
    puppets.tell(ref, "exit 0")
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert got == [b"hello\n"]


def test_output_goes_where_the_spec_says(
    backend: LocalBackend, request_for: Request, tmp_path: object
) -> None:
    from pathlib import Path

    where = Path(str(tmp_path)) / "logs"
    ref = backend.start(request_for(JobSpec(command=("echo", "hi"), output=str(where))))
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    assert (where / ref.id / "rank-0.out").read_bytes() == b"hi\n"
    assert backend.output(ref).read() == b"hi\n"


def test_unknown_refs_are_not_found(backend: LocalBackend) -> None:
    ghost = ObjectRef("jd-ghost-1-1")
    with pytest.raises(NotFound):
        backend.hold(ghost, hold(1))
    with pytest.raises(NotFound):
        backend.open(ghost)
    with pytest.raises(NotFound):
        backend.output(ghost)
