"""The memory scheduler's own mutable state: objects, their executions, and native rules.

These are private to the package. Callers see :class:`~jobdispatch.spi.ObjectObs` snapshots,
built under the cluster's lock by :meth:`MemObject.observe`, never these.
"""

from __future__ import annotations

import json
from datetime import datetime

import attrs

from jobdispatch.codec import converter
from jobdispatch.members import OBJ_ENDED, OBJ_GATED, OBJ_HELD, OBJ_PENDING, OBJ_RUNNING
from jobdispatch.spi import ExecutionObs, ObjectObs, ObjectRef, parse_discovery_name
from jobdispatch.types import Cause, CauseKind, JobID, JobSpec, ObjectState, Tristate

__all__ = ["MemExecution", "MemObject", "NativeRule"]


@attrs.define
class MemExecution:
    """One run of an object."""

    index: int
    started_at: datetime
    nodes: tuple[str, ...]
    ended_at: datetime | None = None
    cause: Cause | None = None

    def observe(self) -> ExecutionObs:
        return ExecutionObs(
            index=self.index,
            state=OBJ_RUNNING if self.ended_at is None else OBJ_ENDED,
            cause=self.cause,
            started_at=self.started_at,
            ended_at=self.ended_at,
            nodes=self.nodes,
        )


@attrs.define
class NativeRule:
    """A rule the start request offered the backend to enforce itself, with its budget left."""

    index: int
    causes: frozenset[CauseKind]
    remaining: int


@attrs.define
class MemObject:
    """One backend object and everything the scheduler keeps about it."""

    ref: ObjectRef
    name: str
    spec: JobSpec
    native: list[NativeRule]
    gated: bool = True
    ended: bool = False
    hold: int | None = None
    executions: list[MemExecution] = attrs.field(factory=list)
    #: A requeue bit forced by the environment or cleared by a restore; None: follow the offer.
    forced_bit: bool | None = None
    ceased: Tristate = Tristate.UNKNOWN
    lost_nodes: tuple[str, ...] = ()
    #: Nodes its runs are never placed on (the request's suspects).
    exclude: tuple[str, ...] = ()
    #: Finds still to answer without this object (an object that shows up late).
    hidden_finds: int = 0
    detail: str = ""
    output: dict[tuple[str, int], bytearray] = attrs.field(factory=dict)
    #: Bumped on every change, so a watcher can tell what it has seen.
    version: int = 0

    @property
    def job(self) -> JobID | None:
        identity = parse_discovery_name(self.name)
        return identity[0] if identity else None

    @property
    def running(self) -> MemExecution | None:
        """The execution now running, if one is."""
        last = self.executions[-1] if self.executions else None
        return last if last is not None and last.ended_at is None else None

    @property
    def state(self) -> ObjectState:
        if self.ended:
            return OBJ_ENDED
        if self.running is not None:
            return OBJ_RUNNING
        if self.hold is not None:
            return OBJ_HELD
        if self.gated:
            return OBJ_GATED
        return OBJ_PENDING

    def budget_left(self) -> bool:
        """Whether any offered native rule still has budget."""
        return any(r.remaining > 0 for r in self.native)

    def observe(self, requeue_bit: bool | None) -> ObjectObs:
        return ObjectObs(
            ref=self.ref,
            name=self.name,
            state=self.state,
            executions=tuple(e.observe() for e in self.executions),
            hold_instance=self.hold,
            requeue_bit=requeue_bit,
            lost_nodes=self.lost_nodes,
            detail=self.detail or self._gate_note(),
        )

    def _gate_note(self) -> str:
        # HELD says nothing of the gate, so say it: a held object that was never opened must not
        # be taken for one past its gate.
        return "held before its gate was lifted" if self.hold is not None and self.gated else ""


def describe(name: str, spec: JobSpec, native: list[NativeRule]) -> str:
    """What the memory scheduler holds of an object, as its dry run prints it: the name, the
    spec as recorded (resources included) and the rules it enforces itself with their budgets."""
    body = {
        "name": name,
        "spec": converter.unstructure(spec),
        "native": [
            {
                "rule": r.index,
                "on": [str(c) for c in CauseKind if c in r.causes],
                "remaining": r.remaining,
            }
            for r in native
        ],
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"
