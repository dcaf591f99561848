"""An open decided before a cancel and carried out after it, on the local adapter's real
processes (reliability.md D2; spec 0001, D8).

A supervisor commits ``open-decided`` and pauses before its open call; a person cancels and the
operator's process dies after the cancel's commit, before its stops; the supervisor wakes and
makes its call. Nothing can keep the woken process from calling: the adapter refuses the call
only when it lands past the deadline recorded with the decision. These tests drive the real
executor, operator and local adapter in this process; the "pause" is a hook at the open call,
and time passing in it is a shift of the clock the supervisor and the adapter share, so no test
waits for the 30 s deadline to pass.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from jobdispatch import CallMeta, JobSpec, ObjectRef, ObjectState, State, compose
from jobdispatch.clock import system_clock
from jobdispatch.job import fold
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import job_of
from jobdispatch.timing import CALL_DEADLINE
from jobdispatch.types import Actor, CauseKind
from jobdispatch_local import LocalBackend
from jobdispatch_local.config import Settings
from jobdispatch_local.testing import TEST_GRACE, shut_down
from jobdispatch_supervise.executor import Executor

PERSON = Actor.human("ops")


class _Clock:
    """Wall time, shifted by however long the paused supervisor was away."""

    def __init__(self) -> None:
        self.shift = timedelta(0)

    def __call__(self) -> datetime:
        return system_clock() + self.shift


class _OperatorDied(BaseException):
    """The operator's process dying: nothing after this point of its cancel runs."""


class _AsSeenBy:
    """The local adapter as one process sees it, with that process's pause or death at a call."""

    def __init__(self, inner: LocalBackend) -> None:
        self.inner = inner
        self.before_open: Callable[[], object] = lambda: None
        self.stop_dies = False
        self.gate_after_open: list[ObjectState] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        self.before_open()
        try:
            self.inner.open(ref, meta)
        finally:
            self.gate_after_open.append(self.inner.inspect(ref).state)

    def stop(self, ref: ObjectRef, reason: str) -> None:
        if self.stop_dies:
            raise _OperatorDied
        self.inner.stop(ref, reason)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    assert shut_down(tmp_path / "state") == [], "a runner or rank outlived its test"


def _cancel_while_the_open_is_paused(
    state: Path, starts: Path, pause: timedelta, *, on_the_lock: bool = False
) -> tuple[LocalBackend, MemoryRecords, str, _AsSeenBy, _Clock]:
    """Submit, then supervise until settled; the first open call pauses for ``pause`` while a
    person cancels and the operator dies before its stops. With ``on_the_lock`` the pause is
    spent inside the call, waiting for the object's lock another process holds (how
    reliability D2 paused it), so only a deadline judged under the lock can see it."""
    clock = _Clock()
    config = {"state_dir": str(state), "grace": TEST_GRACE, "poll": 0.02}
    backend = LocalBackend(Settings.from_config(config), clock=clock)
    store = MemoryRecords(clock)
    command = ["sh", "-c", f'echo started >> "{starts}"; exec sleep 30']
    spec = JobSpec(command=command, name="c")
    job = job_of(compose(backend, store=store, clock=clock).operator.submit(spec, by=PERSON))
    mine, theirs = _AsSeenBy(backend), _AsSeenBy(backend)
    theirs.stop_dies = True
    operator = compose(theirs, store=store, clock=clock).operator  # type: ignore[arg-type]
    executor = Executor(mine, store, clock=clock, holder="a")  # type: ignore[arg-type]
    lease = store.acquire(job, "a", timedelta(hours=1))

    died: list[bool] = []

    def cancel_then_die() -> None:
        try:
            operator.cancel(job, by=PERSON, reason="wrong data")
        except _OperatorDied:
            died.append(True)
        clock.shift += pause

    def pause_before_open() -> None:
        mine.before_open = lambda: None  # the first open call only
        if not on_the_lock:
            cancel_then_die()
            return
        [obj] = (state / "objects").iterdir()
        fd = os.open(obj / "lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)  # find and inspect go on; open waits for it

        def elsewhere() -> None:
            try:
                cancel_then_die()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

        threading.Thread(target=elsewhere).start()

    mine.before_open = pause_before_open
    for _ in range(60):
        if executor.run_pass(job, lease).settled:
            break
    assert died == [True], "the operator was to die between its commit and its stops"
    return backend, store, job, mine, clock


@pytest.mark.parametrize("on_the_lock", [False, True], ids=["paused", "waiting-for-the-lock"])
def test_a_late_open_past_its_deadline_never_starts_the_cancelled_program(
    state: Path, tmp_path: Path, on_the_lock: bool
) -> None:
    starts = tmp_path / "starts.log"
    backend, store, job, mine, clock = _cancel_while_the_open_is_paused(
        state, starts, CALL_DEADLINE + timedelta(seconds=1), on_the_lock=on_the_lock
    )

    assert mine.gate_after_open == [ObjectState.GATED], "the late open lifted the gate"
    final = fold(store.read(job), clock())
    assert final.settled and final.outcome is not None
    assert final.outcome.state is State.CANCELLED
    [obs] = backend.find(job).objects
    assert (obs.state, obs.executions) == (ObjectState.ENDED, ())
    assert not starts.exists(), "the cancelled job's program ran"


def test_a_late_open_within_its_deadline_runs_and_the_next_pass_stops_it(
    state: Path, tmp_path: Path
) -> None:
    """The limit (spec 0001, D8): within the deadline the call lands, since nothing on this
    machine knows of the cancel until a stop reaches the object. The next pass stops it."""
    starts = tmp_path / "starts.log"
    backend, store, job, mine, clock = _cancel_while_the_open_is_paused(
        state, starts, timedelta(seconds=1)
    )

    assert mine.gate_after_open[0] in (ObjectState.PENDING, ObjectState.RUNNING)
    final = fold(store.read(job), clock())
    assert final.settled and final.outcome is not None
    assert final.outcome.state is State.CANCELLED
    [obs] = backend.find(job).objects
    assert obs.state is ObjectState.ENDED
    assert [e.cause.kind for e in obs.executions if e.cause] == [CauseKind.CANCELLED]
