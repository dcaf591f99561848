"""The object lock never freezes anybody but the object's own changes.

A process may stop while it holds an object's lock (SIGSTOP, a GC pause, a frozen VM). Readers
then report that one object as unobservable (an incomplete Discovery, ``Unavailable``), never
as absent, and go on with every other object; a change raises ``Unavailable`` and changes
nothing. And since open, release and requeue now spawn the runner after letting the lock go,
the races that lock used to close are tried here: a spawn delayed past a stop, a hold, an end
or another open starts nothing it should not, and concurrent opens make one runner.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobdispatch.errors import Rejected, Unavailable
from jobdispatch.spi import ObjectRef, StartRequest
from jobdispatch.types import CallMeta, HoldMeta, JobSpec, ObjectState
from jobdispatch_local import LocalBackend
from jobdispatch_local import backend as local_backend
from jobdispatch_local.layout import ObjectDir
from jobdispatch_local.testing import make_backend, shut_down, wait_for

Request = Callable[..., StartRequest]

HOLD_AND_STOP = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from jobdispatch_local.files import locked

    with locked(Path(sys.argv[1]), shared=sys.argv[2] == "shared"):
        print("locked", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)  # paused while holding the lock
""")


@pytest.fixture
def freeze() -> Iterator[Callable[[ObjectDir], None]]:
    """Have another process take an object's lock exclusively and stop there."""
    holders: list[subprocess.Popen[str]] = []

    def hold(obj: ObjectDir) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_AND_STOP, str(obj.lock_file), "exclusive"],
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"

    yield hold
    for proc in holders:
        proc.kill()
        proc.communicate(timeout=10)


def _meta() -> CallMeta:
    return CallMeta(deadline=datetime.now(UTC) + timedelta(hours=1))


def test_a_frozen_lock_makes_one_object_unobservable_not_absent(
    backend: LocalBackend, request_for: Request, freeze: Callable[[ObjectDir], None]
) -> None:
    frozen, other = request_for(spec=JobSpec(command=("true",))), request_for()
    frozen_ref, other_ref = backend.start(frozen), backend.start(other)
    freeze(ObjectDir(backend.root / frozen_ref.id))

    blind = backend.find(frozen.job)
    assert not blind.complete and blind.objects == ()
    seen = backend.find(other.job)
    assert seen.complete and [o.ref for o in seen.objects] == [other_ref]
    many = backend.find_many([frozen.job, other.job])
    assert not many[frozen.job].complete and many[frozen.job].objects == ()
    assert many[other.job].complete and [o.ref for o in many[other.job].objects] == [other_ref]
    survey = backend.survey()
    assert survey.unobservable == (frozen_ref.id,)
    assert [o.ref for o in survey.objects] == [other_ref]
    with pytest.raises(Unavailable, match=frozen_ref.id):
        backend.inspect(frozen_ref)
    with pytest.raises(Unavailable, match=frozen_ref.id):
        backend.ceased(frozen_ref)
    assert backend.inspect(other_ref).state is ObjectState.GATED
    # The other object is still served in full: it opens and runs.
    backend.open(other_ref)
    wait_for(backend, other_ref, lambda o: o.state is ObjectState.RUNNING, "running")


def test_a_change_of_a_frozen_object_is_unavailable_and_changes_nothing(
    backend: LocalBackend, request_for: Request, freeze: Callable[[ObjectDir], None]
) -> None:
    ref = backend.start(request_for(spec=JobSpec(command=("true",))))
    obj = ObjectDir(backend.root / ref.id)
    before = (obj.path / "control.json").read_bytes()
    freeze(obj)
    hold = HoldMeta(instance=1, deadline=_meta().deadline)
    calls: dict[str, Callable[[], object]] = {
        "open": lambda: backend.open(ref),
        "stop": lambda: backend.stop(ref, "test"),
        "hold": lambda: backend.hold(ref, hold),
        "release": lambda: backend.release(ref, hold),
        "requeue": lambda: backend.requeue(ref, _meta()),
        "preempt": lambda: backend.preempt(ref, wait=False),
        "time limit": lambda: backend.set_time_limit(ref, 5.0),
        "reconcile": lambda: backend.reconcile(ref),
    }
    for what, call in calls.items():
        with pytest.raises(Unavailable, match="nothing was changed") as caught:
            call()
        assert ref.id in str(caught.value), what
    assert (obj.path / "control.json").read_bytes() == before
    assert obj.read_runner() is None and obj.executions() == []


def test_local_ps_names_an_unobservable_object(
    backend: LocalBackend,
    request_for: Request,
    freeze: Callable[[ObjectDir], None],
    tmp_path: Path,
) -> None:
    frozen_ref = backend.start(request_for())
    other_ref = backend.start(request_for())
    freeze(ObjectDir(backend.root / frozen_ref.id))
    config = tmp_path / "config" / "jobdispatch"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[clusters.local]\nadapter = "local"\nstate_dir = "{backend.state_dir}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBDISPATCH_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "xdg"))
    done = subprocess.run(
        [sys.executable, "-m", "jobdispatch_cli.main", "local", "ps", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [o["ref"]["id"] for o in json.loads(done.stdout)] == [other_ref.id]
    assert f"{frozen_ref.id}: unobservable now" in done.stderr


# ------------------------------------------------------------------ the races of a late spawn


def _settle(backend: LocalBackend, obj: ObjectDir) -> None:
    """Wait until no runner serves the object any more (every spawned runner has left)."""
    from jobdispatch_local.runner import serving

    def idle() -> bool:
        return not serving(obj.read_runner())

    wait_for(backend, ObjectRef(obj.name), lambda _: idle(), "left by every runner")


def test_concurrent_opens_make_one_runner_and_one_execution(
    backend: LocalBackend, request_for: Request
) -> None:
    ref = backend.start(request_for(spec=JobSpec(command=("sleep", "0.3"))))
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def open_it() -> None:
        mine = make_backend(backend.state_dir)  # as another supervisor would
        barrier.wait()
        try:
            mine.open(ref)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    obj = ObjectDir(backend.root / ref.id)
    _settle(backend, obj)
    assert [e["index"] for e in obj.executions()] == [0]


OPS = st.lists(
    st.sampled_from(["open", "stop", "hold", "release", "requeue", "late spawn"]),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_a_runner_spawned_late_starts_only_what_the_object_wants(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    ops: list[str],
) -> None:
    """Open, release and requeue decide under the lock and spawn after it; here every spawn is
    delayed until a random later point (or the end), with other calls in between. Whatever the
    order: nothing runs unless opened, nothing starts after a stop is recorded, executions
    never overlap, and there are never more than the runs the control state wants."""
    state_dir = tmp_path_factory.mktemp("late") / "state"
    real_spawn = local_backend._spawn
    delayed: list[ObjectDir] = []
    monkeypatch.setattr(local_backend, "_spawn", delayed.append)
    monkeypatch.setattr(local_backend, "RUNNER_ACK_TIMEOUT", 0.0)
    backend = make_backend(state_dir)
    try:
        job = f"late{os.getpid()}x{len(ops)}{abs(hash(tuple(ops))) % 10**6}"
        ref = backend.start(
            StartRequest(job=job, submission=1, attempt=1, spec=JobSpec(command=("sleep", "0.05")))
        )
        obj = ObjectDir(backend.root / ref.id)
        hold = HoldMeta(instance=1, deadline=_meta().deadline)
        opened = False
        for op in ops:
            if op == "open":
                backend.open(ref)
                opened = True
            elif op == "stop":
                backend.stop(ref, "test")
            elif op == "hold":
                with contextlib.suppress(Rejected):  # refused when running or ended
                    backend.hold(ref, hold)
            elif op == "release":
                backend.release(ref, hold)
            elif op == "requeue":
                backend.requeue(ref, _meta())
            elif delayed:
                real_spawn(delayed.pop(0))
        control = obj.read_control()
        if control.get("hold") is not None:
            backend.release(ref, hold)
        while delayed:
            real_spawn(delayed.pop(0))
        _settle(backend, obj)
        control = obj.read_control()
        executions = obj.executions()
        if not opened:
            assert executions == [], "nothing runs before an open"
        assert len(executions) <= max(int(control.get("runs") or 0), 0)
        assert [e["index"] for e in executions] == list(range(len(executions)))
        for earlier, later in itertools.pairwise(executions):
            assert earlier["ended_at"] <= later["started_at"], "executions overlap"
        stop = control.get("stop")
        if stop:
            for e in executions:
                assert e["started_at"] <= stop["at"], "an execution started after the stop"
    finally:
        monkeypatch.undo()
        leftovers = shut_down(state_dir)
        assert not leftovers, leftovers


def test_a_requeue_of_an_object_stopped_before_it_opened_starts_nothing(
    backend: LocalBackend, request_for: Request
) -> None:
    """Found by the property above: requeue used to rerun any ended object, so one stopped
    while gated ran without its gate ever being lifted."""
    ref = backend.start(request_for(spec=JobSpec(command=("true",))))
    backend.stop(ref, "retired before it opened")
    backend.requeue(ref, _meta())
    obj = ObjectDir(backend.root / ref.id)
    assert obj.read_runner() is None and obj.executions() == []
    assert backend.inspect(ref).state is ObjectState.ENDED
