"""The memory scheduler itself: objects, their transitions, the faults armed against them.

:class:`~jobdispatch.memory.backend.MemoryBackend` (what a host calls, the SPI) and
:class:`~jobdispatch.memory.env.MemoryEnv` (what a test or the simulator does to the scheduler)
are two faces of one :class:`Cluster`. Every transition happens here, under one re-entrant lock,
and appends to the history before the lock is let go; so a history read at any moment is a
consistent prefix of what happened, even while a supervisor runs in another thread.

Nothing here reads the wall clock, starts a thread or uses the global random source: time comes
from the injected clock, ids from a counter and choices from a seeded generator.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import Counter
from collections.abc import Mapping
from datetime import datetime

import attrs

from jobdispatch.clock import Clock
from jobdispatch.errors import (
    Invalid,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Unsupported,
)
from jobdispatch.kit.deadline import refuse_past_deadline
from jobdispatch.kit.refusal import refuse_unsupported
from jobdispatch.members import (
    CAUSE_CANCELLED,
    CAUSE_REQUEUED,
    OBJ_ENDED,
    OBJ_PENDING,
    OBJ_RUNNING,
    PROV_ACTOR,
    SOURCE_DECLARED,
    TRI_NO,
)
from jobdispatch.memory import history as h
from jobdispatch.memory.objects import MemExecution, MemObject, NativeRule, describe
from jobdispatch.memory.shape import NATIVE, Shape, answers
from jobdispatch.spi import ObjectObs, ObjectRef, StartRequest
from jobdispatch.types import (
    Actor,
    Capability,
    Cause,
    CauseKind,
    JobID,
    Provenance,
    Support,
)

_SHAPE_SLURM = Shape.SLURM

__all__ = ["Cluster"]

#: Where the numeric ids of the Slurm shape start, as on a fresh cluster.
FIRST_SLURM_ID = 1001


@attrs.define
class _Faults:
    """Faults armed by the environment, each consumed by the next call it applies to."""

    lose_start_reply: int = 0
    refuse_start: list[str] = attrs.field(factory=list)
    delay_object: int = 0
    #: Jobs whose next observation omits their objects; None stands for "any job".
    drop_observation: list[JobID | None] = attrs.field(factory=list)
    reachable: bool = True
    authorized: bool = True
    #: Programs the nodes do not have: an execution whose command names one fails to launch.
    missing_programs: set[str] = attrs.field(factory=set)


class Cluster:
    """The state of one simulated scheduler and every transition it can make."""

    def __init__(
        self,
        *,
        shape: Shape,
        auto_run: bool,
        clock: Clock,
        seed: int,
        namespace: str,
        declared: Mapping[Capability, Support],
    ) -> None:
        self.shape = shape
        self.auto_run = auto_run
        self.clock = clock
        self.namespace = namespace
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rng = random.Random(seed)
        self.history = h.History()
        self.calls: Counter[str] = Counter()
        self.faults = _Faults()
        self.objects: dict[ObjectRef, MemObject] = {}
        #: The same objects by the job their discovery name names, in creation order: a find
        #: looks up its job, as a scheduler's query by name does, instead of scanning them all.
        self.by_job: dict[JobID | None, list[MemObject]] = {}
        #: Every change of an object, in order, for watchers: (sequence, job, snapshot). Kept
        #: only once someone watches, since a watch starts from the present anyway.
        self.changes: list[tuple[int, JobID | None, ObjectObs]] = []
        self.watched = False
        self._next_id = FIRST_SLURM_ID
        self._support = {
            cap: Support(answer, SOURCE_DECLARED, f"memory backend, {shape} shape")
            for cap, answer in answers(shape).items()
        }
        self._support.update(declared)

    # ------------------------------------------------------------------ answers

    def support(self, cap: Capability) -> Support:
        return self._support[cap]

    def supports(self) -> dict[Capability, Support]:
        return dict(self._support)

    def refuse_unless(self, cap: Capability, what: str) -> None:
        """Unsupported when the cluster answers "no" for ``cap``; unknown is let through."""
        if self._support[cap].answer is TRI_NO:
            msg = f"{what}: this cluster answers no for {cap}"
            raise Unsupported(msg)

    def requeue_bit(self, obj: MemObject) -> bool | None:
        """Slurm shape: whether the object would requeue itself. Kubeflow has no such bit."""
        if self.shape is not _SHAPE_SLURM:
            return None
        if obj.forced_bit is not None:
            return obj.forced_bit
        return obj.budget_left()

    # ------------------------------------------------------------------ lookup

    def get(self, ref: ObjectRef) -> MemObject:
        try:
            return self.objects[ref]
        except KeyError:
            msg = f"no object {ref} on this memory backend"
            raise NotFound(msg) from None

    def observe(self, obj: MemObject) -> ObjectObs:
        return obj.observe(self.requeue_bit(obj))

    def touch(self, obj: MemObject) -> None:
        """Mark a change: watchers see a snapshot, blocked output readers wake up."""
        obj.version += 1
        if self.watched:
            self.changes.append((len(self.changes), obj.job, self.observe(obj)))
        self.changed.notify_all()

    # ------------------------------------------------------------------ start and gate

    def _new_ref(self, name: str) -> ObjectRef:
        if self.shape is _SHAPE_SLURM:
            ref = ObjectRef(str(self._next_id))
            self._next_id += 1
            return ref
        ref = ObjectRef(f"{self.namespace}/{name}")
        if ref in self.objects:
            msg = f"an object named {name} exists already in namespace {self.namespace}"
            raise Rejected(msg)
        return ref

    def create(self, req: StartRequest) -> ObjectRef:
        """Start: one object, gated, under the request's discovery name."""
        now = self.clock()
        # Start refuses what the plan would have refused, for a caller that starts without
        # planning (the conformance suite does): the core's one refusal, under the lock.
        refuse_unsupported(req, self.supports())
        if self.faults.refuse_start:
            reason = self.faults.refuse_start.pop(0)
            self.history.append(
                h.StartRefused(at=now, ref=ObjectRef(""), name=req.name, reason=reason)
            )
            msg = f"start of {req.name} refused: {reason}"
            raise Rejected(msg)
        ref = self._new_ref(req.name)
        obj = MemObject(
            ref=ref, name=req.name, spec=req.spec, native=self._native(req), exclude=req.exclude
        )
        if self.faults.delay_object:
            self.faults.delay_object -= 1
            obj.hidden_finds = 1
        self.objects[ref] = obj
        self.by_job.setdefault(obj.job, []).append(obj)
        self.history.append(
            h.Created(
                at=now,
                ref=ref,
                name=req.name,
                native=tuple((r.index, r.remaining) for r in obj.native),
            )
        )
        self.touch(obj)
        if self.faults.lose_start_reply:
            self.faults.lose_start_reply -= 1
            self.history.append(h.StartReplyLost(at=now, ref=ref, name=req.name))
            msg = f"start of {req.name}: the reply was lost"
            raise OutcomeUnknown(msg)
        return ref

    def preview(self, req: StartRequest) -> str:
        """What :meth:`create` would hold for ``req``, checked as create checks it, without
        creating anything."""
        refuse_unsupported(req, self.supports())
        return describe(req.name, req.spec, self._native(req))

    def _native(self, req: StartRequest) -> list[NativeRule]:
        """The offered rules this shape can enforce, with the causes they cover.

        The causes come from the offer's settings (what :meth:`MemoryBackend.compile` wrote),
        falling back to the spec's rule; causes the shape cannot act on are dropped.
        """
        _action, cap, possible = NATIVE[self.shape]
        if self._support[cap].answer is TRI_NO:
            return []
        rules = []
        spec_rules = req.spec.recovery.rules
        for index in req.native.rules:
            written = req.native.settings.get(f"on.{index}")
            if written is not None:
                causes = frozenset(CauseKind(c) for c in written.split(",") if c)
            elif 0 <= index < len(spec_rules):
                causes = frozenset(spec_rules[index].on)
            else:
                continue
            default = spec_rules[index].budget if 0 <= index < len(spec_rules) else 0
            remaining = req.native.remaining.get(index, default)
            rules.append(NativeRule(index, causes & possible, remaining))
        return rules

    def lift_gate(self, obj: MemObject, deadline: datetime | None = None) -> None:
        lifted = obj.gated and not obj.ended
        if lifted:
            obj.gated = False
        self.history.append(
            h.Opened(at=self.clock(), ref=obj.ref, name=obj.name, lifted=lifted, deadline=deadline)
        )
        if lifted:
            self.touch(obj)
            self.maybe_run(obj)

    # ------------------------------------------------------------------ executions

    def maybe_run(self, obj: MemObject) -> None:
        if self.auto_run and obj.state is OBJ_PENDING:
            self.begin(obj)

    def begin(self, obj: MemObject) -> MemExecution:
        """Start the object's next execution; it must be pending."""
        if obj.state is not OBJ_PENDING:
            msg = f"object {obj.ref} is {obj.state}, not pending: it cannot start running"
            raise Invalid(msg)
        # node1, node2, ... in order, past any the request excluded (as --exclude does).
        names = (f"node{i}" for i in itertools.count(1))
        free = (n for n in names if n not in obj.exclude)
        nodes = tuple(itertools.islice(free, obj.spec.nodes))
        execution = MemExecution(index=len(obj.executions), started_at=self.clock(), nodes=nodes)
        obj.executions.append(execution)
        obj.lost_nodes = ()
        self.history.append(
            h.ExecutionStarted(
                at=execution.started_at,
                ref=obj.ref,
                name=obj.name,
                index=execution.index,
                nodes=nodes,
            )
        )
        self.touch(obj)
        program = obj.spec.command[0] if obj.spec.command else ""
        if program in self.faults.missing_programs:
            # As a real launcher: the program cannot be started, so the run fails at once and
            # the launch is to blame, whatever status a shell would give for it (126, 127).
            detail = f"cannot start {program}: no such program on {', '.join(nodes)}"
            self.end_execution(
                obj, execution, Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, detail)
            )
        return execution

    def running(self, ref: ObjectRef, what: str) -> tuple[MemObject, MemExecution]:
        obj = self.get(ref)
        execution = obj.running
        if execution is None:
            msg = f"cannot {what} object {ref}: it is {obj.state}, not running"
            raise Invalid(msg)
        return obj, execution

    def finish(self, obj: MemObject, execution: MemExecution, cause: Cause) -> None:
        """End the running execution with ``cause``; no policy is applied."""
        execution.ended_at = self.clock()
        execution.cause = cause
        self.history.append(
            h.ExecutionEnded(
                at=execution.ended_at,
                ref=obj.ref,
                name=obj.name,
                index=execution.index,
                cause=cause,
            )
        )
        self.touch(obj)

    def end_execution(
        self,
        obj: MemObject,
        execution: MemExecution,
        cause: Cause,
        lost_nodes: tuple[str, ...] = (),
    ) -> None:
        """The scheduler or the application ended the execution: apply the native policy."""
        obj.lost_nodes = lost_nodes
        self.finish(obj, execution, cause)
        if not self._native_rerun(obj, cause.kind):
            self.end_object(obj)

    def _native_rerun(self, obj: MemObject, kind: CauseKind) -> bool:
        action, cap, possible = NATIVE[self.shape]
        if kind not in possible or self._support[cap].answer is TRI_NO:
            return False
        bit = self.requeue_bit(obj)
        if bit is False:
            # Slurm shape with its bit cleared: the scheduler will not requeue it.
            return False
        rule = next((r for r in obj.native if kind in r.causes and r.remaining > 0), None)
        if rule is None and not (self.shape is _SHAPE_SLURM and obj.forced_bit is True):
            return False
        if rule is not None:
            rule.remaining -= 1
        self.history.append(
            h.NativeRerun(
                at=self.clock(),
                ref=obj.ref,
                name=obj.name,
                mode=str(action),
                cause=kind,
                rule=None if rule is None else rule.index,
                remaining=None if rule is None else rule.remaining,
            )
        )
        self.touch(obj)
        self.maybe_run(obj)
        return True

    def end_object(self, obj: MemObject) -> None:
        obj.ended = True
        obj.hold = None
        self.history.append(h.ObjectEnded(at=self.clock(), ref=obj.ref, name=obj.name))
        self.touch(obj)

    # ------------------------------------------------------------------ stop, hold, requeue

    def stop(self, obj: MemObject, reason: str) -> None:
        was = obj.state
        self.history.append(
            h.Stopped(at=self.clock(), ref=obj.ref, name=obj.name, was=was, reason=reason)
        )
        if was is OBJ_ENDED:
            return
        execution = obj.running
        if execution is not None:
            cause = Cause(CAUSE_CANCELLED, PROV_ACTOR, detail=reason)
            self.finish(obj, execution, cause)
        else:
            obj.detail = f"stopped before it ran: {reason}" if reason else "stopped before it ran"
        self.end_object(obj)

    def check_deadline(self, deadline: datetime, what: str) -> None:
        refuse_past_deadline(deadline, self.clock(), what)

    def place_hold(self, obj: MemObject, instance: int, by: Actor | None) -> None:
        if not obj.state.waiting:
            msg = f"cannot hold object {obj.ref}: it is {obj.state}"
            raise Rejected(msg)
        replaced = obj.hold
        if replaced == instance:
            return
        obj.hold = instance
        self.history.append(
            h.Held(
                at=self.clock(),
                ref=obj.ref,
                name=obj.name,
                instance=instance,
                replaced=replaced,
                by=by,
            )
        )
        self.touch(obj)

    def lift_hold(self, obj: MemObject, instance: int, by: Actor | None) -> None:
        lifted = obj.hold == instance
        if lifted:
            obj.hold = None
        self.history.append(
            h.Released(
                at=self.clock(), ref=obj.ref, name=obj.name, instance=instance, lifted=lifted, by=by
            )
        )
        if lifted:
            self.touch(obj)
            self.maybe_run(obj)

    def requeue(
        self, obj: MemObject, by: Actor | None, reason: str, deadline: datetime | None = None
    ) -> None:
        was = obj.state
        if was not in (OBJ_RUNNING, OBJ_ENDED):
            # Nothing runs, so nothing to requeue: a repeated call after a lost reply lands here.
            self.history.append(
                h.Requeued(
                    at=self.clock(), ref=obj.ref, name=obj.name, was=was, by=by, deadline=deadline
                )
            )
            return
        execution = obj.running
        if execution is not None:
            cause = Cause(CAUSE_REQUEUED, PROV_ACTOR, detail=reason, actor=by)
            self.finish(obj, execution, cause)
        obj.ended = False
        obj.detail = ""
        self.history.append(
            h.Requeued(
                at=self.clock(), ref=obj.ref, name=obj.name, was=was, by=by, deadline=deadline
            )
        )
        self.touch(obj)
        self.maybe_run(obj)

    def force_bit(self, obj: MemObject, value: bool, by: str) -> None:
        obj.forced_bit = value
        self.history.append(
            h.RequeueBitSet(at=self.clock(), ref=obj.ref, name=obj.name, value=value, by=by)
        )
        self.touch(obj)

    # ------------------------------------------------------------------ discovery

    def consume_drops(self, jobs: list[JobID]) -> set[JobID]:
        """The jobs whose objects this observation omits: each armed drop is used once, by the
        first find that covers its job (a drop for any job covers every job of that find)."""
        omit: set[JobID] = set()
        kept: list[JobID | None] = []
        for target in self.faults.drop_observation:
            if target is None:
                omit.update(jobs)
            elif target in jobs:
                omit.add(target)
            else:
                kept.append(target)
        self.faults.drop_observation = kept
        return omit

    def found(self, job: JobID) -> list[MemObject]:
        """The objects a find of ``job`` shows now, in creation order; an object armed to show
        up late is left out once."""
        shown = []
        for obj in self.by_job.get(job, ()):
            if obj.hidden_finds:
                obj.hidden_finds -= 1
                continue
            shown.append(obj)
        return shown
