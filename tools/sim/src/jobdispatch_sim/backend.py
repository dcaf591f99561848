"""The simulated backend: the real memory adapter, with the simulator's fault points around
every SPI call.

It delegates every call to :class:`~jobdispatch.memory.MemoryBackend` unchanged (its own faults,
lost Start replies, dropped observations, objects that show up late, are armed through its
``env``), and adds only what happens *around* a call: the caller crashing or pausing just before
it (its decision committed) or just after it (its answer not yet committed). It also notes each
call in the timeline with who made it, which the cancel-ordering check needs.

It implements the same optional protocols as the memory backend (Holder, Requeuer,
NativePolicyCompiler, MultiFinder, CessationSignal, IdentityWeakener), so ``isinstance`` checks in
the code under test answer as they would for the real adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from jobdispatch import types as t
from jobdispatch.memory import MemoryBackend
from jobdispatch.spi import (
    CessationEvidence,
    Discovery,
    NativeOffer,
    ObjectObs,
    ObjectRef,
    StartRequest,
)

from jobdispatch_sim.timeline import job_of_name

if TYPE_CHECKING:
    from jobdispatch_sim.world import World

T = TypeVar("T")


class SimBackend:
    """The memory backend of one shape, as the code under test sees it."""

    name = "memory"

    def __init__(self, inner: MemoryBackend, world: World) -> None:
        self.inner = inner
        self.world = world
        self.shape = str(inner.shape)
        self._jobs: dict[ObjectRef, str] = {}

    def _job(self, ref: ObjectRef) -> str:
        job = self._jobs.get(ref)
        if job is None:
            entries = self.inner.env.history.of(ref)
            job = job_of_name(entries[0].name) or "" if entries else ""
            self._jobs[ref] = job
        return job or ""

    def _act(self, op: str, job: str, target: str, body: Callable[[], T]) -> T:
        """A mutating call: fault points before and after, and a timeline entry."""
        world = self.world
        world.point("call.before", job, op)
        try:
            result = body()
        except Exception as exc:
            world.note_call(op, job, target, f"{type(exc).__name__}")
            raise
        world.note_call(op, job, target, "ok" if result is None else str(result))
        world.point("call.after", job, op)
        return result

    # ------------------------------------------------------------------ reads

    def capabilities(self, spec: t.JobSpec | None = None) -> Mapping[t.Capability, t.Support]:
        return self.inner.capabilities(spec)

    def rules(self, spec: t.JobSpec, policy: t.RecoveryPolicy) -> Sequence[t.RuleSupport]:
        return self.inner.rules(spec, policy)

    def identity_weakened(self, spec: t.JobSpec) -> str:
        return self.inner.identity_weakened(spec)

    def compile(
        self, spec: t.JobSpec, rules: Mapping[int, t.Rule], remaining: Mapping[int, int]
    ) -> NativeOffer:
        return self.inner.compile(spec, rules, remaining)

    def find(self, job: t.JobID) -> Discovery:
        self.world.point("find.before", job, "find")
        self.world.before_find(self, job)
        found = self.inner.find(job)
        self.world.note_find(self, job, found)
        return found

    def find_many(
        self, jobs: Sequence[t.JobID], states: Sequence[t.ObjectState] = ()
    ) -> Mapping[t.JobID, Discovery]:
        self.world.point("find.before", "", "find_many")
        for job in jobs:
            self.world.before_find(self, job)
        found = self.inner.find_many(jobs, states)
        if not states:
            for job, discovery in found.items():
                self.world.note_find(self, job, discovery)
        return found

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        return self.inner.inspect(ref)

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        return self.inner.ceased(ref)

    # ------------------------------------------------------------------ calls with effects

    def start(self, request: StartRequest) -> ObjectRef:
        return self._act("start", request.job, request.name, lambda: self.inner.start(request))

    def open(self, ref: ObjectRef, meta: t.CallMeta | None = None) -> None:
        self._act("open", self._job(ref), ref.id, lambda: self.inner.open(ref, meta))

    def stop(self, ref: ObjectRef, reason: str) -> None:
        self._act("stop", self._job(ref), ref.id, lambda: self.inner.stop(ref, reason))

    def hold(self, ref: ObjectRef, meta: t.HoldMeta) -> None:
        self._act("hold", self._job(ref), ref.id, lambda: self.inner.hold(ref, meta))

    def release(self, ref: ObjectRef, meta: t.HoldMeta) -> None:
        self._act("release", self._job(ref), ref.id, lambda: self.inner.release(ref, meta))

    def requeue(self, ref: ObjectRef, meta: t.CallMeta) -> None:
        self._act("requeue", self._job(ref), ref.id, lambda: self.inner.requeue(ref, meta))

    def restore_requeue_bit(self, ref: ObjectRef, meta: t.CallMeta) -> None:
        self._act(
            "restore", self._job(ref), ref.id, lambda: self.inner.restore_requeue_bit(ref, meta)
        )

    def close(self) -> None:
        self.inner.close()
