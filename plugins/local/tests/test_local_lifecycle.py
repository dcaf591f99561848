"""Start, the gate, open, find and stop: the gated launch on real processes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from jobdispatch.errors import NotFound, OutcomeUnknown, Rejected, Unsupported
from jobdispatch.spi import ObjectRef, StartRequest
from jobdispatch.types import CauseKind, JobSpec, ObjectState, Provenance
from jobdispatch_local import LocalBackend
from jobdispatch_local.testing import Puppets, make_backend, start_running, wait_file, wait_for

Request = Callable[..., StartRequest]


def running(backend: LocalBackend, ref: ObjectRef) -> None:
    wait_for(backend, ref, lambda o: o.state is ObjectState.RUNNING, "running")


def test_start_is_gated_and_durable(backend: LocalBackend, request_for: Request) -> None:
    req = request_for()
    ref = backend.start(req)
    assert ref.id == req.name
    # Another process's view (a fresh backend on the same directory) sees it at once.
    other = make_backend(backend.state_dir)
    [obs] = other.find(req.job).objects
    assert obs.state is ObjectState.GATED
    assert obs.identity == (req.job, 1, 1)
    assert obs.executions == ()
    time.sleep(0.3)
    assert backend.inspect(ref).state is ObjectState.GATED, "nothing runs before open"


def test_start_of_a_name_taken_is_rejected(backend: LocalBackend, request_for: Request) -> None:
    req = request_for()
    backend.start(req)
    with pytest.raises(Rejected, match="exists already"):
        backend.start(req)


def test_a_lost_reply_is_found_by_name(backend: LocalBackend, request_for: Request) -> None:
    req = request_for()
    backend.lose_next_start_reply()
    with pytest.raises(OutcomeUnknown):
        backend.start(req)
    [obs] = backend.find(req.job).objects
    assert obs.name == req.name and obs.state is ObjectState.GATED


def test_an_image_is_unsupported(backend: LocalBackend, request_for: Request) -> None:
    with pytest.raises(Unsupported, match="image"):
        backend.start(request_for(JobSpec(command=("true",), image="ubuntu:24.04")))


def test_open_runs_n_by_p_ranks_with_their_environment(
    backend: LocalBackend, request_for: Request, puppets: Puppets
) -> None:
    req = request_for(nodes=2, procs_per_node=2, env={"MY_SETTING": "x"})
    ref = backend.start(req)
    backend.open(ref)
    running(backend, ref)
    envs = [json.loads(wait_file(puppets.folder / f"{ref.id}.{r}.env")) for r in range(4)]
    ports = {e["MASTER_PORT"] for e in envs}
    assert len(ports) == 1 and next(iter(ports)).isdigit()
    for r, env in enumerate(envs):
        assert env["RANK"] == str(r)
        assert env["LOCAL_RANK"] == str(r % 2)
        assert env["NODE_RANK"] == str(r // 2)
        assert env["WORLD_SIZE"] == "4"
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert env["JOBDISPATCH_JOB"] == req.job
        assert env["JOBDISPATCH_SUBMISSION"] == "1"
        assert env["JOBDISPATCH_EXECUTION"] == "0"
        assert env["MY_SETTING"] == "x"
    obs = backend.inspect(ref)
    assert obs.executions[0].nodes == ("local-0", "local-1")


def test_open_is_idempotent(backend: LocalBackend, request_for: Request) -> None:
    ref = backend.start(request_for())
    backend.open(ref)
    backend.open(ref)
    running(backend, ref)
    backend.open(ref)
    obs = backend.inspect(ref)
    assert len(obs.executions) == 1
    assert len(list(backend.object_dir(ref).glob("runner.json"))) == 1


def test_the_runner_outlives_its_opener(tmp_path: Path, request_for: Request) -> None:
    """Open from a process that exits at once: the object runs on and completes."""
    import subprocess
    import sys

    state = tmp_path / "state"
    backend = make_backend(state)
    req = request_for(JobSpec(command=("sh", "-c", "sleep 0.5; echo done")))
    ref = backend.start(req)
    code = (
        "from jobdispatch.spi import ObjectRef; from jobdispatch_local import LocalBackend; "
        f"LocalBackend.from_config({{'state_dir': {str(state)!r}}}).open(ObjectRef({ref.id!r}))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    obs = wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    assert obs.executions[0].cause is not None
    assert obs.executions[0].cause.kind is CauseKind.NONE
    assert backend.output(ref).read() == b"done\n"


def test_stop_running_is_cancelled_by_an_actor(backend: LocalBackend, request_for: Request) -> None:
    ref = start_running(backend, request_for())
    backend.stop(ref, "cancelled by human:ops")
    obs = backend.inspect(ref)  # stop returns once the end is recorded
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[0].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.CANCELLED, Provenance.ACTOR)
    assert cause.detail == "cancelled by human:ops"


def test_stop_is_idempotent_and_touches_one_object(
    backend: LocalBackend, request_for: Request
) -> None:
    a, b = backend.start(request_for()), backend.start(request_for())
    backend.open(a)
    backend.open(b)
    running(backend, a)
    running(backend, b)
    backend.stop(a, "one")
    backend.stop(a, "two")
    assert backend.inspect(a).state is ObjectState.ENDED
    assert backend.inspect(a).executions[0].cause.detail == "one"  # type: ignore[union-attr]
    assert backend.inspect(b).state is ObjectState.RUNNING
    backend.stop(ObjectRef("jd-nosuchjob-1-1"), "gone already is success")


def test_stop_gated_never_runs(backend: LocalBackend, request_for: Request) -> None:
    ref = backend.start(request_for())
    backend.stop(ref, "a retired duplicate")
    backend.open(ref)
    time.sleep(0.3)
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.ENDED
    assert obs.executions == ()
    assert "stopped before it ran" in obs.detail


def test_inspect_unknown_is_not_found(backend: LocalBackend) -> None:
    for name in ("jd-nosuchjob-1-1", "../etc", "not-a-discovery-name"):
        with pytest.raises(NotFound):
            backend.inspect(ObjectRef(name))


def test_find_many_agrees_with_find(backend: LocalBackend, request_for: Request) -> None:
    one, two = request_for(), request_for()
    backend.start(one)
    backend.start(two)
    backend.start(
        StartRequest(job=one.job, submission=2, attempt=1, spec=one.spec, env=dict(one.env))
    )
    many = backend.find_many([one.job, two.job, "nothing"])
    assert many[one.job].objects == backend.find(one.job).objects
    assert len(many[one.job].objects) == 2
    assert many[two.job].objects == backend.find(two.job).objects
    assert many["nothing"].objects == ()
    gated = backend.find_many([one.job], [ObjectState.RUNNING])
    assert gated[one.job].objects == ()


def test_a_cause_recorded_with_an_actor_id_now_refused_still_reads() -> None:
    # Local state files written before actor ids were checked may say "human:" (an empty id);
    # what was recorded is history, so it is observed as written instead of raising.
    from jobdispatch.types import ActorKind
    from jobdispatch_local.observe import to_cause

    cause = to_cause({"kind": "preempted", "provenance": "actor", "actor": "human:"})
    assert cause is not None and cause.actor is not None
    assert (cause.actor.kind, cause.actor.id) == (ActorKind.HUMAN, "")
    odd = to_cause({"kind": "preempted", "actor": "a\nb"})
    assert odd is not None and odd.actor is not None and odd.actor.id == "a\nb"
