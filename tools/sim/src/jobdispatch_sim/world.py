"""The simulated world: one seed, one clock, one generator, one thread.

It owns everything nondeterministic the code under test touches (time, randomness, the store,
the backends, the processes' lives) and drives the real ``Executor`` through it, step by step:

* **safety phase**: faults on. Each step is one thing happening, drawn with the seed's weights:
  a supervisor pass, the cluster doing something to an object, a person's action, time passing
  (or a supervisor's clock jumping), a backend fault armed, a supervisor crashing. Inside a
  pass, the wrappers' fault points may crash or pause the process mid-step. After every step
  the checkers fold the new part of the timeline.
* **liveness phase**: faults off, crashed supervisors restarted, a diligent person at hand; the
  jobs must settle or be escalated within the phase's simulated time.

Nothing sleeps and nothing reads the wall clock; the world's clock moves only when a step says.
"""

from __future__ import annotations

import functools
import random
import traceback
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import attrs
from jobdispatch.clock import ManualClock
from jobdispatch.cluster import Cluster, compose
from jobdispatch.errors import DispatchError, Invalid, Rejected
from jobdispatch.members import (
    HOLD_OPERATOR,
    OBJ_GATED,
    OBJ_HELD,
    OBJ_PENDING,
    OBJ_RUNNING,
    TRI_YES,
)
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory.progress import MemoryProgress
from jobdispatch.records import events as ev
from jobdispatch.records.events import AnyEvent, Header, View
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Lease, ListFilter
from jobdispatch.spi import Discovery, ObjectRef, find_all
from jobdispatch.steps import Wait
from jobdispatch.timing import ABSENCE_GRACE
from jobdispatch.triggers import Unresolved
from jobdispatch.types import Actor as JdActor
from jobdispatch_supervise.executor import Executor, Pass
from jobdispatch_supervise.ownership import Ownership
from jobdispatch_supervise.progress import ProgressPoll
from jobdispatch_supervise.sinks import EscalationMessage

from jobdispatch_sim import workload
from jobdispatch_sim.backend import SimBackend
from jobdispatch_sim.checkers import Checker, Violation, all_checkers
from jobdispatch_sim.checkers import liveness as liveness_check
from jobdispatch_sim.coverage import Coverage
from jobdispatch_sim.faults import Crash, PowerCut
from jobdispatch_sim.options import SimOptions
from jobdispatch_sim.store import SimStore
from jobdispatch_sim.timeline import (
    Call,
    Commit,
    Control,
    Happened,
    Note,
    Progressed,
    Submitted,
    Timeline,
    job_of_name,
)

_SHAPE_KUBEFLOW = Shape.KUBEFLOW
_SHAPE_SLURM = Shape.SLURM

#: How long a supervisor's lease lasts without renewal (the Supervisor's default).
LEASE_TTL = timedelta(seconds=30)
START = datetime(2026, 1, 1, tzinfo=UTC)
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
#: What the fold checker asks ``list`` for after every step: every record, settled or not.
_EVERY_RECORD = ListFilter()


class Stop(BaseException):
    """Raised inside the world when a checker found a violation. A BaseException, so that the
    code under test's ``except Exception`` cannot swallow it on its way out of a paused step."""

    def __init__(self, violations: list[Violation]) -> None:
        super().__init__(str(violations[0]))
        self.violations = violations


@attrs.frozen
class ActorCtx:
    """Who is acting now: a supervisor process, a person, the cluster, or the simulator."""

    name: str
    proc: Proc | None = None
    kind: str = "sim"


class _Acting:
    """The context of World.acting: pushes the actor on entry, pops it on any exit. (A class,
    not a generator context manager: every pass and every person's action enters one.)"""

    __slots__ = ("actor", "stack")

    def __init__(self, stack: list[ActorCtx], actor: ActorCtx) -> None:
        self.stack = stack
        self.actor = actor

    def __enter__(self) -> None:
        self.stack.append(self.actor)

    def __exit__(self, *exc: object) -> None:
        self.stack.pop()


class SimSink:
    """An escalation sink that sometimes fails, so delivery is retried and recorded once."""

    name = "sim"

    def __init__(self, world: World) -> None:
        self.world = world

    def deliver(self, message: EscalationMessage) -> None:
        world = self.world
        if world.faults_on and world.chance(world.opts.p_sink_fails):
            msg = f"sink down (escalation {message.id})"
            raise RuntimeError(msg)
        world.cover("escalation delivered")


class Proc:
    """One supervisor process: its identity, its clock, its leases. A crash loses all of it but
    the name; a restart is a new holder, as a real restart (new pid) would be."""

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.incarnation = 0
        self.alive = False
        self.skew = timedelta(0)
        self.down_until = START
        self.ownership = self._ownership()
        self.executors: dict[str, Executor] = {}
        self.restart()

    @property
    def holder(self) -> str:
        return f"{self.name}.{self.incarnation}"

    def now(self) -> datetime:
        return self.world.clock() + self.skew

    def _ownership(self) -> Ownership:
        """The Supervisor's own ownership piece, on this process's clock; a new one is a
        process that remembers no lease."""
        return Ownership(self.world.store, self.holder, LEASE_TTL, self.now)

    def restart(self) -> None:
        self.incarnation += 1
        self.alive = True
        self.ownership = self._ownership()
        self.executors = {
            shape: Executor(
                backend,
                self.world.store,
                clock=self.now,
                holder=self.holder,
                sinks=[self.world.sink],
            )
            for shape, backend in self.world.backends.items()
        }

    def die(self, until: datetime) -> None:
        self.alive = False
        self.ownership = self._ownership()
        self.executors = {}
        self.down_until = until


class World:
    """One simulated run. ``run()`` plays both phases and returns the violations (at most the
    first step's worth: the run stops at the first)."""

    def __init__(self, opts: SimOptions) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.clock = ManualClock(START)
        self.timeline = Timeline()
        self.coverage = Coverage()
        self.checkers: list[Checker] = all_checkers()
        self.faults_on = True
        self.depth = 0
        self.stack: list[ActorCtx] = [ActorCtx("sim")]
        self.store = SimStore(MemoryRecords(self.clock, validate=False), self)
        self.sink = SimSink(self)
        self.backends: dict[str, SimBackend] = {}
        self.clusters: dict[str, Cluster] = {}
        for shape, auto in (
            (_SHAPE_SLURM, opts.auto_run_slurm),
            (_SHAPE_KUBEFLOW, opts.auto_run_kubeflow),
        ):
            inner = MemoryBackend(shape=shape, auto_run=auto, clock=self.clock, seed=opts.seed)
            backend = SimBackend(inner, self)
            self.backends[str(shape)] = backend
            self.clusters[str(shape)] = compose(
                backend, store=self.store, clock=self.clock, new_id=self._new_id
            )
        self._cursor = dict.fromkeys(self.backends, 0)
        # Each backend keeps one history for its whole life, appending to one list in place;
        # sync_history (run at every note) reads that list, whose len() costs no Python call.
        self._histories = [
            (shape, b.inner.env.history._entries) for shape, b in self.backends.items()
        ]
        self.jobs: list[str] = []
        self.shape_of: dict[str, str] = {}
        self.settled: set[str] = set()
        self.last_decision: dict[str, str] = {}
        self.last_find_truthful: dict[str, bool] = {}
        self.drop_pending: set[str] = set()
        self.blind_until: dict[str, datetime] = {}
        self.hidden_jobs: set[str] = set()
        self.delay_armed = dict.fromkeys(self.backends, 0)
        self.unreachable_until: dict[str, datetime] = {}
        self._creating_shape = ""
        self._checked = 0
        #: The jobs' checkpoint roots as their helpers write them, and what the simulator plays
        #: of progress, from a generator of its own (a seed without progress draws nothing
        #: from it, and the run's own draws are as before progress existed).
        self.progress = MemoryProgress()
        self.prng = random.Random(f"progress-world:{opts.seed}")
        #: Pending deadlines, from a generator of their own likewise.
        self.pending_rng = random.Random(f"pending-world:{opts.seed}")
        self.root_of: dict[str, str] = {}
        self.step_of: dict[str, int] = {}
        self.runs_seen: set[tuple[str, str, int]] = set()
        self.hung: set[tuple[str, str, int]] = set()
        self.hung_runs: dict[str, int] = {}
        self.procs = [Proc(self, f"sup-{chr(ord('a') + i)}") for i in range(opts.supervisors)]
        for proc in self.procs:
            if opts.max_skew:
                proc.skew = timedelta(
                    seconds=self.rng.uniform(-1, 1) * opts.max_skew.total_seconds()
                )
        self.arrivals = sorted(
            [0] + [self.rng.randint(0, opts.safety_steps // 2) for _ in range(opts.jobs - 1)]
        )
        self.steps_done = 0
        # What random_action draws from: the options are frozen, so the weights (and their
        # total, summed in the same order as a per-step sum would) are fixed for the run.
        self._action_weights = (
            (opts.w_pass, "pass"),
            (opts.w_env, "env"),
            (opts.w_operator, "operator"),
            (opts.w_time, "time"),
            (opts.w_fault, "fault"),
            (opts.w_crash, "crash"),
        )
        self._action_total = sum(w for w, _ in self._action_weights)

    # ------------------------------------------------------------------ small helpers

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def cover(self, name: str) -> None:
        self.coverage.cover(name)

    @property
    def current(self) -> ActorCtx:
        return self.stack[-1]

    def acting(self, actor: ActorCtx) -> _Acting:
        """``with world.acting(actor):`` makes ``actor`` the current one for the block."""
        return _Acting(self.stack, actor)

    def _new_id(self) -> str:
        raw = self.rng.getrandbits(60)
        return "".join(_ALPHABET[(raw >> (5 * i)) & 31] for i in range(12))

    def note(self, kind: str, text: str) -> None:
        self.timeline.add(Note(seq=self.timeline.next_seq, at=self.clock(), kind=kind, text=text))

    # ------------------------------------------------------------------ the timeline

    def sync_history(self) -> None:
        """Merge what the backends did since the last look into the timeline, in order."""
        cursor = self._cursor
        for shape, history in self._histories:
            start = cursor[shape]
            end = len(history)
            if start == end:
                continue
            for entry in history[start:end]:
                self.timeline.add(Happened(seq=self.timeline.next_seq, shape=shape, entry=entry))
                if type(entry).__name__ == "Created" and self.delay_armed[shape]:
                    self.delay_armed[shape] -= 1
                    job = job_of_name(entry.name)
                    if job:
                        self.hidden_jobs.add(job)
            self._cursor[shape] = end

    def note_created(self, header: Header) -> None:
        self.sync_history()
        job = header.job
        self.jobs.append(job)
        self.shape_of[job] = self._creating_shape
        if header.spec.progress is not None:
            self.root_of[job] = header.spec.progress.root
        self.timeline.add(
            Submitted(seq=self.timeline.next_seq, at=self.clock(), job=job, header=header)
        )

    def note_commit(
        self, job: str, first: int, events: Sequence[AnyEvent], owner: Lease | None
    ) -> None:
        self.sync_history()
        actor = self.current.name
        for i, event in enumerate(events):
            token = (owner.token if owner is not None else None) if event.decision else None
            self.timeline.add(
                Commit(
                    seq=self.timeline.next_seq,
                    at=self.clock(),
                    job=job,
                    revision=first + i,
                    event=event,
                    actor=actor,
                    token=token,
                )
            )
            if event.decision:
                self.last_decision[job] = event.kind
            if isinstance(event, ev.Settled):
                self.settled.add(job)

    def note_call(self, op: str, job: str, target: str, result: str) -> None:
        self.sync_history()
        self.timeline.add(
            Call(
                seq=self.timeline.next_seq,
                at=self.clock(),
                actor=self.current.name,
                op=op,
                job=job,
                target=target,
                result=result,
            )
        )

    def before_find(self, backend: SimBackend, job: str) -> None:
        """Inside a lagging listing's window, the find about to be made misses the job's
        objects. Armed only right before a find that will consume it (never while the backend
        is unreachable), so a miss never outlives its window."""
        until = self.blind_until.get(job)
        if (
            self.faults_on
            and until is not None
            and self.clock() < until
            and job not in self.drop_pending
            and backend.shape not in self.unreachable_until
        ):
            backend.inner.env.drop_next_observation(job)
            self.drop_pending.add(job)

    def note_find(self, backend: SimBackend, job: str, found: Discovery) -> None:
        truth = set(backend.inner.env.objects_of(job))
        shown = {o.ref for o in found.objects}
        truthful = shown == truth
        if not truthful:
            self.cover("a find missed objects")
        self.last_find_truthful[job] = truthful
        self.drop_pending.discard(job)
        self.hidden_jobs.discard(job)

    # ------------------------------------------------------------------ fault points

    def point(self, where: str, job: str, what: str | Sequence[AnyEvent]) -> None:
        """A moment inside a step where the acting process may crash or pause."""
        if not self.faults_on:
            return
        actor = self.current
        proc = actor.proc
        opts = self.opts

        def op() -> str:  # what is being done, for the messages (built only when one is)
            return what if isinstance(what, str) else "+".join(e.kind for e in what)

        if proc is not None:
            if where == "call.before" and self.chance(opts.p_crash_before_call):
                self._crash_here(proc, job, f"before its {op()} call")
            elif where == "call.after" and self.chance(opts.p_crash_after_call):
                self._crash_here(proc, job, f"after its {op()} call")
            elif where == "store.before" and self.chance(opts.p_crash_before_call / 2):
                self._crash_here(proc, job, f"before committing {op()}")
        elif (
            actor.name == "op:cancel"
            and where == "call.before"
            and op() == "stop"
            and self.chance(opts.p_crash_before_call * 2)
        ):
            self.cover("operator crashed between cancel commit and its stops")
            raise Crash("the operator's process died during the cancel")
        if self.depth == 0 and actor.kind in ("sup", "op") and self.chance(opts.p_pause):
            self._pause(actor, job)

    def _crash_here(self, proc: Proc, job: str, where: str) -> None:
        if "before its start" in where:
            self.cover("crash between attempt commit and Start")
        elif "after its start" in where:
            self.cover("crash between Start and its reply commit")
        elif "before its open" in where:
            self.cover("crash between open decision and open call")
        if self.last_decision.get(job) == "canonical-chosen":
            self.cover("crash between canonical and open")
        raise Crash(f"{proc.holder} crashed {where} ({job})")

    def _pause(self, actor: ActorCtx, job: str) -> None:
        """The actor stops here while others act; maybe long enough to lose its lease."""
        proc = actor.proc
        self.cover("pause inside a step")
        self.depth += 1
        try:
            lease = proc.ownership.held(job) if proc is not None else None
            if lease is not None and self.chance(self.opts.p_pause_steals_lease):
                gap = lease.expires - self.clock() + timedelta(seconds=self.rng.uniform(1, 20))
                if gap > timedelta(0):
                    self.clock.advance(gap)
                self.note("pause", f"{actor.name} paused past its lease on {job}")
                self.cover("lease lapsed while its holder was paused")
                others = [p for p in self.procs if p.alive and p is not proc]
                if others:
                    self.supervise(self.rng.choice(others), job)
            else:
                self.note("pause", f"{actor.name} paused on {job}")
            for _ in range(self.rng.randint(1, 4)):
                self.random_action(exclude=proc)
        finally:
            self.depth -= 1
        if proc is not None and not proc.alive:
            raise Crash(f"{proc.holder} died while paused")

    # ------------------------------------------------------------------ actors

    def supervise(self, proc: Proc, job: str, discovery: Discovery | None = None) -> Pass | None:
        """One pass of ``proc`` over ``job``, exactly as the Supervisor's loop makes it."""
        if not proc.alive:
            return None
        shape = self.shape_of[job]
        with self.acting(ActorCtx(proc.holder, proc, "sup")):
            try:
                lease = proc.ownership.own(job)
                if lease is None:
                    return None
                # As the Supervisor's loop: each pass a poll of its own, reading progress.
                result = proc.executors[shape].run_batch(
                    [(job, lease, discovery)], self._progress_poll(proc)
                )[0]
                if result.error is not None:
                    raise result.error
            except Crash as exc:
                self._died(proc, exc)
                return None
            except Stop:
                raise
            except Exception as exc:
                self._failed(proc, job, exc)
                return None
        return self._passed(proc, job, result)

    def supervise_batch(self, proc: Proc, shape: str, found: dict[str, Discovery]) -> None:
        """One pass of ``proc`` over every job of ``found`` it owns, as one batch through the
        executor's phases, as the Supervisor's serve loop makes it."""
        with self.acting(ActorCtx(proc.holder, proc, "sup")):
            batch: list[tuple[str, Lease, Discovery | None]] = []
            try:
                owned = proc.ownership.own_many(list(found))
                batch = [(job, lease, found[job]) for job, lease in owned.items()]
                poll = self._progress_poll(proc)
                results = proc.executors[shape].run_batch(batch, poll) if batch else []
            except Crash as exc:
                self._died(proc, exc)
                return
            except Stop:
                raise
            except Exception as exc:
                self._failed(proc, batch[-1][0] if batch else "-", exc)
                return
            stepped = [r for r in results if r.step is not None and not isinstance(r.step, Wait)]
            if len(stepped) > 1:
                self.cover("one batch executed several jobs' steps")
            for (job, _, _), result in zip(batch, results, strict=True):
                if result.error is not None:
                    self._failed(proc, job, result.error)
                else:
                    self._passed(proc, job, result)

    def _progress_poll(self, proc: Proc) -> ProgressPoll | None:
        """A poll's reading of progress, where any job names a progress source."""
        return ProgressPoll(self.progress, proc.holder) if self.root_of else None

    def note_progress(
        self,
        what: str,
        root: str,
        job: str = "",
        step: int | None = None,
        submission: int = 0,
        execution: str = "",
    ) -> None:
        self.timeline.add(
            Progressed(
                seq=self.timeline.next_seq,
                at=self.clock(),
                job=job,
                root=root,
                what=what,
                step=step,
                submission=submission,
                execution=execution,
            )
        )

    def _is_hung(self, env: object, ref: ObjectRef) -> bool:
        """Whether the run ``ref`` runs now is one the simulator made hang."""
        index = self.hung_runs.get(ref.id)
        if index is None:
            return False
        runs = env.shows(ref).executions  # type: ignore[attr-defined]
        return bool(runs) and runs[-1].index == index

    def progress_action(self) -> None:
        """The jobs' helpers and their checkpoint store act, from the progress generator: each
        running run of a job with a progress source resumes (once, from the newest checkpoint),
        then marks or publishes a step now and then, unless it hung; a root may go blind, or
        see again (always, once faults are off)."""
        if not self.root_of:
            return
        rng = self.prng
        opts = self.opts
        now = self.clock()
        for root in sorted(set(self.root_of.values())):
            blind = self.progress.is_blind(root)
            if blind and (not self.faults_on or rng.random() < 0.3):
                self.progress.see(root)
                self.note_progress("see", root)
            elif (
                not blind
                and self.faults_on
                and opts.p_progress_blind
                and (rng.random() < opts.p_progress_blind)
            ):
                self.progress.blind(root)
                self.note_progress("blind", root)
        for job, root in self.root_of.items():
            if job in self.settled:
                continue
            inner = self.backends[self.shape_of[job]].inner
            for obs in inner.env.observe(job):
                if obs.state is not OBJ_RUNNING or not obs.executions:
                    continue
                run = obs.executions[-1]
                identity = obs.identity
                if run.state is not OBJ_RUNNING or identity is None:
                    continue
                n = identity[1]
                key = (job, obs.ref.id, run.index)
                execution = str(run.index)
                if key not in self.runs_seen:
                    self.runs_seen.add(key)
                    step = self.progress.resume(root, job, n, execution, now)
                    if step is not None:
                        self.step_of[job] = step
                        self.note_progress("resume", root, job, step, n, execution)
                if key in self.hung:
                    continue
                if self.faults_on and opts.p_hang and rng.random() < opts.p_hang:
                    self.hung.add(key)
                    self.hung_runs[obs.ref.id] = run.index
                    self.note_progress("hang", root, job, None, n, execution)
                    continue
                if rng.random() < 0.6:
                    step = self.step_of.get(job, 0) + rng.randint(1, 50)
                    self.step_of[job] = step
                    if rng.random() < 0.4:
                        self.progress.publish(root, job, step, now, n, execution)
                        self.note_progress("publish", root, job, step, n, execution)
                    else:
                        self.progress.mark(root, job, step, now, n, execution)
                        self.note_progress("mark", root, job, step, n, execution)

    def _failed(self, proc: Proc, job: str, exc: Exception) -> None:
        """What ended ``proc``'s pass over ``job``: a fault it survives, or a violation."""
        if isinstance(exc, Invalid):
            self._fail(6, "records fold and list", job, f"the supervisor raised {exc}")
        elif isinstance(exc, DispatchError):
            self.note("pass-failed", f"{proc.holder} on {job}: {type(exc).__name__}: {exc}")
        else:
            tb = traceback.format_exception(exc, limit=6)
            lines = "".join(tb).strip().splitlines()
            self._fail(
                0,
                "the code under test raised",
                job,
                f"{type(exc).__name__}: {exc} | " + " | ".join(lines[-4:]),
            )

    def _passed(self, proc: Proc, job: str, result: Pass) -> Pass:
        if result.conflict:
            proc.ownership.forget(job)
            self.cover("decision lost a race")
        return result

    def _died(self, proc: Proc, exc: Crash) -> None:
        if isinstance(exc, PowerCut):
            self.note("power-cut", f"{exc}; every supervisor dies")
            for p in self.procs:
                if p.alive:
                    p.die(self.clock() + timedelta(seconds=self.rng.uniform(10, 120)))
            return
        self.note("crash", str(exc))
        proc.die(self.clock() + timedelta(seconds=self.rng.uniform(1, 120)))

    def _fail(self, invariant: int, name: str, job: str, detail: str) -> None:
        raise Stop(
            [
                Violation(
                    invariant=invariant,
                    name=name,
                    job=job,
                    detail=detail,
                    seq=self.timeline.next_seq,
                )
            ]
        )

    def poll(self, proc: Proc) -> None:
        """The serve path: one find for all of a shape's jobs, then one batch of passes."""
        shape = self.rng.choice(sorted(self.backends))
        jobs = [j for j in self.jobs if self.shape_of[j] == shape and j not in self.settled]
        if not jobs or not proc.alive:
            return
        with self.acting(ActorCtx(proc.holder, proc, "sup")):
            try:
                found = find_all(self.backends[shape], jobs)
            except Crash as exc:
                self._died(proc, exc)
                return
            except DispatchError as exc:
                self.note("poll-failed", f"{proc.holder}: {type(exc).__name__}")
                return
        self.supervise_batch(proc, shape, {job: found[job] for job in jobs})

    def env_action(self, *, calm: bool = False) -> None:
        """The cluster does something to one object of one job."""
        active = [j for j in self.jobs if j not in self.settled]
        if not active:
            return
        job = self.rng.choice(active)
        env = self.backends[self.shape_of[job]].inner.env
        refs = env.objects_of(job)
        if not refs:
            return
        ref = self.rng.choice(refs)
        self._env_on(env, ref, calm)

    def _env_on(self, env: object, ref: ObjectRef, calm: bool) -> None:
        from jobdispatch.memory import MemoryEnv

        assert isinstance(env, MemoryEnv)
        state = env.state(ref)
        rng = self.rng
        with self.acting(ActorCtx("cluster", None, "env")):
            try:
                if state is OBJ_PENDING:
                    if rng.random() < (0.95 if calm else 0.85):
                        env.run(ref)
                    else:
                        env.launch_fail(ref)
                elif state is OBJ_RUNNING and self._is_hung(env, ref):
                    # A hung run never ends by itself: only the cluster ends it (a preemption,
                    # a lost node, its time limit), rarely once faults are off.
                    hung_endings: list[tuple[float, Callable[[ObjectRef], object]]] = [
                        (1.5, env.preempt),
                        (1.0, env.lose_node),
                        (0.8, env.time_out),
                    ]
                    if rng.random() < (0.05 if calm else 0.15):
                        pick = rng.uniform(0, 3.3)
                        for weight, fn in hung_endings:
                            pick -= weight
                            if pick <= 0:
                                fn(ref)
                                break
                elif state is OBJ_RUNNING:
                    endings: list[tuple[float, Callable[[ObjectRef], object]]] = [
                        (8.0 if calm else 3.5, env.complete),
                        (1.2, env.fail),
                        (1.5, env.preempt),
                        (1.0, env.lose_node),
                        (1.0, env.oom),
                        (0.8, env.time_out),
                        (0.4, lambda r: env.signal(r, 11)),
                        (0.3, env.launch_fail),
                    ]
                    total = sum(w for w, _ in endings)
                    pick = rng.uniform(0, total)
                    for weight, fn in endings:
                        pick -= weight
                        if pick <= 0:
                            fn(ref)
                            break
                elif state in (OBJ_GATED, OBJ_HELD) and rng.random() < 0.2:
                    env.set_ceased(ref, TRI_YES)
            except Invalid:
                pass
        self.sync_history()

    def operator_action(self) -> None:
        """A person acts on a random job, as the operator API lets them."""
        if not self.jobs:
            return
        job = self.rng.choice(self.jobs)
        shape = self.shape_of[job]
        operator = self.clusters[shape].operator
        person = JdActor.human("sim-person")
        now = self.clock()
        choices: list[tuple[float, str, Callable[[], object]]] = [
            (1.0, "cancel", lambda: operator.cancel(job, by=person, reason="sim")),
            (
                1.2,
                "hold",
                lambda: operator.hold(
                    job,
                    by=person,
                    reason="sim",
                    until=None
                    if self.rng.random() < 0.5
                    else now + timedelta(minutes=self.rng.choice((2, 15, 60))),
                ),
            ),
            (1.6, "release", lambda: operator.release(job, by=person)),
            (0.7, "resubmit", lambda: operator.resubmit(job, by=person)),
            (0.4, "give_up", lambda: operator.give_up(job, by=person)),
            (0.6, "requeue", lambda: operator.requeue(job, by=person)),
            (0.5, "abandon", lambda: self._abandon(job)),
            (0.15, "supersede", lambda: self._supersede(job)),
        ]
        total = sum(w for w, _, _ in choices)
        pick = self.rng.uniform(0, total)
        for weight, name, fn in choices:
            pick -= weight
            if pick <= 0:
                self.person(name, job, fn)
                return

    def person(self, op: str, job: str, fn: Callable[[], object]) -> None:
        actor = f"op:{op}"
        seq = self.timeline.next_seq
        self.timeline.add(
            Control(seq=seq, at=self.clock(), actor=actor, op=op, job=job, phase="invoke")
        )
        with self.acting(ActorCtx(actor, None, "op")):
            try:
                fn()
            except Crash as exc:
                self.note("operator-crash", str(exc))
                return
            except DispatchError as exc:
                self.sync_history()
                self.timeline.add(
                    Control(
                        seq=self.timeline.next_seq,
                        at=self.clock(),
                        actor=actor,
                        op=op,
                        job=job,
                        phase="fail",
                        detail=f"{type(exc).__name__}: {str(exc)[:80]}",
                    )
                )
                return
        self.sync_history()
        self.timeline.add(
            Control(
                seq=self.timeline.next_seq, at=self.clock(), actor=actor, op=op, job=job, phase="ok"
            )
        )
        self.coverage.observe(self.timeline.items[-1])

    def _abandon(self, job: str) -> None:
        from jobdispatch.job import fold

        folded = fold(self.store.inner.read(job), self.clock())
        attempts = folded.unresolved_attempts()
        if not attempts:
            raise Invalid(f"job {job} has no unresolved attempt")
        a = self.rng.choice(attempts)
        self.clusters[self.shape_of[job]].operator.abandon(
            job, a.n, a.k, by=JdActor.human("sim-person")
        )

    def _supersede(self, job: str) -> None:
        if len(self.jobs) >= self.opts.jobs + 2:
            raise Invalid("enough jobs already")
        self._creating_shape = self.shape_of[job]
        self.clusters[self._creating_shape].operator.supersede(
            job, by=JdActor.human("sim-person"), reason="sim"
        )

    def submit(self, index: int) -> bool:
        """A person submits the next job; False when the cluster could not be asked (the
        person tries again at the next step)."""
        plan = workload.with_pending(
            self.pending_rng,
            self.opts,
            workload.with_progress(
                self.prng, self.opts, index, workload.draw(self.rng, self.opts, index)
            ),
        )
        shape = str(plan.shape)
        operator = self.clusters[shape].operator
        person = JdActor.human("sim-person")
        self._creating_shape = shape

        def go(accept: Sequence[int] = ()) -> object:
            return operator.submit(
                plan.spec,
                by=person,
                supervised=plan.supervised,
                accept_unenforced=accept,
                unmatched=plan.unmatched,
                submit_retries=plan.submit_retries,
            )

        with self.acting(ActorCtx("op:submit", None, "op")):
            try:
                try:
                    go()
                except Rejected:
                    self.cover("submit needed accept_unenforced")
                    go(range(len(plan.spec.recovery.rules)))
            except DispatchError as exc:
                self.note("submit-failed", f"{type(exc).__name__}: {exc}")
                return False
        return True

    def time_passes(self) -> None:
        rng = self.rng
        opts = self.opts
        roll = rng.random()
        if roll < 0.04:
            jump = timedelta(minutes=rng.uniform(5, 40))
            self.clock.advance(jump)
            self.note("clock", f"world clock jumped forward {int(jump.total_seconds())}s")
            self.cover("clock jumped forward")
        elif roll < 0.12 and opts.max_skew and self.procs:
            proc = rng.choice(self.procs)
            limit = opts.max_skew.total_seconds()
            new = timedelta(seconds=rng.uniform(-limit, limit))
            if new < proc.skew and not self.chance(opts.p_clock_backward):
                new = proc.skew + (proc.skew - new)
            if new < proc.skew:
                self.cover("a supervisor's clock went backward")
            self.note("clock", f"{proc.holder}'s clock now off by {new.total_seconds():+.1f}s")
            proc.skew = new
        else:
            self.clock.advance(rng.choice((0.5, 1, 3, 10, 30, 61, 120)))

    def arm_fault(self) -> None:
        rng = self.rng
        opts = self.opts
        shape = rng.choice(sorted(self.backends))
        env = self.backends[shape].inner.env
        options: list[tuple[float, str]] = [
            (opts.p_lose_reply, "lose-reply"),
            (opts.p_refuse_start, "refuse-start"),
            (opts.p_drop_observation, "drop"),
            (opts.p_delay_object, "delay"),
            (opts.p_unreachable, "unreachable"),
            (opts.p_requeue_bit, "requeue-bit"),
        ]
        total = sum(w for w, _ in options)
        if total <= 0:
            return
        pick = rng.uniform(0, total)
        kind = options[-1][1]
        for weight, name in options:
            pick -= weight
            if pick <= 0:
                kind = name
                break
        jobs = [j for j in self.jobs if self.shape_of[j] == shape and j not in self.settled]
        if kind == "lose-reply":
            env.lose_next_start_reply()
        elif kind == "refuse-start":
            env.refuse_next_start("no capacity right now")
        elif kind == "drop":
            # A lagging listing: the job's objects are missing from every find for a while,
            # shorter than the absence grace, and a grace apart from the job's last window
            # (see faults.py).
            now = self.clock()
            ok = [
                j
                for j in jobs
                if self.last_find_truthful.get(j, True)
                and j not in self.drop_pending
                and j not in self.hidden_jobs
                and self.blind_until.get(j, now - ABSENCE_GRACE) + ABSENCE_GRACE <= now
            ]
            if not ok:
                return
            job = rng.choice(ok)
            # At least the next find misses; later ones too while the window lasts.
            self.blind_until[job] = now + timedelta(
                seconds=rng.uniform(0.001, max(0.001, opts.max_blind.total_seconds()))
            )
        elif kind == "delay":
            now = self.clock()
            if (
                self.drop_pending
                or self.delay_armed[shape]
                or any(until > now for until in self.blind_until.values())
            ):
                return
            env.delay_next_object()
            self.delay_armed[shape] += 1
        elif kind == "unreachable":
            env.set_reachable(False)
            self.unreachable_until[shape] = self.clock() + timedelta(
                seconds=rng.choice((5, 30, 120))
            )
        elif kind == "requeue-bit":
            if shape != str(_SHAPE_SLURM) or not jobs:
                return
            refs = env.objects_of(rng.choice(jobs))
            if not refs:
                return
            env.set_requeue_bit(rng.choice(refs), True)
            self.cover("requeue bit forced")
        self.note("fault", f"{shape}: {kind}")

    def crash_someone(self) -> None:
        alive = [p for p in self.procs if p.alive]
        if not alive:
            return
        proc = self.rng.choice(alive)
        if self.chance(0.1):
            self._died(proc, PowerCut("power cut between steps"))
            return
        self._died(proc, Crash(f"{proc.holder} crashed between steps"))

    def housekeeping(self) -> None:
        """Restart processes whose downtime ended; end network partitions that ran out."""
        now = self.clock()
        for proc in self.procs:
            if not proc.alive and proc.down_until <= now:
                proc.restart()
                self.note("restart", f"{proc.holder} started")
        if not self.unreachable_until:
            return
        for shape, until in list(self.unreachable_until.items()):
            if until <= now or not self.faults_on:
                self.backends[shape].inner.env.set_reachable(True)
                del self.unreachable_until[shape]

    def random_action(self, exclude: Proc | None = None) -> None:
        """One thing happens, drawn with the seed's weights."""
        opts = self.opts
        weights = self._action_weights
        pick = self.rng.uniform(0, self._action_total)
        kind = "pass"
        for weight, name in weights:
            pick -= weight
            if pick <= 0:
                kind = name
                break
        if kind == "pass":
            procs = [p for p in self.procs if p.alive and p is not exclude]
            active = [j for j in self.jobs if j not in self.settled]
            if not procs or not active:
                return
            proc = self.rng.choice(procs)
            if self.chance(opts.p_poll_all):
                self.poll(proc)
            else:
                self.supervise(proc, self.rng.choice(active))
        elif kind == "env":
            self.env_action()
        elif kind == "operator":
            self.operator_action()
        elif kind == "time":
            self.time_passes()
        elif kind == "fault":
            self.arm_fault()
        elif kind == "crash":
            alive = [p for p in self.procs if p.alive and p is not exclude]
            if alive:
                self.crash_someone()

    # ------------------------------------------------------------------ checking

    @property
    def now(self) -> datetime:
        return self.clock()

    def read(self, job: str) -> View:
        return self.store.inner.read(job)

    def listed(self) -> list[str]:
        return list(self.store.inner.list(_EVERY_RECORD))

    def submitted(self) -> Sequence[str]:
        return self.jobs

    def check(self) -> None:
        """Feed the timeline's new items to every checker; stop at the first violation."""
        self.sync_history()
        items = self.timeline.items
        found: list[Violation] = []
        checkers = self.checkers
        observe = self.coverage.observe
        for i in range(self._checked, len(items)):
            item = items[i]
            observe(item)
            for checker in checkers:
                proved = checker.feed(item)
                if proved:
                    found.extend(proved)
        self._checked = len(items)
        for checker in checkers:
            if type(checker).settle is not Checker.settle:  # the base settles nothing
                found.extend(checker.settle(self))
        if found:
            raise Stop(sorted(found, key=lambda v: v.seq if v.seq >= 0 else 1 << 60))

    # ------------------------------------------------------------------ phases

    def safety(self) -> None:
        arrivals = list(self.arrivals)
        step = 0
        while step < self.opts.safety_steps:
            self.steps_done = step
            self.housekeeping()
            while arrivals and arrivals[0] <= step:
                if not self.submit(len(self.jobs)):
                    break
                arrivals.pop(0)
            if not (arrivals and arrivals[0] <= step) and self.settled.issuperset(self.jobs):
                # Every job that has arrived is settled: until the next arrives, a step could
                # only act on settled records, which no later step reads for a decision.
                # Skip to the next arrival, or end the phase when none is left.
                if not arrivals:
                    break
                step = arrivals[0]
                continue
            self.random_action()
            self.progress_action()
            self.check()
            step += 1

    def liveness(self) -> None:
        """Faults off; the jobs must settle or be escalated within the budget of time."""
        self.faults_on = False
        self.note("phase", "liveness: faults off")
        for shape in list(self.unreachable_until):
            self.unreachable_until[shape] = self.clock()
        self.housekeeping()
        for index in range(len(self.jobs), self.opts.jobs):
            self.submit(index)
        for proc in self.procs:
            if not proc.alive:
                proc.down_until = self.clock()
        self.housekeeping()
        deadline = self.clock() + self.opts.liveness_budget
        quiet_rounds = 0
        while self.clock() < deadline:
            self.diligent_person()
            progressed = False
            wake: datetime | None = None
            for job in list(self.jobs):
                if job in self.settled:
                    continue
                for _ in range(60):
                    result = None
                    for proc in self.procs:
                        result = self.supervise(proc, job)
                        if result is not None:
                            break
                    if result is None or result.step is None:
                        break
                    if isinstance(result.step, Wait) and not result.conflict:
                        if result.wake is not None:
                            w = result.wake - (proc.skew if proc else timedelta(0))
                            wake = w if wake is None else min(wake, w)
                        break
                    progressed = True
                self.check()
                self._calm_env(job)
            self.progress_action()
            self.check()
            if all(j in self.settled for j in self.jobs):
                return
            quiet_rounds = 0 if progressed else quiet_rounds + 1
            if quiet_rounds > 40 and self._all_escalated():
                break
            # Time moves in small steps while things happen, and jumps to the next wake (at
            # most an hour) while every job only waits.
            step = timedelta(seconds=30)
            if wake is not None and wake > self.clock():
                gap = max(timedelta(seconds=1), wake - self.clock())
                step = min(gap, timedelta(hours=1)) if quiet_rounds > 2 else min(step, gap)
            self.clock.advance(step)
        found = []
        for job in self.jobs:
            if job in self.settled:
                continue
            discovery = self.backends[self.shape_of[job]].inner.find(job)
            violation = liveness_check.check(self, job, discovery, self.timeline.next_seq)
            if violation is not None:
                found.append(violation)
            else:
                self.cover("liveness: escalated, not settled")
        if found:
            raise Stop(found)

    def _all_escalated(self) -> bool:
        from jobdispatch.job import fold

        for job in self.jobs:
            if job in self.settled:
                continue
            if not fold(self.read(job), self.clock()).escalations:
                return False
        return True

    def _calm_env(self, job: str) -> None:
        """With faults off the cluster still runs things, and executions end (mostly well)."""
        env = self.backends[self.shape_of[job]].inner.env
        for ref in env.objects_of(job):
            if self.rng.random() < 0.5:
                self._env_on(env, ref, calm=True)

    def diligent_person(self) -> None:
        """What a person does once faults stop: release their own holds, and abandon the
        attempts an escalation asked them to look at."""
        from jobdispatch.job import fold

        person = JdActor.human("diligent")
        for job in list(self.jobs):
            if job in self.settled:
                continue
            operator = self.clusters[self.shape_of[job]].operator
            folded = fold(self.read(job), self.clock())
            hold = folded.active_hold
            if not folded.terminal and hold is not None and hold.hold.kind is HOLD_OPERATOR:
                self.person("release", job, functools.partial(operator.release, job, by=person))
            unresolved = folded.unresolved_attempts()
            if unresolved and any(isinstance(e, Unresolved) for e in folded.escalations):
                a = unresolved[0]
                self.person(
                    "abandon", job, functools.partial(operator.abandon, job, a.n, a.k, by=person)
                )

    def run(self) -> list[Violation]:
        """Both phases, then the end-of-run checks. Returns the violations (empty: passed)."""
        try:
            self.safety()
            self.liveness()
            self.check()
            found: list[Violation] = []
            for checker in self.checkers:
                found.extend(checker.finish(self))
            if found:
                raise Stop(found)
        except Stop as stop:
            self.sync_history()
            return stop.violations
        return []
