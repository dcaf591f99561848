"""The memory adapter's SPI face: every method of :class:`~jobdispatch.spi.Backend` and of every
optional protocol, over one in-process :class:`~jobdispatch.memory.cluster.Cluster`.

It is the adapter the tutorial, the conformance suite's self-test and the simulator run on, so
it must keep the contract exactly where a real scheduler would (gates, one-object stops, causes,
hold instances, deadlines) and be deterministic given its seed and clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, TypeVar

from jobdispatch import spi
from jobdispatch import types as t
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import Unauthorized, Unavailable, Unreachable, Unsupported
from jobdispatch.memory import output
from jobdispatch.memory.cluster import Cluster
from jobdispatch.memory.config import CONFIG_SCHEMA, Settings
from jobdispatch.memory.env import MemoryEnv
from jobdispatch.memory.objects import MemObject
from jobdispatch.memory.shape import NATIVE, PERFORM, Shape

__all__ = ["CONFIG_SCHEMA", "MemoryBackend"]

T = TypeVar("T")

_WEAKENED = (
    "the site allows rank restarts: the backend may rerun a failed rank in place, under the "
    "same execution identity"
)


class MemoryBackend(
    spi.Backend,
    spi.CessationSignal,
    spi.ConcurrentCalls,
    spi.Holder,
    spi.IdentityWeakener,
    spi.InventoryReporter,
    spi.MultiFinder,
    spi.NativePolicyCompiler,
    spi.OutputReader,
    spi.Paced,
    spi.Requeuer,
    spi.SubmissionPreview,
    spi.Watcher,
):
    """An in-process scheduler in the shape of Slurm or of Kubeflow.

    Args:
        shape: which scheduler to imitate: native requeue and a requeue bit (Slurm), or native
            restart in place (Kubeflow); capability answers follow the shape.
        auto_run: an opened (or released, or requeued) object starts running at once; without
            it, ``env.run(ref)`` starts it, which lets a test stop time between open and run.
        clock: the time every observation and history entry is stamped with.
        seed: seeds the only random choice the scheduler makes (which node ``lose_node``
            takes when none is named).
        capabilities: site declarations overriding the shape's answers; an operation whose
            capability is declared "no" is refused with Unsupported.
        allow_rank_restart: Kubeflow shape: the site lets ranks restart in place, which weakens
            execution identity (see ``identity_weakened``).
        namespace: the namespace of Kubeflow-shape refs (``<namespace>/<name>``).
        inventory: the nodes and queues the site declares, for the plan's resource check;
            by default nothing is declared and no spec is refused on resources.
    """

    name = "memory"
    #: Its state is behind the cluster's lock, so a supervisor may make calls from threads.
    call_concurrency = 16
    #: An in-process scheduler costs nothing to ask: poll as the supervisor always did, and
    #: faster when a test says so. Its watch replays what happened without waiting for news,
    #: so following it would wake nothing early (``watch=False``).
    pacing = spi.Pacing(interval=0.5, floor=0.001)

    def __init__(
        self,
        shape: Shape = Shape.SLURM,
        *,
        auto_run: bool = False,
        clock: Clock = system_clock,
        seed: int = 0,
        capabilities: Mapping[t.Capability, t.Support | t.Tristate]
        | Mapping[str, t.Support | t.Tristate | str]
        | None = None,
        allow_rank_restart: bool = False,
        namespace: str = "default",
        inventory: t.Inventory | None = None,
    ) -> None:
        declared = {
            t.Capability(cap): s
            if isinstance(s, t.Support)
            else t.Support(t.Tristate(s), t.Source.DECLARED)
            for cap, s in (capabilities or {}).items()
        }
        self.shape = Shape(shape)
        self.allow_rank_restart = allow_rank_restart
        self._inventory = inventory or t.Inventory(detail="the site declared no nodes")
        self._cluster = Cluster(
            shape=self.shape,
            auto_run=auto_run,
            clock=clock,
            seed=seed,
            namespace=namespace,
            declared=declared,
        )
        self._closed = False
        self.env = MemoryEnv(self._cluster)

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, clock: Clock = system_clock
    ) -> MemoryBackend:
        """Build from a configuration checked against :data:`CONFIG_SCHEMA`.

        Raises:
            ValidationError: an unknown key or a wrong value, naming it.
        """
        s = Settings.from_config(config)
        return cls(
            s.shape,
            auto_run=s.auto_run,
            clock=clock,
            seed=s.seed,
            capabilities=s.declared,
            allow_rank_restart=s.allow_rank_restart,
            namespace=s.namespace,
            inventory=s.inventory,
        )

    def __repr__(self) -> str:
        return f"MemoryBackend(shape={self.shape}, auto_run={self._cluster.auto_run})"

    # ------------------------------------------------------------------ plumbing

    def _call(self, method: str, body: Callable[[], T]) -> T:
        """Count the call, refuse it as the environment says, and run it under the lock."""
        c = self._cluster
        with c.lock:
            c.calls[method] += 1
            if self._closed:
                msg = f"memory backend is closed ({method})"
                raise Unavailable(msg)
            if not c.faults.reachable:
                msg = f"memory backend cannot be reached ({method})"
                raise Unreachable(msg)
            if not c.faults.authorized:
                msg = f"memory backend refused the credentials ({method})"
                raise Unauthorized(msg)
            return body()

    def _observe(self, obj: MemObject) -> spi.ObjectObs:
        """The observation of one object; every read of the SPI goes through here."""
        return self._cluster.observe(obj)

    # ------------------------------------------------------------------ Backend

    def capabilities(self, spec: t.JobSpec | None = None) -> Mapping[t.Capability, t.Support]:
        """The shape's answers with the site's declarations applied; the same for every spec."""
        return self._call("capabilities", self._cluster.supports)

    def inventory(self) -> t.Inventory:
        """The nodes and queues the site declared (``InventoryReporter``)."""
        return self._call("inventory", lambda: self._inventory)

    def preview(self, request: spi.StartRequest) -> str:
        """What ``start`` would create for ``request``, creating nothing (``SubmissionPreview``)."""
        return self._call("preview", lambda: self._cluster.preview(request))

    def rules(self, spec: t.JobSpec, policy: t.RecoveryPolicy) -> Sequence[t.RuleSupport]:
        """Native: yes for the shape's own action (Slurm requeue, Kubeflow restart) when every
        cause of the rule is one the scheduler reruns for; perform: the shape's table."""
        return self._call("rules", lambda: [self._rule(rule) for rule in policy.rules])

    def _rule(self, rule: t.Rule) -> t.RuleSupport:
        action, cap, causes = NATIVE[self.shape]
        native_cap = self._cluster.support(cap).answer
        source = t.Source.DECLARED
        if rule.action is not action:
            native = t.Support.no(source, f"the scheduler does not {rule.action} by itself")
        elif not set(rule.on) <= causes:
            others = ", ".join(str(k) for k in rule.on if k not in causes)
            native = t.Support.no(source, f"the scheduler does not {action} on {others}")
        elif native_cap is t.Tristate.YES:
            native = t.Support.yes(source, f"{cap}")
        else:
            native = t.Support(native_cap, source, f"{cap} is {native_cap}")
        answer = PERFORM[self.shape][rule.action]
        if rule.action is t.Action.HOLD and answer is t.Tristate.YES:
            answer = self._cluster.support(t.Capability.HOLD).answer
        return t.RuleSupport(native=native, perform=t.Support(answer, source))

    def start(self, request: spi.StartRequest) -> spi.ObjectRef:
        """Create one gated object named ``request.name``.

        Raises:
            Rejected: the scheduler refused it (``env.refuse_next_start``), or in the Kubeflow
                shape an object of that name exists already.
            OutcomeUnknown: the object was created but the reply lost (``env``).
            Unsupported: the spec needs a capability the cluster answers no for.
        """
        return self._call("start", lambda: self._cluster.create(request))

    def open(self, ref: spi.ObjectRef, meta: t.CallMeta | None = None) -> None:
        """Lift the gate; an object already open, running or ended (a gated one that was
        stopped included) is success with no effect. Rejected past ``meta.deadline``, judged by
        this backend's clock under its lock, where nothing can come between the check and the
        lift."""

        def body() -> None:
            c = self._cluster
            obj = c.get(ref)
            deadline = None if meta is None else meta.deadline
            if deadline is not None:
                c.check_deadline(deadline, f"open of {ref}")
            c.lift_gate(obj, deadline)

        self._call("open", body)

    def find(self, job: t.JobID) -> spi.Discovery:
        """Every object whose discovery name is the job's, lost Start replies included."""

        def body() -> spi.Discovery:
            c = self._cluster
            omit = c.consume_drops([job])
            objects = [] if job in omit else c.found(job)
            return spi.Discovery(
                job=job, objects=tuple(self._observe(o) for o in objects), at=c.clock()
            )

        return self._call("find", body)

    def inspect(self, ref: spi.ObjectRef) -> spi.ObjectObs:
        """One object now. Raises NotFound for a ref this backend never created."""
        return self._call("inspect", lambda: self._observe(self._cluster.get(ref)))

    def stop(self, ref: spi.ObjectRef, reason: str) -> None:
        """Stop this object only: a running execution ends ``cancelled`` (provenance actor), a
        gated or pending one ends without running. Already ended, or unknown, is success."""

        def body() -> None:
            obj = self._cluster.objects.get(ref)
            if obj is not None:
                self._cluster.stop(obj, reason)

        self._call("stop", body)

    def close(self) -> None:
        """Refuse further SPI calls with Unavailable; the environment stays usable."""
        with self._cluster.lock:
            self._cluster.calls["close"] += 1
            self._closed = True

    # ------------------------------------------------------------------ Holder

    def hold(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Place hold ``meta.instance`` on a gated, pending or held object (replacing the
        instance standing). Rejected when running or ended, or past ``meta.deadline``."""

        self._by_instance("hold", ref, meta, Cluster.place_hold)

    def release(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Lift the hold only if ``meta.instance`` is the one standing; another instance is a
        success with no effect. Rejected past ``meta.deadline``."""

        self._by_instance("release", ref, meta, Cluster.lift_hold)

    def _by_instance(
        self,
        verb: str,
        ref: spi.ObjectRef,
        meta: t.HoldMeta,
        act: Callable[[Cluster, MemObject, int, t.Actor | None], None],
    ) -> None:
        """A call of the hold family: refused without the hold capability or past its deadline,
        else ``act`` on the object for the hold instance named."""

        def body() -> None:
            c = self._cluster
            c.refuse_unless(t.Capability.HOLD, f"cannot {verb} {ref}")
            c.check_deadline(meta.deadline, f"{verb} {meta.instance} of {ref}")
            act(c, c.get(ref), meta.instance, meta.by)

        self._call(verb, body)

    # ------------------------------------------------------------------ Requeuer

    def _refuse_requeue(self, what: str) -> None:
        if PERFORM[self.shape][t.Action.REQUEUE] is t.Tristate.NO:
            msg = f"{what}: the {self.shape} shape has no requeue"
            raise Unsupported(msg)

    def requeue(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """End the running execution with cause ``requeued`` (provenance actor) and rerun the
        object as a new execution; an ended object goes back to pending. A gated, pending or
        held object has nothing to requeue: success with no effect. Slurm shape only."""

        def body() -> None:
            c = self._cluster
            self._refuse_requeue(f"cannot requeue {ref}")
            c.check_deadline(meta.deadline, f"requeue of {ref}")
            c.requeue(c.get(ref), meta.by, meta.reason, meta.deadline)

        self._call("requeue", body)

    def restore_requeue_bit(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """Clear the requeue bit: the object will not requeue itself any more. Slurm shape."""

        def body() -> None:
            c = self._cluster
            self._refuse_requeue(f"cannot restore the requeue bit of {ref}")
            c.check_deadline(meta.deadline, f"restore of the requeue bit of {ref}")
            c.force_bit(c.get(ref), False, by="restore")

        self._call("restore_requeue_bit", body)

    # ------------------------------------------------------------------ NativePolicyCompiler

    def compile(
        self, spec: t.JobSpec, rules: Mapping[int, t.Rule], remaining: Mapping[int, int]
    ) -> spi.NativeOffer:
        """The offer for the rules this shape enforces natively: their indices, remaining
        budgets, and the settings Start reads back (``on.<i>``: the causes of rule ``i``)."""

        def body() -> spi.NativeOffer:
            action, _cap, _causes = NATIVE[self.shape]
            chosen = sorted(
                i for i, rule in rules.items() if self._rule(rule).native.answer is t.Tristate.YES
            )
            settings = {"mode": str(action)} if chosen else {}
            for i in chosen:
                settings[f"on.{i}"] = ",".join(str(k) for k in rules[i].on)
            return spi.NativeOffer(
                rules=tuple(chosen),
                remaining={i: remaining.get(i, rules[i].budget) for i in chosen},
                settings=settings,
            )

        return self._call("compile", body)

    # ------------------------------------------------------------------ MultiFinder, Watcher

    def find_many(
        self, jobs: Sequence[t.JobID], states: Sequence[t.ObjectState] = ()
    ) -> Mapping[t.JobID, spi.Discovery]:
        """One query for many jobs; with ``states``, only objects in those states."""

        def body() -> dict[t.JobID, spi.Discovery]:
            c = self._cluster
            wanted = set(states)
            omit = c.consume_drops(list(jobs))
            result = {}
            for job in jobs:
                objects = [] if job in omit else c.found(job)
                shown = [self._observe(o) for o in objects]
                if wanted:
                    shown = [o for o in shown if o.state in wanted]
                result[job] = spi.Discovery(job=job, objects=tuple(shown), at=c.clock())
            return result

        return self._call("find_many", body)

    def watch(self, job: t.JobID) -> Iterator[spi.ObjectObs]:
        """Observations of the job's objects: first each one as it is now, then every change
        made since, each as a snapshot taken when it happened.

        The iterator never blocks: it ends once it has caught up with the scheduler, since the
        memory backend has no thread of its own to wait on. Iterating lazily while another
        thread drives the environment shows those changes too; call ``watch`` again to go on.
        """

        def body() -> tuple[list[spi.ObjectObs], int]:
            c = self._cluster
            c.watched = True
            now = [self._observe(o) for o in c.objects.values() if o.job == job]
            return now, len(c.changes)

        first, cursor = self._call("watch", body)
        return self._follow_changes(job, first, cursor)

    def _follow_changes(
        self, job: t.JobID, first: list[spi.ObjectObs], cursor: int
    ) -> Iterator[spi.ObjectObs]:
        yield from first
        while True:
            with self._cluster.lock:
                pending = [obs for _, j, obs in self._cluster.changes[cursor:] if j == job]
                cursor = len(self._cluster.changes)
            if not pending:
                return
            yield from pending

    # ------------------------------------------------------------------ the rest

    def ceased(self, ref: spi.ObjectRef) -> spi.CessationEvidence:
        """Yes once the object has ended; before that, what the environment set (unknown)."""

        def body() -> spi.CessationEvidence:
            c = self._cluster
            obj = c.get(ref)
            if obj.state is t.ObjectState.ENDED:
                return spi.CessationEvidence(ceased=t.Tristate.YES, detail="ended", at=c.clock())
            return spi.CessationEvidence(ceased=obj.ceased, detail="site signal", at=c.clock())

        return self._call("ceased", body)

    def identity_weakened(self, spec: t.JobSpec) -> str:
        """Kubeflow shape with ``allow_rank_restart``: why identity is weakened; else ""."""

        def body() -> str:
            if self.shape is Shape.KUBEFLOW and self.allow_rank_restart:
                return _WEAKENED
            return ""

        return self._call("identity_weakened", body)

    def output(
        self, ref: spi.ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
    ) -> IO[bytes]:
        """The bytes written to ``stream`` by ``rank`` so far, or with ``follow`` a stream that
        waits for more until the object ends. NotFound for an unknown ref."""

        def body() -> IO[bytes]:
            c = self._cluster
            c.refuse_unless(t.Capability.OUTPUT_READ, f"cannot read the output of {ref}")
            if follow:
                c.refuse_unless(t.Capability.OUTPUT_FOLLOW, f"cannot follow the output of {ref}")
            obj = c.get(ref)
            if follow:
                return output.follow(c, obj, stream, rank)
            return output.snapshot(obj, stream, rank)

        return self._call("output", body)
