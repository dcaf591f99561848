"""What the local scheduler shows of an object: its state, executions and causes, from its files.

The state is derived, never stored, so it cannot disagree with the records it comes from:

=========  ==================================================================================
running    an execution has started and not ended, and its runner is alive
ended      stopped; or every run wanted (one per open, one more per requeue) has ended
held       a hold instance stands (on a gated object too, as a scheduler shows it)
gated      Start made it and nobody opened it; or it was opened but no runner has taken it yet
           (the open call died between its decision and the spawn; open again lifts it)
pending    opened, waiting for its runner to start the next execution
=========  ==================================================================================

An execution whose runner died before recording its end is recorded here as ended with cause
``node-lost`` (under the object's lock, once), so that every reader sees the same, stable end.

A reader never waits on another process's lock for longer than it was given: every holder's
critical section is a few small file operations, so a lock held longer belongs to a process that
was paused (SIGSTOP, a GC pause, a frozen VM) or is stuck. Such an object is *unobservable* now
(:class:`~jobdispatch_local.files.LockBusy`), which callers report as such (an incomplete
Discovery, ``Unavailable``), never as absent: one paused process must not freeze every reader.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from jobdispatch.spi import ExecutionObs, ObjectObs, ObjectRef
from jobdispatch.types import Actor, ActorKind, Cause, CauseKind, ObjectState, Provenance

from jobdispatch_local import procs
from jobdispatch_local.files import LockBusy
from jobdispatch_local.layout import ObjectDir, now_iso
from jobdispatch_local.runner import dead_runner_cause, serving

__all__ = ["LockBusy", "Snapshot", "observe", "reconcile", "snapshot"]


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _actor(value: str | None) -> Actor | None:
    # Read as written (Actor.recorded): a state file is history, and one written before actor
    # ids were checked (``human:``) must still be observable.
    if not value:
        return None
    kind, _, ident = value.partition(":")
    try:
        return Actor.recorded(ActorKind(kind), ident)
    except ValueError:
        return Actor.recorded(ActorKind.HUMAN, value)


def to_cause(data: dict[str, Any] | None) -> Cause | None:
    """The recorded cause as the SPI's value type."""
    if not data:
        return None
    return Cause(
        kind=CauseKind(data["kind"]),
        provenance=Provenance(data.get("provenance") or "none"),
        detail=data.get("detail") or "",
        exit_code=data.get("exit_code"),
        signal=data.get("signal"),
        actor=_actor(data.get("actor")),
    )


class Snapshot:
    """One consistent read of an object's records (taken under its shared lock)."""

    def __init__(self, obj: ObjectDir, *, held: bool = False, wait: float = 0.0) -> None:
        """Read under the shared lock, or under the caller's exclusive one when ``held``
        (flock locks belong to open files: taking a second one would wait on ourselves).

        Raises:
            LockBusy: another process held the lock exclusively for all of ``wait`` seconds.
        """
        self.obj = obj
        with contextlib.nullcontext() if held else obj.lock(shared=True, wait=wait):
            self.record = obj.read_object()
            self.control = obj.read_control()
            self.executions = obj.executions()
            self.runner = obj.read_runner()
        self.runner_alive = serving(self.runner)

    @property
    def orphaned(self) -> bool:
        """An execution is open but its runner is gone."""
        return not self.runner_alive and any(e.get("ended_at") is None for e in self.executions)

    @property
    def running(self) -> dict[str, Any] | None:
        if not self.runner_alive:
            return None
        return next((e for e in self.executions if e.get("ended_at") is None), None)

    @property
    def state(self) -> ObjectState:
        c = self.control
        if self.running is not None:
            return ObjectState.RUNNING
        if c.get("stop"):
            return ObjectState.ENDED
        if not c.get("opened"):
            return ObjectState.HELD if c.get("hold") is not None else ObjectState.GATED
        if len(self.executions) >= int(c.get("runs") or 0):
            return ObjectState.ENDED
        if c.get("hold") is not None:
            return ObjectState.HELD
        if self.runner is None:
            return ObjectState.GATED
        return ObjectState.PENDING

    def detail(self) -> str:
        c = self.control
        state = self.state
        if state is ObjectState.ENDED and c.get("stop") and not self.executions:
            reason = c["stop"].get("reason")
            return f"stopped before it ran: {reason}" if reason else "stopped before it ran"
        if state is ObjectState.PENDING and not self.runner_alive:
            return "waiting for a runner: the next open, release or requeue starts one"
        return ""


def reconcile(obj: ObjectDir, *, wait: float | None = None) -> None:
    """Record the end of an execution whose runner died (node-lost), once, under the lock
    (LockBusy past ``wait`` seconds, when given)."""
    with obj.lock(wait=wait):
        runner = obj.read_runner()
        if serving(runner):
            return
        for e in obj.executions():
            if e.get("ended_at") is not None:
                continue
            for r in e.get("ranks", []):
                procs.kill_group(r.get("process") or {}, 9)
            e["ended_at"] = now_iso()
            e["cause"] = dead_runner_cause(runner)
            obj.write_execution(e)


def snapshot(obj: ObjectDir, *, wait: float = 0.0) -> Snapshot:
    """A consistent snapshot, after recording any end a dead runner left unrecorded.

    Raises:
        LockBusy: the object could not be read within ``wait`` seconds (see the module).
    """
    snap = Snapshot(obj, wait=wait)
    if snap.orphaned:
        reconcile(obj, wait=wait)
        snap = Snapshot(obj, wait=wait)
    return snap


def _execution(e: dict[str, Any]) -> ExecutionObs:
    ended = e.get("ended_at") is not None
    return ExecutionObs(
        index=int(e["index"]),
        state=ObjectState.ENDED if ended else ObjectState.RUNNING,
        cause=to_cause(e.get("cause")) if ended else None,
        started_at=_time(e.get("started_at")),
        ended_at=_time(e.get("ended_at")),
        nodes=tuple(e.get("nodes") or ()),
    )


def observe(snap: Snapshot) -> ObjectObs:
    """The SPI's observation of the snapshot's object."""
    return ObjectObs(
        ref=ObjectRef(snap.obj.name),
        name=snap.obj.name,
        state=snap.state,
        executions=tuple(_execution(e) for e in snap.executions),
        hold_instance=snap.control.get("hold"),
        requeue_bit=None,
        detail=snap.detail(),
    )
