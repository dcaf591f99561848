"""The object lock never freezes anybody but the object's own changes.

A process may stop while it holds an object's lock (SIGSTOP, a GC pause, a frozen VM). Readers
then report that one object as unobservable (an incomplete Discovery, ``Unavailable``), never
as absent, and go on with every other object; a change raises ``Unavailable`` and changes
nothing. And since open, release and requeue spawn the runner after letting the lock go, and
the runner starts an execution's ranks with the lock let go too, the races that lock used to
close are tried here: a spawn delayed past a stop, a hold, an end or another open starts
nothing it should not, concurrent opens make one runner, and whatever is asked while a runner
spawns its ranks (or while it is paused there, or after it died there) is acted on.

The runner runs in processes of its own, so the tests stop it inside its rank spawn through a
wrapper script that replaces ``jobdispatch_local.ranks.spawn`` in that one process (see
:func:`_runner_via`); the adapter itself looks for no such hook.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobdispatch.errors import Rejected, Unavailable
from jobdispatch.spi import ObjectRef, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import CallMeta, HoldMeta, JobSpec, ObjectState
from jobdispatch_local import LocalBackend, procs
from jobdispatch_local import backend as local_backend
from jobdispatch_local.layout import ObjectDir
from jobdispatch_local.testing import make_backend, shut_down, wait_file, wait_for

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


# ------------------------------------------------------------------ inside the runner's rank spawn

IN_RANK_SPAWN = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path

    from jobdispatch_local import ranks, runner

    obj_dir, how = sys.argv[1], json.loads(sys.argv[2])
    marker, mode = Path(how["marker"]), how["mode"]
    real = ranks.spawn

    def first():
        # The first rank spawn of any runner this test starts, whichever process it is in.
        try:
            os.close(os.open(str(marker) + ".taken", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def announce(text):
        tmp = Path(str(marker) + ".tmp")
        tmp.write_text(text)
        tmp.replace(marker)

    def calls():
        # Made from inside the window, as another process would: a backend of its own, and
        # the object's lock not held here. This thread is the runner, which cannot end the
        # execution while it makes them, so a stop here does not wait for the end.
        from datetime import UTC, datetime, timedelta
        from jobdispatch.errors import Invalid, Rejected, Unavailable
        from jobdispatch.spi import ObjectRef
        from jobdispatch.types import CallMeta, HoldMeta
        from jobdispatch_local.backend import LocalBackend
        from jobdispatch_local.testing import make_backend

        LocalBackend._wait_ended = lambda self, obj, timeout: False
        backend = make_backend(Path(how["state_dir"]))
        ref = ObjectRef(Path(obj_dir).name)
        deadline = datetime.now(UTC) + timedelta(hours=1)
        hold = HoldMeta(instance=1, deadline=deadline)
        do = {
            "open": lambda: backend.open(ref),
            "stop": lambda: backend.stop(ref, "stopped inside the spawn"),
            "hold": lambda: backend.hold(ref, hold),
            "release": lambda: backend.release(ref, hold),
            "requeue": lambda: backend.requeue(ref, CallMeta(deadline=deadline)),
            "preempt": lambda: backend.preempt(ref, wait=False),
            "reconcile": lambda: backend.reconcile(ref),
        }
        outcomes = []
        for name in how["calls"]:
            try:
                do[name]()
                outcomes.append([name, "ok"])
            except Rejected:
                outcomes.append([name, "rejected"])
            except Invalid:
                outcomes.append([name, "invalid"])
            except Unavailable as exc:
                outcomes.append([name, f"unavailable: {exc}"])
        return outcomes

    def spawn(*args, **kwargs):
        if not first():
            return real(*args, **kwargs)
        if mode == "pause before":
            announce(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGSTOP)  # a frozen VM: exactly here
            return real(*args, **kwargs)
        if mode == "pause after":
            proc = real(*args, **kwargs)
            announce(f"{os.getpid()} {proc.pid}")
            os.kill(os.getpid(), signal.SIGSTOP)  # the rank runs, not recorded yet
            return proc
        announce(json.dumps(calls()))
        return real(*args, **kwargs)

    ranks.spawn = spawn
    sys.exit(runner.main([obj_dir]))
""")


def _runner_via(
    marker: Path, mode: str, *, state_dir: Path | None = None, calls: list[str] | None = None
) -> Callable[[ObjectDir], None]:
    """A replacement for the backend's ``_spawn``: the object's runner, started as the backend
    starts it, in a wrapper that does ``mode`` at the first rank spawn of any of them (pause
    before it, pause after it, or make ``calls``), then writes ``marker``."""
    how = json.dumps(
        {"marker": str(marker), "mode": mode, "state_dir": str(state_dir), "calls": calls or []}
    )

    def spawn(obj: ObjectDir) -> None:
        with obj.log_file.open("ab") as log:
            subprocess.run(
                [sys.executable, "-c", IN_RANK_SPAWN, str(obj.path), how],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=obj.path,
                start_new_session=True,
                check=False,
            )

    return spawn


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


def _paused_runner(marker: Path) -> list[int]:
    """The numbers the paused runner announced (its pid first), once it has stopped."""
    numbers = [int(n) for n in wait_file(marker).split()]
    eventually(lambda: _stopped(numbers[0]), "the runner to stop inside its rank spawn")
    return numbers


def test_a_runner_paused_inside_its_rank_spawn_leaves_the_object_changeable(
    backend: LocalBackend,
    request_for: Request,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runner used to spawn an execution's ranks under the object's lock: stopped there,
    it made the object unobservable and every change Unavailable until it resumed. Now the
    execution is recorded as started first, so the object reads running, a hold is refused as
    for any running object, and a stop is recorded at once and carried out when the runner
    resumes."""
    marker = tmp_path / "paused"
    monkeypatch.setattr(local_backend, "_spawn", _runner_via(marker, "pause before"))
    monkeypatch.setattr(local_backend, "STOP_SLACK", 0.0)  # the end cannot come while paused
    request = request_for(spec=JobSpec(command=("sleep", "30")))
    ref = backend.start(request)
    obj = ObjectDir(backend.root / ref.id)
    backend.open(ref)
    (pid,) = _paused_runner(marker)
    try:
        assert backend.inspect(ref).state is ObjectState.RUNNING
        seen = backend.find(request.job)
        assert seen.complete and [o.ref for o in seen.objects] == [ref]
        with pytest.raises(Rejected, match="running"):
            backend.hold(ref, HoldMeta(instance=1, deadline=_meta().deadline))
        backend.stop(ref, "stopped while its runner was paused")
        assert obj.read_control()["stop"]["reason"] == "stopped while its runner was paused"
        assert _stopped(pid), "all of this happened while the runner was stopped"
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    (execution,) = obj.executions()
    assert execution["cause"]["kind"] == "cancelled"
    assert [r["rank"] for r in execution["ranks"]] == [0], "the rank started, then was stopped"


def test_a_runner_that_dies_before_recording_its_ranks_is_adopted_as_node_lost(
    backend: LocalBackend,
    request_for: Request,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between recording an execution started and recording its ranks the lock is let go; a
    runner killed there leaves an open execution that names no rank. Its rank dies with it
    (``PR_SET_PDEATHSIG``) and the next reader records the execution node-lost."""
    marker = tmp_path / "paused"
    monkeypatch.setattr(local_backend, "_spawn", _runner_via(marker, "pause after"))
    ref = backend.start(request_for(spec=JobSpec(command=("sleep", "30"))))
    obj = ObjectDir(backend.root / ref.id)
    backend.open(ref)
    pid, rank_pid = _paused_runner(marker)
    (open_execution,) = obj.executions()
    assert open_execution["ended_at"] is None and open_execution["ranks"] == []
    os.kill(pid, signal.SIGKILL)
    obs = wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    assert [e.cause.kind if e.cause else None for e in obs.executions] == ["node-lost"]
    eventually(
        lambda: procs.start_ticks(rank_pid),
        "the unrecorded rank to die with its runner",
        holds=lambda ticks: ticks is None,
    )


# ------------------------------------------------------------------ the races of a late spawn


def _runner_processes(obj: ObjectDir) -> list[int]:
    """Every live process started as a runner of ``obj``, whether or not it has taken the
    object yet: the adapter's runner and this file's wrapper both carry the object's directory
    as an argument, and a detached runner keeps its arguments."""
    target = os.fsencode(obj.path)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # it exited while we looked
        if target in argv and procs.start_ticks(int(entry.name)) is not None:  # not a zombie
            found.append(int(entry.name))
    return found


def _settle(backend: LocalBackend, obj: ObjectDir) -> None:
    """Wait until every runner spawned for the object has left: none serves it and no runner
    process is still on its way to it.

    The recorded runner alone does not tell: a spawn returns once the runner has detached,
    before it registers, so on a loaded machine the object can show no runner while one is
    about to take it and start an execution. Waiting on the record alone let the property
    check an object that was still changing (an execution "left open", seen on 3.12 in CI)
    or, more often, check nothing at all."""
    from jobdispatch_local.runner import serving

    def idle() -> bool:
        return not serving(obj.read_runner()) and not _runner_processes(obj)

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

#: Calls made from inside the first runner's unlocked rank spawn (see ``IN_RANK_SPAWN``).
WINDOW = st.lists(
    st.sampled_from(["open", "stop", "hold", "release", "requeue", "preempt", "reconcile"]),
    max_size=3,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS, window=WINDOW)
def test_a_runner_spawned_late_starts_only_what_the_object_wants(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    ops: list[str],
    window: list[str],
) -> None:
    """Open, release and requeue decide under the lock and spawn after it; here every spawn is
    delayed until a random later point (or the end), with other calls in between. The runner
    spawns ranks with the lock let go too; the ``window`` calls are made from inside the first
    rank spawn, after the execution was recorded started and before its ranks are. Whatever
    the order: nothing runs unless opened, nothing starts after a stop is recorded, executions
    never overlap, there are never more than the runs the control state wants, every
    execution ends with its ranks recorded, and no call made inside the spawn waits on the
    lock (a hold there is refused, as for any running object)."""
    base = tmp_path_factory.mktemp("late")
    state_dir, marker = base / "state", base / "window"
    real_spawn = _runner_via(marker, "calls", state_dir=state_dir, calls=window)
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
        opened = _play(backend, ref, ops, hold, delayed, real_spawn)
        control = obj.read_control()
        if control.get("hold") is not None:
            backend.release(ref, hold)
        while delayed:
            real_spawn(delayed.pop(0))
        _settle(backend, obj)
        control = obj.read_control()
        executions = obj.executions()
        _assert_only_what_the_object_wants(control, executions, opened=opened)
        assert marker.exists() == bool(executions), "the first rank spawn made the calls"
        if marker.exists():
            _assert_the_window_calls(marker, window, control, executions)
    finally:
        monkeypatch.undo()
        leftovers = shut_down(state_dir)
        assert not leftovers, leftovers


def _play(
    backend: LocalBackend,
    ref: ObjectRef,
    ops: list[str],
    hold: HoldMeta,
    delayed: list[ObjectDir],
    real_spawn: Callable[[ObjectDir], None],
) -> bool:
    """Make ``ops``' calls in order, a "late spawn" running the oldest delayed spawn then.
    Returns whether the object was opened (nothing may run otherwise)."""
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
    return opened


def _assert_only_what_the_object_wants(
    control: dict[str, Any], executions: list[dict[str, Any]], *, opened: bool
) -> None:
    """Nothing runs unless opened, no more runs than the control state wants, executions one
    after another and none started after a recorded stop, each ended with its rank recorded."""
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
    for e in executions:
        assert e["ended_at"] is not None, "an execution was left open"
        assert [r["rank"] for r in e["ranks"]] == [0], "an execution's rank went unrecorded"


def _assert_the_window_calls(
    marker: Path, window: list[str], control: dict[str, Any], executions: list[dict[str, Any]]
) -> None:
    """The calls made inside the first rank spawn: none waited on the lock (none answered
    unavailable), a hold was refused as for any running object, the rest succeeded; and a stop
    made there let nothing start after it."""
    outcomes = json.loads(marker.read_text())
    assert [name for name, _ in outcomes] == window
    for name, outcome in outcomes:
        assert not outcome.startswith("unavailable"), (name, outcome)
        assert outcome == ("rejected" if name == "hold" else "ok"), (name, outcome)
    stop = control.get("stop")
    if stop and stop["reason"] == "stopped inside the spawn":
        assert len(executions) == 1, "nothing started after a stop made in the spawn"
        assert executions[0]["cause"]["kind"] in ("cancelled", "none")


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
