"""The memory adapter's object lifecycle through the public API: gate, open, find, inspect, stop."""

from __future__ import annotations

import pytest
from jobdispatch import (
    CauseKind,
    JobSpec,
    ManualClock,
    NotFound,
    ObjectRef,
    ObjectState,
    OutcomeUnknown,
    Provenance,
    Rejected,
    StartRequest,
    Unsupported,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory import history as h

SPEC = JobSpec(command=["torchrun", "train.py"], nodes=2)


def request(job: str = "abc", n: int = 1, k: int = 1, spec: JobSpec = SPEC) -> StartRequest:
    return StartRequest(job=job, submission=n, attempt=k, spec=spec)


@pytest.fixture(params=list(Shape), ids=str)
def backend(request: pytest.FixtureRequest) -> MemoryBackend:
    return MemoryBackend(shape=request.param, clock=ManualClock())


def test_name_and_refs_follow_the_shape() -> None:
    slurm = MemoryBackend(shape=Shape.SLURM)
    kube = MemoryBackend(shape=Shape.KUBEFLOW)
    assert slurm.name == kube.name == "memory"
    assert [slurm.start(request(k=k)).id for k in (1, 2)] == ["1001", "1002"]
    assert kube.start(request()).id == "default/jd-abc-1-1"


def test_start_creates_one_gated_object_under_its_discovery_name(backend: MemoryBackend) -> None:
    ref = backend.start(request())
    obs = backend.inspect(ref)
    assert (obs.name, obs.state, obs.executions) == ("jd-abc-1-1", ObjectState.GATED, ())
    assert obs.identity == ("abc", 1, 1)
    assert [o.ref for o in backend.find("abc").objects] == [ref]


def test_a_gated_object_never_runs_before_open(backend: MemoryBackend) -> None:
    ref = backend.start(request())
    with pytest.raises(Exception, match="not pending"):
        backend.env.run(ref)
    assert backend.inspect(ref).state is ObjectState.GATED
    backend.open(ref)
    assert backend.env.run(ref) == 0
    assert backend.inspect(ref).state is ObjectState.RUNNING


def test_auto_run_starts_execution_zero_on_open() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=ManualClock())
    ref = backend.start(request())
    assert backend.inspect(ref).state is ObjectState.GATED
    backend.open(ref)
    latest = backend.inspect(ref).latest
    assert latest is not None
    assert (latest.index, latest.state, latest.nodes) == (
        0,
        ObjectState.RUNNING,
        ("node1", "node2"),
    )


def test_open_is_idempotent_and_a_no_op_once_ended(backend: MemoryBackend) -> None:
    ref = backend.start(request())
    backend.open(ref)
    backend.open(ref)
    assert backend.inspect(ref).state is ObjectState.PENDING
    backend.env.run(ref)
    backend.open(ref)
    assert len(backend.inspect(ref).executions) == 1
    backend.stop(ref, "done")
    backend.open(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED
    lifted = [e.lifted for e in backend.env.history.select(h.Opened, ref=ref)]
    assert lifted == [True, False, False, False]


def test_open_of_an_unknown_object_is_not_found(backend: MemoryBackend) -> None:
    with pytest.raises(NotFound):
        backend.open(ObjectRef("nope"))
    with pytest.raises(NotFound):
        backend.inspect(ObjectRef("nope"))


def test_stop_touches_one_object_only(backend: MemoryBackend) -> None:
    a, b = backend.start(request(k=1)), backend.start(request(k=2))
    for ref in (a, b):
        backend.open(ref)
        backend.env.run(ref)
    backend.stop(a, "retire")
    obs_a, obs_b = backend.inspect(a), backend.inspect(b)
    assert obs_a.state is ObjectState.ENDED
    assert obs_a.executions[0].cause is not None
    assert obs_a.executions[0].cause.kind is CauseKind.CANCELLED
    assert obs_a.executions[0].cause.provenance is Provenance.ACTOR
    assert obs_b.state is ObjectState.RUNNING


def test_stop_is_idempotent_and_gone_is_success(backend: MemoryBackend) -> None:
    ref = backend.start(request())
    backend.stop(ref, "never opened")
    backend.stop(ref, "again")
    backend.stop(ObjectRef("never-existed"), "gone")
    obs = backend.inspect(ref)
    assert (obs.state, obs.executions) == (ObjectState.ENDED, ())
    backend.open(ref)
    assert backend.inspect(ref).state is ObjectState.ENDED


def test_find_returns_the_objects_of_lost_start_replies(backend: MemoryBackend) -> None:
    backend.env.lose_next_start_reply()
    with pytest.raises(OutcomeUnknown):
        backend.start(request(k=1))
    ref = backend.start(request(k=2))
    backend.start(request(job="other"))
    found = backend.find("abc")
    assert [o.name for o in found.objects] == ["jd-abc-1-1", "jd-abc-1-2"]
    assert found.get(ref) is not None
    assert found.complete
    assert len(backend.env.history.select(h.StartReplyLost)) == 1


def test_a_refused_start_creates_nothing(backend: MemoryBackend) -> None:
    backend.env.refuse_next_start("no quota")
    with pytest.raises(Rejected, match="no quota"):
        backend.start(request())
    assert backend.find("abc").objects == ()
    backend.start(request())
    assert len(backend.find("abc").objects) == 1


def test_a_dropped_observation_and_a_late_object(backend: MemoryBackend) -> None:
    backend.start(request(k=1))
    backend.env.drop_next_observation("abc")
    assert backend.find("abc").objects == ()
    assert len(backend.find("abc").objects) == 1
    backend.env.delay_next_object()
    backend.start(request(k=2))
    assert len(backend.find("abc").objects) == 1
    assert len(backend.find("abc").objects) == 2


def test_find_many_agrees_with_find_and_filters_states(backend: MemoryBackend) -> None:
    a = backend.start(request(job="aaa"))
    backend.start(request(job="bbb"))
    backend.open(a)
    many = backend.find_many(["aaa", "bbb", "ccc"])
    for job in ("aaa", "bbb", "ccc"):
        assert many[job].objects == backend.find(job).objects
    gated = backend.find_many(["aaa", "bbb"], [ObjectState.GATED])
    assert (len(gated["aaa"].objects), len(gated["bbb"].objects)) == (0, 1)
    assert backend.env.calls["find_many"] == 2


def test_unreachable_and_unauthorized(backend: MemoryBackend) -> None:
    from jobdispatch import Unauthorized, Unreachable

    backend.env.set_reachable(False)
    with pytest.raises(Unreachable):
        backend.find("abc")
    backend.env.set_reachable(True)
    backend.env.set_authorized(False)
    with pytest.raises(Unauthorized):
        backend.start(request())
    backend.env.set_authorized(True)
    assert backend.find("abc").objects == ()


def test_a_spec_needing_a_capability_answered_no_is_refused() -> None:
    slurm = MemoryBackend(shape=Shape.SLURM)
    with pytest.raises(Unsupported, match="container-image"):
        slurm.start(request(spec=JobSpec(command=["x"], image="pytorch:2")))
    kube = MemoryBackend(shape=Shape.KUBEFLOW)
    kube.start(request(spec=JobSpec(command=["x"], image="pytorch:2")))
    with pytest.raises(Unsupported, match="output-path"):
        kube.start(request(k=2, spec=JobSpec(command=["x"], output="/logs/%j")))


def test_kubeflow_refuses_a_second_object_of_the_same_name() -> None:
    kube = MemoryBackend(shape=Shape.KUBEFLOW)
    kube.start(request())
    with pytest.raises(Rejected, match="exists already"):
        kube.start(request())


def test_no_two_objects_live_at_once_is_checkable_on_the_history() -> None:
    clock = ManualClock()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    a = backend.start(request(n=1))
    backend.open(a)
    clock.advance(10)
    backend.env.preempt(a)
    b = backend.start(request(n=2))
    backend.open(b)
    assert backend.env.history.overlapping_live("abc") == []
    c = backend.start(request(n=3))
    clock.advance(1)
    backend.open(c)
    pairs = backend.env.history.overlapping_live("abc")
    assert [(x.ref, y.ref) for x, y in pairs] == [(b, c)]


def test_close_refuses_further_calls() -> None:
    from jobdispatch import Unavailable

    backend = MemoryBackend()
    backend.close()
    with pytest.raises(Unavailable):
        backend.find("abc")
