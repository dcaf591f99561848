"""Helpers for tests: a job's story written by hand, event by event, and waiting for a state.

The core's own tests, the simulator and adapter authors use the story to put a record in a given
situation and ask ``next`` what follows, without a store, a backend or a supervisor.

``eventually`` is the one way every member's tests wait for something another thread, process or
cluster brings about. It lives here because every member already depends on the core, so each
package's tests can import it without adding a dependency to the shipped code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs

from jobdispatch.job import Job, fold
from jobdispatch.progress import Reading
from jobdispatch.records import events as ev
from jobdispatch.spi import Discovery, ExecutionObs, ObjectObs, ObjectRef, discovery_name
from jobdispatch.steps import Step, next_steps
from jobdispatch.triggers import SUBMIT, Launch, Trigger
from jobdispatch.types import (
    Actor,
    Cause,
    CauseKind,
    CheckpointMode,
    Enforcer,
    JobID,
    JobSpec,
    ObjectState,
    Plan,
    Provenance,
    RecoveryPolicy,
    Rule,
    RuleAssignment,
    RuleSupport,
    Support,
    UnmatchedPolicy,
)

__all__ = [
    "PATIENCE",
    "T0",
    "Story",
    "eventually",
    "execution",
    "expected_output",
    "imported_with",
    "job_of",
    "observation",
    "plan_for",
]

#: The time stories start at.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SUPERVISOR = Actor.supervisor("test")
PERSON = Actor.human("ops")


def expected_output(script: Path) -> str:
    """What an example script's docstring says it "must print exactly:": the indented block
    after those words, unindented, so a test compares the script's output with its promise."""
    doc = script.read_text().split('"""')[1]
    block = doc.split("must print exactly:\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return "\n".join(lines).strip() + "\n"


def imported_with(module: str, heavy: Iterable[str]) -> list[str]:
    """Which of the ``heavy`` top-level modules importing ``module`` loads, in a fresh
    interpreter (this one has imported who knows what already): a module promised cheap to
    import (a plugin's ``_hooks``) answers none."""
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps([m for m in {sorted(heavy)!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def plan_for(
    spec: JobSpec,
    enforcers: dict[int, Enforcer] | None = None,
    checkpoint: CheckpointMode = CheckpointMode.ISOLATED,
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL,
    capabilities: dict[Any, Support] | None = None,
) -> Plan:
    """A plan that assigns each rule the enforcer given (the supervisor by default)."""
    enforcers = enforcers or {}
    rules = tuple(
        RuleAssignment(
            index=i,
            rule=r,
            effective=r,
            enforcer=enforcers.get(i, Enforcer.SUPERVISOR),
            support=RuleSupport(native=Support.no(), perform=Support.yes()),
        )
        for i, r in enumerate(spec.recovery.rules)
    )
    return Plan(
        job="job1",
        rules=rules,
        uncovered=(),
        checkpoint=checkpoint,
        unmatched=unmatched,
        capabilities=capabilities or {},
        supervised=True,
    )


def execution(
    index: int, state: ObjectState = ObjectState.RUNNING, cause: Cause | None = None
) -> ExecutionObs:
    """One execution as a backend would show it."""
    return ExecutionObs(index=index, state=state, cause=cause, started_at=T0)


def observation(
    job: str, n: int, k: int, ref: str, state: ObjectState, *executions: ExecutionObs, **fields: Any
) -> ObjectObs:
    """An object of attempt (n, k) as a backend would show it."""
    return ObjectObs(
        ref=ObjectRef(ref),
        name=discovery_name(job, n, k),
        state=state,
        executions=tuple(executions),
        **fields,
    )


@attrs.define
class Story:
    """A record written by hand. Methods append one event each and return the story."""

    spec: JobSpec = attrs.Factory(lambda: JobSpec(command=["train"], name="t"))
    job_id: str = "job1"
    plan: Plan | None = None
    options: ev.Options = attrs.Factory(lambda: ev.Options(supervised=True))
    now: datetime = T0
    events: list[ev.AnyEvent] = attrs.Factory(list)

    @classmethod
    def with_rules(cls, *rules: Rule, **kw: Any) -> Story:
        spec = JobSpec(command=["train"], name="t", recovery=RecoveryPolicy(rules=rules))
        plan = plan_for(
            spec,
            **{
                k: kw.pop(k)
                for k in ("enforcers", "checkpoint", "unmatched", "capabilities")
                if k in kw
            },
        )
        return cls(spec=spec, plan=plan, **kw)

    # ---------------------------------------------------------------- plumbing

    @property
    def header(self) -> ev.Header:
        plan = self.plan or plan_for(self.spec)
        return ev.Header(
            job=self.job_id,
            spec=self.spec,
            plan=plan,
            options=self.options,
            created_by=PERSON,
            created_at=T0,
        )

    def view(self) -> ev.View:
        return ev.View(self.header, tuple(self.events))

    def fold(self, now: datetime | None = None) -> Job:
        return fold(self.view(), now or self.now)

    def next(
        self,
        *objects: ObjectObs,
        now: datetime | None = None,
        complete: bool = True,
        progress: Reading | None = None,
    ) -> list[Step]:
        when = now or self.now
        return next_steps(
            self.fold(when),
            Discovery(job=self.job_id, objects=objects, at=when, complete=complete),
            when,
            progress,
        )

    def later(self, seconds: float) -> Story:
        self.now += timedelta(seconds=seconds)
        return self

    def add(self, event_type: type[ev.Event], **fields: Any) -> Story:
        by = PERSON if event_type.cls is ev.EventClass.CONTROL else SUPERVISOR
        token = 1 if event_type.cls is ev.EventClass.DECISION else None
        self.events.append(event_type(at=self.now, by=by, token=token, **fields))  # type: ignore[arg-type]
        return self

    def progress_seen(
        self,
        step: int,
        submission: int,
        *,
        origin: ev.Origin = ev.Origin.MARK,
        at: datetime | None = None,
        execution: str = "0",
    ) -> Story:
        """Record that training reached ``step`` in ``submission``'s ``execution``, marked at
        ``at`` (now unless given) by ``origin``."""
        marked_at = self.now if at is None else at
        return self.add(
            ev.ProgressSeen,
            step=step,
            marked_at=marked_at,
            submission=submission,
            execution=execution,
            origin=origin,
        )

    def commit(self, events: Sequence[ev.AnyEvent]) -> int:
        """Append events as a store commits them (a decision carries the lease's token, which
        a step's events leave to the store); returns the revision reached."""
        for e in events:
            self.events.append(attrs.evolve(e, token=1) if e.decision else e)
        return len(self.events)

    # ---------------------------------------------------------------- the launch, abridged

    def authorize(
        self,
        n: int = 1,
        trigger: Trigger = SUBMIT,
        rule: int | None = None,
        cause: Cause | None = None,
    ) -> Story:
        return self.add(ev.SubmissionAuthorized, n=n, trigger=trigger, rule=rule, cause=cause)

    def attempt(self, n: int = 1, k: int = 1) -> Story:
        return self.add(ev.AttemptStarted, submission=n, attempt=k)

    def reply(
        self,
        n: int = 1,
        k: int = 1,
        ref: str | None = None,
        reply: ev.Reply = ev.Reply.CREATED,
        detail: str = "",
    ) -> Story:
        return self.add(
            ev.AttemptReplied,
            submission=n,
            attempt=k,
            reply=reply,
            ref=ObjectRef(ref) if ref else None,
            detail=detail,
        )

    def observe(self, obs: ObjectObs) -> Story:
        return self.add(ev.Observed, obs=obs)

    def canonical(self, n: int, ref: str, k: int = 1) -> Story:
        return self.add(ev.CanonicalChosen, submission=n, ref=ObjectRef(ref), attempt=k)

    def open(self, n: int, ref: str) -> Story:
        return self.add(ev.OpenDecided, submission=n, ref=ObjectRef(ref))

    def launched(
        self,
        n: int = 1,
        ref: str = "o1",
        *,
        trigger: Trigger | None = None,
        rule: int | None = None,
        cause: Cause | None = None,
        running: bool = True,
    ) -> Story:
        """Submission n authorized, started, canonical, opened and (by default) seen running."""
        # A stand-in trigger for a later submission whose cause the story does not tell.
        self.authorize(n, trigger or (SUBMIT if n == 1 else Launch(n - 1)), rule, cause)
        self.attempt(n, 1).reply(n, 1, ref).canonical(n, ref).open(n, ref)
        if running:
            self.observe(observation(self.job_id, n, 1, ref, ObjectState.RUNNING, execution(0)))
        return self

    def ended(self, n: int, ref: str, cause: Cause, index: int = 0) -> ObjectObs:
        """The observation of attempt (n, 1)'s object ended by ``cause``; also recorded."""
        obs = observation(
            self.job_id, n, 1, ref, ObjectState.ENDED, execution(index, ObjectState.ENDED, cause)
        )
        self.observe(obs)
        return obs


PREEMPTED = Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER)
SUCCESS = Cause(CauseKind.NONE, exit_code=0)


def job_of(plan: Plan) -> JobID:
    """The job ``plan`` was recorded for. A plan from ``submit`` always names it; one from
    ``make_plan`` does not, which is why :attr:`Plan.job` may be None."""
    assert plan.job is not None, "a plan made without submitting names no job"
    return plan.job


T = TypeVar("T")

#: How long ``eventually`` waits by default, in seconds: a bound against a hang, never a measure
#: of speed. It is far above what any awaited state takes on a loaded machine, so a slow run
#: only waits longer and a test fails only when the state never comes.
PATIENCE = 120.0
#: How much of the last value seen a failure shows.
_SHOWN = 2000


@overload
def eventually(
    probe: Callable[[], T | None], what: str, *, within: float = ..., every: float = ...
) -> T: ...
@overload
def eventually(
    probe: Callable[[], T],
    what: str,
    *,
    holds: Callable[[T], object],
    within: float = ...,
    every: float = ...,
) -> T: ...
def eventually(
    probe: Callable[[], Any],
    what: str,
    *,
    holds: Callable[[Any], object] | None = None,
    within: float = PATIENCE,
    every: float = 0.01,
) -> Any:
    """Ask ``probe`` every ``every`` seconds until its answer holds, and return that answer.

    An answer holds when ``holds(answer)`` is true, or, without ``holds``, when the answer itself
    is. Past ``within`` seconds the wait fails with an AssertionError naming ``what`` was awaited
    and the last answer seen, so a failure says how far the state got. The bound is checked only
    after an answer that does not hold: an answer that holds is returned even when asking for it
    took past the bound, so a slow probe on a loaded machine never fails a wait by itself.
    """
    deadline = time.monotonic() + within
    while True:
        seen = probe()
        if holds(seen) if holds is not None else seen:
            return seen
        if time.monotonic() >= deadline:
            shown = repr(seen)
            if len(shown) > _SHOWN:
                shown = shown[:_SHOWN] + "..."
            raise AssertionError(
                f"gave up waiting for {what} after {within:g} s; last seen: {shown}"
            )
        time.sleep(every)
