"""Goodput: where a job's time (and its GPUs' or cores' time) went, from its record alone.

Pure, like ``fold``: no I/O, ``now`` is an argument, and the same record always gives the same
figures. A job's life, from its creation to its settlement (or ``now``), is cut into spans, and
each span gets exactly one *part*:

* ``queued`` before an execution, with its reason: ``waiting-for-supervisor`` (created, nothing
  decided yet), ``gated`` (authorized, its object not yet opened), ``no-capacity`` (opened, the
  scheduler has not run it), ``held-by-person`` and ``held-by-rule`` (a hold stands);
* ``startup`` (an execution's start to its first progress), ``productive`` (progress that was
  kept), ``recomputation`` (running time after the checkpoint the next execution resumed from:
  work done twice), ``stalled`` (the last progress to a stall stop);
* ``detection`` (an execution's end to the record seeing it), ``decision`` (seen to the rule's
  or the outcome's commit), ``relaunch`` (that decision to the next execution's object opened,
  or to its rerun in the same object);
* ``clean-up`` (the outcome to settlement) and ``unknown`` where the evidence does not decide.

The spans are painted in a fixed order onto one canvas of integer microseconds, later layers
over earlier ones, so the parts partition the job's wall time exactly (no rounding anywhere).
Each span also says whether the job held its nodes then (an execution ran), which turns wall
time into resource time: GPU-seconds when the job declares GPUs, core-seconds otherwise.
Every span of badput names the ending it follows (the cause), the rule that acted on that ending
and the rule's enforcer.

Without progress evidence (a job with no ``[progress]`` root) the running parts are coarse: an
execution's running time is ``unknown`` (or ``productive`` for the run that finished the job).
Progress evidence comes in through one type, :class:`ExecutionEvidence`, made by one
function, :func:`evidence_of`: that is the one place that reads progress from the record.
docs/explanation/goodput.md says what each part means and what the record cannot see.
"""

from __future__ import annotations

import bisect
import enum
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from jobdispatch.errors import Problem, ValidationError
from jobdispatch.members import (
    CAUSE_CANCELLED,
    CAUSE_HELD,
    CAUSE_NONE,
    CAUSE_UNKNOWN,
    ENFORCER_BACKEND,
    OBJ_ENDED,
    OBJ_RUNNING,
    STATE_CANCELLED,
)
from jobdispatch.records import events as ev
from jobdispatch.spi import ExecutionObs
from jobdispatch.triggers import End
from jobdispatch.types import (
    CauseKind,
    Enforcer,
    HoldKind,
    JobSpec,
    Plan,
    State,
)

__all__ = [
    "FIGURES_VERSION",
    "INTERRUPTIONS",
    "Blame",
    "ClusterFigures",
    "ExecutionEvidence",
    "Figure",
    "JobGoodput",
    "JobSummary",
    "Part",
    "Prices",
    "Progress",
    "QueueReason",
    "Report",
    "RunFigures",
    "Selection",
    "Share",
    "Span",
    "Tally",
    "Unit",
    "evidence_of",
    "goodput",
    "prices_from",
    "report",
    "summarize",
    "young_daly",
]

_MICRO = timedelta(microseconds=1)
#: The reason a supervisor's stop for a stall carries (issue 26's stall stop).
STALL_REASON = "stalled"


class _Word(enum.StrEnum):
    def __str__(self) -> str:
        value: str = self._value_
        return value


class Part(_Word):
    """What a span of a job's life was spent on."""

    QUEUED = "queued"
    STARTUP = "startup"
    PRODUCTIVE = "productive"
    RECOMPUTATION = "recomputation"
    STALLED = "stalled"
    DETECTION = "detection"
    DECISION = "decision"
    RELAUNCH = "relaunch"
    CLEANUP = "clean-up"
    UNKNOWN = "unknown"


class QueueReason(_Word):
    """Why a job was queued, for the ``queued`` part."""

    WAITING_FOR_SUPERVISOR = "waiting-for-supervisor"
    GATED = "gated"
    NO_CAPACITY = "no-capacity"
    HELD_BY_PERSON = "held-by-person"
    HELD_BY_RULE = "held-by-rule"


class Unit(_Word):
    """What a job's resource time counts: GPUs where it declares any, else cores."""

    GPU = "gpu"
    CORE = "core"


#: The endings that interrupt a run from outside it, at a time the job did not choose: what a
#: checkpoint interval is chosen against (a time limit or an application's error is not random).
INTERRUPTIONS = frozenset({CauseKind.PREEMPTED, CauseKind.NODE_LOST})


@attrs.frozen
class Blame:
    """What a span of badput is attributed to: the cause of the ending it follows, the rule
    that acted on that ending (its index in the plan) and who enforced it."""

    cause: CauseKind = CauseKind.NONE
    rule: int | None = None
    enforcer: Enforcer | None = None


NO_BLAME = Blame()


@attrs.frozen
class Span:
    """``[start, end)`` in microseconds since the job's creation, spent on ``part``."""

    start: int
    end: int
    part: Part
    reason: QueueReason | None
    blame: Blame
    #: Whether an execution held the job's nodes then (resource time counts only these).
    holding: bool

    @property
    def micros(self) -> int:
        return self.end - self.start


# --------------------------------------------------------------------------- evidence


@attrs.frozen
class Progress:
    """An execution was seen at ``step`` at ``at``."""

    step: int
    at: datetime


@attrs.frozen(kw_only=True)
class ExecutionEvidence:
    """What is known of one execution's progress, beside its start and end (which the
    record's observations give). Every field may be unknown (None, or empty).

    ``resumed_from`` is the checkpoint step this execution resumed from, ``resumed_fresh`` says
    it resumed from nothing (started over), ``checkpoint_at`` is when the checkpoint it resumed
    from was made (what decides how much of the previous run was kept). ``stall_stop_at`` is
    when a supervisor decided to stop it for a stall. ``checkpoint_costs`` are measured
    durations of its checkpoint writes, for the checkpoint interval.
    """

    ref: str
    index: int
    first_progress: datetime | None = None
    last_progress: datetime | None = None
    points: tuple[Progress, ...] = ()
    resumed_from: int | None = None
    resumed_fresh: bool = False
    checkpoint_at: datetime | None = None
    stall_stop_at: datetime | None = None
    checkpoint_costs: tuple[timedelta, ...] = ()
    #: Windows (start, end; None: still) during which progress could not be read: a start-up
    #: or a stall that overlaps one is not known to be one.
    blind: tuple[tuple[datetime, datetime | None], ...] = ()


#: Evidence by execution: (object ref, execution index).
Evidence = Mapping[tuple[str, int], ExecutionEvidence]


def evidence_of(view: ev.View) -> dict[tuple[str, int], ExecutionEvidence]:
    """The progress evidence ``view`` holds, by execution. THE one place that reads it.

    The record names an execution two ways: observations and stall decisions by object and
    execution index, progress evidence (``progress-seen``, ``resumed-from``, written from
    what the job's helper left under its checkpoint root) by submission and the execution the
    job was told (``JOBDISPATCH_EXECUTION``, the index as a string). A submission's object is
    the one chosen canonical for it (or opened for it, or seen carrying its discovery name).
    Progress the record holds only at its recording interval, so the first and last points are
    as good as that interval; the checkpoint a run resumed from is dated by the publication
    of that step the record saw (it is recorded when a run ends, for a budget's charge).
    Blind spells apply to every run they overlap.
    """
    running: dict[str, int] = {}
    object_of: dict[int, str] = {}
    seen: dict[tuple[int, str], list[Progress]] = {}
    published: dict[int, datetime] = {}
    resumed: dict[tuple[int, str], int] = {}
    blind: list[tuple[datetime, datetime | None]] = []
    stalls: dict[tuple[str, int], datetime] = {}
    for e in view.events:
        if type(e) is ev.Observed:
            latest = e.obs.latest
            if latest is not None:
                running[e.obs.ref.id] = latest.index
            if e.obs.identity is not None:
                object_of.setdefault(e.obs.identity[1], e.obs.ref.id)
        elif type(e) is ev.CanonicalChosen or type(e) is ev.OpenDecided:
            object_of[e.submission] = e.ref.id
        elif type(e) is ev.ProgressSeen:
            seen.setdefault((e.submission, e.execution), []).append(Progress(e.step, e.marked_at))
            if e.origin is ev.Origin.PUBLICATION:
                published.setdefault(e.step, e.marked_at)
        elif type(e) is ev.ResumedFrom:
            resumed[(e.submission, e.execution)] = e.step
        elif type(e) is ev.ProgressBlind:
            if not blind or blind[-1][1] is not None:
                blind.append((e.at, None))
        elif type(e) is ev.ProgressSighted:
            if blind and blind[-1][1] is None:
                blind[-1] = (blind[-1][0], e.at)
        elif type(e) is ev.StopDecided and e.reason == STALL_REASON:
            index = running.get(e.ref.id)
            if index is not None:
                stalls[(e.ref.id, index)] = e.at

    out: dict[tuple[str, int], ExecutionEvidence] = {}

    def at(key: tuple[str, int]) -> ExecutionEvidence:
        return out.get(key) or ExecutionEvidence(ref=key[0], index=key[1], blind=tuple(blind))

    def key_of(submission: int, execution: str) -> tuple[str, int] | None:
        ref = object_of.get(submission)
        if ref is None or not execution.isdigit():
            return None  # a run the record cannot place is left to "unknown"
        return ref, int(execution)

    for (submission, execution), points in seen.items():
        key = key_of(submission, execution)
        if key is not None:
            ordered = tuple(sorted(points, key=lambda p: (p.at, p.step)))
            out[key] = attrs.evolve(
                at(key),
                first_progress=ordered[0].at,
                last_progress=ordered[-1].at,
                points=ordered,
            )
    for (submission, execution), step in resumed.items():
        key = key_of(submission, execution)
        if key is not None:
            out[key] = attrs.evolve(at(key), resumed_from=step, checkpoint_at=published.get(step))
    for key, stopped in stalls.items():
        out[key] = attrs.evolve(at(key), stall_stop_at=stopped)
    return out


# --------------------------------------------------------------------------- one job


@attrs.frozen
class RunFigures:
    """One execution as the report saw it: when it ran, how it ended, who acted, and how much
    of the job's time it held its nodes (within the report's span)."""

    submission: int
    ref: str
    index: int
    started_at: datetime | None
    ended_at: datetime | None
    blame: Blame
    running_micros: int


@attrs.frozen
class Share:
    """The total of one (part, reason, blame) of a job."""

    part: Part
    reason: QueueReason | None
    blame: Blame
    micros: int
    resource_micros: int


@attrs.frozen(kw_only=True)
class JobGoodput:
    """One job's figures. Times are integer microseconds, so the parts add up exactly:
    ``sum(s.micros for s in shares) == total_micros`` and likewise for resource time."""

    job: str
    name: str
    submitter: str
    state: State | None
    settled: bool
    created_at: datetime
    until: datetime
    unit: Unit
    width: int
    queue: str | None
    spans: tuple[Span, ...]
    runs: tuple[RunFigures, ...]
    checkpoint_costs: tuple[timedelta, ...] = ()

    @property
    def total_micros(self) -> int:
        return sum(s.end - s.start for s in self.spans)

    @property
    def resource_micros(self) -> int:
        return sum((s.end - s.start) * self.width for s in self.spans if s.holding)

    @property
    def shares(self) -> tuple[Share, ...]:
        """The spans summed by (part, reason, blame), in the order each first appears."""
        sums: dict[tuple[Part, QueueReason | None, Blame], list[int]] = {}
        for s in self.spans:
            got = sums.setdefault((s.part, s.reason, s.blame), [0, 0])
            got[0] += s.end - s.start
            if s.holding:
                got[1] += (s.end - s.start) * self.width
        return tuple(Share(p, r, b, m, rm) for (p, r, b), (m, rm) in sums.items())

    def part_micros(self, part: Part) -> int:
        return sum(s.end - s.start for s in self.spans if s.part is part)

    @property
    def goodput(self) -> float | None:
        """Productive resource time over all resource time; None when nothing ran."""
        held = self.resource_micros
        if not held:
            return None
        productive = sum(
            (s.end - s.start) * self.width
            for s in self.spans
            if s.holding and s.part is Part.PRODUCTIVE
        )
        return productive / held

    def clipped(self, since: datetime | None, until: datetime | None) -> JobGoodput:
        """The same figures limited to ``[since, until)``."""
        lo = 0 if since is None else max(0, _us(since - self.created_at))
        hi = None if until is None else _us(until - self.created_at)
        spans = []
        for s in self.spans:
            a, b = max(s.start, lo), s.end if hi is None else min(s.end, hi)
            if b > a:
                spans.append(attrs.evolve(s, start=a, end=b) if (a, b) != (s.start, s.end) else s)
        return attrs.evolve(self, spans=tuple(spans))


#: The version of what :func:`summarize` computes from a record. Figures kept apart from the
#: record (the CLI's cache of settled jobs' figures) are kept under it and never used under
#: another: raise it with any change to the fold that can change a figure, or to
#: :class:`JobGoodput` or :class:`JobSummary` themselves.
FIGURES_VERSION = 1


@attrs.frozen(kw_only=True)
class JobSummary:
    """Everything :func:`report` needs of one job, without its record: its figures, and the two
    things the report otherwise reads from the view beside them (the submitter's id, which a
    selection by submitter matches, and the labels of the rules its spans blame, which the
    totals by rule are keyed by).

    It exists so a caller can hand the report figures it already has: a settled job's summary
    never changes while its record does not (its figures end at settlement, whatever ``now``),
    so it can be kept and used again instead of reading and folding the record once more.
    """

    figures: JobGoodput
    submitter_id: str
    #: ``rule_key`` of each rule a span blames, by the rule's index.
    rule_labels: Mapping[int, str] = attrs.field(factory=dict)

    def rule_label(self, rule: int) -> str:
        label = self.rule_labels.get(rule)
        return label if label is not None else str(rule)


def summarize(view: ev.View, now: datetime, evidence: Evidence | None = None) -> JobSummary:
    """``view``'s :class:`JobSummary` as of ``now``: its :func:`goodput` and what the report
    reads of its header. Pure."""
    figures = goodput(view, now, evidence)
    plan = view.header.plan
    rules = {s.blame.rule for s in figures.spans if s.blame.rule is not None}
    return JobSummary(
        figures=figures,
        submitter_id=view.header.created_by.id,
        rule_labels={r: rule_key(plan, r) for r in sorted(rules)},
    )


def _us(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _width(spec: JobSpec) -> tuple[Unit, int]:
    nodes = max(spec.nodes, 1)
    gpus = spec.resources.gpus_per_node * nodes
    if gpus > 0:
        return Unit.GPU, gpus
    cpus = spec.resources.cpus_per_proc or 1
    return Unit.CORE, cpus * max(spec.procs_per_node, 1) * nodes


_Mark = tuple[Part, QueueReason | None, Blame, bool | None]


class _Canvas:
    """Integer-microsecond cuts of ``[0, total)``, each piece with one mark; a paint replaces
    the marks under it (a mark whose holding is None keeps what it covers)."""

    __slots__ = ("cuts", "marks", "total")

    def __init__(self, total: int, base: _Mark) -> None:
        self.total = total
        self.cuts = [0, total]
        self.marks: list[_Mark] = [base]

    def _split(self, t: int) -> int:
        cuts = self.cuts
        i = bisect.bisect_left(cuts, t)
        if cuts[i] != t:
            cuts.insert(i, t)
            self.marks.insert(i, self.marks[i - 1])
        return i

    def paint(self, a: int, b: int, mark: _Mark) -> None:
        a = max(a, 0)
        b = min(b, self.total)
        if b <= a:
            return
        i = self._split(a)
        j = self._split(b)
        if mark[3] is None:
            for k in range(i, j):
                self.marks[k] = (mark[0], mark[1], mark[2], self.marks[k][3])
            return
        self.marks[i:j] = [mark]
        del self.cuts[i + 1 : j]

    def spans(self) -> tuple[Span, ...]:
        out: list[Span] = []
        cuts = self.cuts
        for k, (part, reason, blame, holding) in enumerate(self.marks):
            a, b = cuts[k], cuts[k + 1]
            if b <= a:
                continue
            held = bool(holding)
            if out:
                last = out[-1]
                if (
                    last.part is part
                    and last.reason is reason
                    and last.blame == blame
                    and last.holding is held
                ):
                    out[-1] = Span(last.start, b, part, reason, blame, held)
                    continue
            out.append(Span(a, b, part, reason, blame, held))
        return tuple(out)


@attrs.define
class _Run:
    submission: int
    ref: str
    obs: ExecutionObs
    last_running: datetime | None = None
    seen_ended: datetime | None = None


@attrs.define
class _Sub:
    n: int
    authorized: datetime
    blame: Blame
    opened: datetime | None = None
    first_start: datetime | None = None


def _enforcer(plan: Plan, rule: int | None) -> Enforcer | None:
    if rule is None or not 0 <= rule < len(plan.rules):
        return None
    return plan.rules[rule].enforcer


def _backend_rule(plan: Plan, kind: CauseKind) -> int | None:
    for a in plan.rules:
        if kind in a.effective.on:
            return a.index if a.enforcer is ENFORCER_BACKEND else None
    return None


@attrs.define
class _Read:
    """What :func:`goodput` reads from a job's events, in one pass over them: submissions,
    executions as last observed, when each ended run was decided on, holds, stops, the
    outcome and the settlement. What it makes of them is :func:`goodput`'s."""

    subs: list[_Sub]
    runs: dict[tuple[str, int], _Run]
    decided: dict[tuple[str, int], tuple[datetime, int | None]]
    holds: list[tuple[datetime, datetime | None, Blame, bool]]
    stopped: set[str]
    outcome: tuple[datetime, State, CauseKind] | None
    settled_at: datetime | None


def _read(view: ev.View, plan: Plan) -> _Read:
    """One pass over ``view``'s events (see :class:`_Read`). Pure."""
    subs: list[_Sub] = []
    sub_of: dict[str, int] = {}
    runs: dict[tuple[str, int], _Run] = {}
    decided: dict[tuple[str, int], tuple[datetime, int | None]] = {}
    holds: list[tuple[datetime, datetime | None, Blame, bool]] = []
    stopped: set[str] = set()
    last_rule: int | None = None
    last_cause: CauseKind = CAUSE_NONE
    outcome: tuple[datetime, State, CauseKind] | None = None
    settled_at: datetime | None = None
    for e in view.events:
        t = type(e)
        if t is ev.Observed:
            _read_observed(e, sub_of, runs)  # type: ignore[arg-type]
        elif t is ev.SubmissionAuthorized:
            rule = e.rule  # type: ignore[union-attr]
            cause = e.cause  # type: ignore[union-attr]
            trigger = e.trigger  # type: ignore[union-attr]
            kind = cause.kind if cause is not None else CAUSE_NONE
            subs.append(_Sub(e.n, e.at, Blame(kind, rule, _enforcer(plan, rule))))  # type: ignore[union-attr]
            if isinstance(trigger, End):
                decided.setdefault((trigger.ref, trigger.index), (e.at, rule))
        elif t is ev.RecoveryDecided:
            trigger = e.trigger  # type: ignore[union-attr]
            last_rule = e.rule  # type: ignore[union-attr]
            last_cause = e.cause.kind  # type: ignore[union-attr]
            if isinstance(trigger, End):
                decided.setdefault((trigger.ref, trigger.index), (e.at, last_rule))
        elif t is ev.CanonicalChosen:
            sub_of[e.ref.id] = e.submission  # type: ignore[union-attr]
        elif t is ev.OpenDecided:
            n = e.submission  # type: ignore[union-attr]
            if 0 < n <= len(subs) and subs[n - 1].opened is None:
                subs[n - 1].opened = e.at
        elif t is ev.HoldPlaced:
            holds.append(_hold_placed(e, plan, last_rule, last_cause))  # type: ignore[arg-type]
        elif t is ev.HoldLifted:
            if holds and holds[-1][1] is None:
                a, _, blame, by_rule = holds[-1]
                holds[-1] = (a, e.at, blame, by_rule)
        elif t is ev.StopDecided or t is ev.VerifiedStopped:
            stopped.add(e.ref.id)  # type: ignore[union-attr]
        elif t is ev.OutcomeDecided:
            if outcome is None:
                outcome = (e.at, e.state, e.cause.kind)  # type: ignore[union-attr]
        elif t is ev.CancelRequested:
            # A person's cancel is the outcome itself (it commits ``cancelled``, final).
            if outcome is None:
                outcome = (e.at, STATE_CANCELLED, CAUSE_CANCELLED)
        elif t is ev.Settled:
            settled_at = e.at

    return _Read(subs, runs, decided, holds, stopped, outcome, settled_at)


def _read_observed(
    e: ev.Observed, sub_of: dict[str, int], runs: dict[tuple[str, int], _Run]
) -> None:
    """Fold one observation into ``runs``: each execution as last observed, when it was last
    seen running and when its end was first seen (detection is measured from that). An object
    not yet tied to a submission takes the one its identity names."""
    obs = e.obs
    ref = obs.ref.id
    n = sub_of.get(ref)
    if n is None:
        ident = obs.identity
        n = ident[1] if ident is not None else 0
        sub_of[ref] = n
    for x in obs.executions:
        key = (ref, x.index)
        run = runs.get(key)
        if run is None:
            run = runs[key] = _Run(n, ref, x)
        else:
            run.obs = x
        if x.state is OBJ_RUNNING:
            run.last_running = e.at
        elif x.state is OBJ_ENDED and run.seen_ended is None:
            run.seen_ended = e.at


def _hold_placed(
    e: ev.HoldPlaced, plan: Plan, last_rule: int | None, last_cause: CauseKind
) -> tuple[datetime, None, Blame, bool]:
    """A hold as it opens: a person's is blamed on the hold itself; a rule's on the ending the
    rule acted on (the event's own cause, else the last recovery's) and on that rule."""
    if e.hold.kind is HoldKind.OPERATOR:
        return (e.at, None, Blame(CAUSE_HELD), False)
    kind = e.cause.kind if e.cause is not None else last_cause
    return (e.at, None, Blame(kind, last_rule, _enforcer(plan, last_rule)), True)


@attrs.frozen
class _Axis:
    """Instants as integer microseconds from the job's creation, the canvas's coordinates.
    An instant the record does not have (None) stands for the given default."""

    origin: datetime
    total: int

    def us(self, at: datetime | None, default: int) -> int:
        return default if at is None else _us(at - self.origin)


def goodput(view: ev.View, now: datetime, evidence: Evidence | None = None) -> JobGoodput:
    """One job's figures, from its record as of ``now``. Pure.

    ``evidence`` defaults to :func:`evidence_of` the same view.
    """
    header = view.header
    plan = header.plan
    origin = header.created_at
    if evidence is None:
        evidence = evidence_of(view)

    read = _read(view, plan)
    outcome, settled_at = read.outcome, read.settled_at

    # Writers' clocks may disagree by a little: nothing ends before the job was created.
    until = max(settled_at if settled_at is not None else now, origin)
    axis = _Axis(origin, _us(until - origin))
    total = axis.total
    unit, width = _width(header.spec)

    canvas = _Canvas(total, (Part.UNKNOWN, None, NO_BLAME, False))
    ordered = _in_time_order(read, until)
    outcome_at = outcome[0] if outcome is not None else None
    outcome_us = axis.us(outcome_at, total)

    # 1. After each ended run: detection, decision, then relaunch until the next run starts
    # (a later submission's own layer, painted next, takes over from its authorization).
    blames = _paint_endings(canvas, axis, plan, ordered, read.decided, outcome_at, until)
    # 2. Before each submission's first run: queued, or relaunch after a recovery.
    _paint_submissions(canvas, axis, read.subs, outcome_us)
    # 3. Holds: queued, for a person or for a rule.
    for a, b, blame, by_rule in read.holds:
        reason = QueueReason.HELD_BY_RULE if by_rule else QueueReason.HELD_BY_PERSON
        canvas.paint(axis.us(a, total), axis.us(b, total), (Part.QUEUED, reason, blame, False))
    # 4. Running time, from the evidence.
    figures = _paint_running(canvas, axis, read, ordered, blames, evidence)
    # 5. Clean-up: from the outcome to settlement, keeping whether the nodes were held.
    if outcome is not None:
        canvas.paint(outcome_us, total, (Part.CLEANUP, None, Blame(outcome[2]), None))

    spans = canvas.spans()
    run_figures = tuple(
        RunFigures(
            submission=run.submission,
            ref=run.ref,
            index=run.obs.index,
            started_at=run.obs.started_at,
            ended_at=run.obs.ended_at,
            blame=blame,
            running_micros=_held(spans, start, end),
        )
        for run, start, end, blame in figures
    )
    costs = tuple(c for e in evidence.values() for c in e.checkpoint_costs)
    return JobGoodput(
        job=header.job,
        name=header.spec.name,
        submitter=str(header.created_by),
        state=outcome[1] if outcome is not None else None,
        settled=settled_at is not None,
        created_at=origin,
        until=until,
        unit=unit,
        width=width,
        queue=header.spec.resources.queue,
        spans=spans,
        runs=run_figures,
        checkpoint_costs=costs,
    )


def _in_time_order(read: _Read, until: datetime) -> list[_Run]:
    """The executions in time order (one not yet started sorts at ``until``), noting on each
    submission its first start: where its queued time ends."""
    subs = read.subs
    ordered = sorted(
        read.runs.values(),
        key=lambda r: (r.obs.started_at or until, r.submission, r.ref, r.obs.index),
    )
    for run in ordered:
        if 0 < run.submission <= len(subs) and run.obs.started_at is not None:
            sub = subs[run.submission - 1]
            if sub.first_start is None or run.obs.started_at < sub.first_start:
                sub.first_start = run.obs.started_at
    return ordered


def _paint_endings(
    canvas: _Canvas,
    axis: _Axis,
    plan: Plan,
    ordered: Sequence[_Run],
    decided: Mapping[tuple[str, int], tuple[datetime, int | None]],
    outcome_at: datetime | None,
    until: datetime,
) -> dict[tuple[str, int], Blame]:
    """Layer 1: after each ended run, detection (its end to the record seeing it), decision
    (seen to the rule's or the outcome's commit) and relaunch (to the next run's start). A run
    the backend restarted by itself in the same object is relaunch from its end.

    Returns every run's blame (its ending, and the rule that acted on it), which the running
    layer paints the time lost to that ending with."""
    total = axis.total
    outcome_us = axis.us(outcome_at, total)
    blames: dict[tuple[str, int], Blame] = {}
    for k, run in enumerate(ordered):
        x = run.obs
        key = (run.ref, x.index)
        rerun = next(
            (r for r in ordered[k + 1 :] if r.ref == run.ref and r.obs.started_at is not None),
            None,
        )
        blame = blames[key] = _ending_blame(plan, x, decided.get(key), rerun is not None)
        if x.state is not OBJ_ENDED:
            continue
        ended = axis.us(x.ended_at if x.ended_at is not None else run.seen_ended, total)
        later = next((r for r in ordered[k + 1 :] if r.obs.started_at is not None), None)
        limit = total if later is None else axis.us(later.obs.started_at, total)
        relaunch_end = min(limit, outcome_us)
        if rerun is not None and key not in decided:
            # The backend ran it again by itself: nobody had to see or decide, it relaunched.
            canvas.paint(ended, relaunch_end, (Part.RELAUNCH, None, blame, False))
            continue
        seen = min(max(axis.us(run.seen_ended, ended), ended), limit)
        decision = decided[key][0] if key in decided else outcome_at
        if decision is None and rerun is None:
            decision = until
        d = min(max(axis.us(decision, seen), seen), limit)
        canvas.paint(ended, seen, (Part.DETECTION, None, blame, False))
        canvas.paint(seen, d, (Part.DECISION, None, blame, False))
        canvas.paint(d, relaunch_end, (Part.RELAUNCH, None, blame, False))
    return blames


def _ending_blame(
    plan: Plan,
    x: ExecutionObs,
    decision: tuple[datetime, int | None] | None,
    rerun: bool,
) -> Blame:
    """What a run's ending is blamed on: its cause, and the rule that decided on it; when no
    decision was recorded but the object ran again, the backend-enforced rule for that cause
    (the backend recovered it without the supervisor)."""
    kind = x.cause.kind if x.cause is not None else CAUSE_UNKNOWN
    rule = decision[1] if decision is not None else None
    if rule is None and rerun:
        rule = _backend_rule(plan, kind)
    return Blame(kind, rule, _enforcer(plan, rule))


def _paint_submissions(canvas: _Canvas, axis: _Axis, subs: Sequence[_Sub], outcome_us: int) -> None:
    """Layer 2: before each submission's first run. The first waits for the supervisor, then
    for its gate to open; a later one is the relaunch of the recovery that authorized it. Once
    opened, each waits for capacity until it starts (or the next submission, or the outcome)."""
    total = axis.total
    paint = canvas.paint
    for i, sub in enumerate(subs):
        auth = axis.us(sub.authorized, total)
        nxt = subs[i + 1].authorized if i + 1 < len(subs) else None
        end = min(axis.us(sub.first_start, total), axis.us(nxt, total), outcome_us)
        opened = min(axis.us(sub.opened, end), end)
        if i == 0:
            paint(0, auth, (Part.QUEUED, QueueReason.WAITING_FOR_SUPERVISOR, NO_BLAME, False))
            paint(auth, opened, (Part.QUEUED, QueueReason.GATED, NO_BLAME, False))
        else:
            paint(auth, opened, (Part.RELAUNCH, None, sub.blame, False))
        paint(opened, end, (Part.QUEUED, QueueReason.NO_CAPACITY, sub.blame, False))
    if not subs:
        paint(0, outcome_us, (Part.QUEUED, QueueReason.WAITING_FOR_SUPERVISOR, NO_BLAME, False))


def _paint_running(
    canvas: _Canvas,
    axis: _Axis,
    read: _Read,
    ordered: Sequence[_Run],
    blames: Mapping[tuple[str, int], Blame],
    evidence: Evidence,
) -> list[tuple[_Run, int, int, Blame]]:
    """Layer 4: each started run's running time, split by its progress evidence (see
    :func:`_paint_run`). Returns each started run with its running interval and blame, for
    its :class:`RunFigures`."""
    finals = _finals(ordered, read.outcome)
    figures: list[tuple[_Run, int, int, Blame]] = []
    for k, run in enumerate(ordered):
        x = run.obs
        if x.started_at is None:
            continue
        start = axis.us(x.started_at, axis.total)
        end = _running_end(axis, read, run, start)
        key = (run.ref, x.index)
        blame = blames[key]
        _paint_run(
            canvas.paint,
            axis.us,
            start,
            end,
            evidence.get(key),
            _next_evidence(ordered, k, evidence),
            final=key in finals,
            ended=x.state is OBJ_ENDED,
            blame=blame,
            before=_previous_blame(ordered, k, blames),
        )
        figures.append((run, start, end, blame))
    return figures


def _running_end(axis: _Axis, read: _Read, run: _Run, start: int) -> int:
    """Where a started run's running time ends: its end when known; ``now`` (the canvas's end)
    while it is still running and nothing stopped it or decided the job; else the last time it
    was seen running (what the record can vouch for)."""
    x = run.obs
    if x.ended_at is not None:
        return axis.us(x.ended_at, axis.total)
    if x.state is OBJ_RUNNING and run.ref not in read.stopped and read.outcome is None:
        return axis.total
    return axis.us(run.last_running, start)


def _held(spans: Sequence[Span], a: int, b: int) -> int:
    return sum(
        min(s.end, b) - max(s.start, a) for s in spans if s.holding and s.end > a and s.start < b
    )


def _finals(
    ordered: Sequence[_Run], outcome: tuple[datetime, State, CauseKind] | None
) -> set[tuple[str, int]]:
    """The run whose work the job kept whole: the last one, when the job succeeded."""
    if outcome is None or outcome[1] is not State.SUCCEEDED or not ordered:
        return set()
    last = ordered[-1]
    return {(last.ref, last.obs.index)}


def _previous_blame(
    ordered: Sequence[_Run], k: int, blames: Mapping[tuple[str, int], Blame]
) -> Blame:
    if k == 0:
        return NO_BLAME
    prev = ordered[k - 1]
    return blames.get((prev.ref, prev.obs.index), NO_BLAME)


def _next_evidence(ordered: Sequence[_Run], k: int, evidence: Evidence) -> ExecutionEvidence | None:
    if k + 1 >= len(ordered):
        return None
    nxt = ordered[k + 1]
    return evidence.get((nxt.ref, nxt.obs.index))


def _paint_run(
    paint: Any,
    us: Any,
    start: int,
    end: int,
    own: ExecutionEvidence | None,
    nxt: ExecutionEvidence | None,
    *,
    final: bool,
    ended: bool,
    blame: Blame,
    before: Blame,
) -> None:
    """Paint one execution's running time ``[start, end)``."""
    if end <= start:
        return
    first = us(own.first_progress, -1) if own is not None else -1
    if first < 0:
        # No progress evidence: the run that finished the job was productive (its start-up
        # cannot be told apart); any other's running time is unknown, blamed on its ending.
        if final:
            paint(start, end, (Part.PRODUCTIVE, None, NO_BLAME, True))
        else:
            paint(start, end, (Part.UNKNOWN, None, blame if ended else NO_BLAME, True))
        return
    assert own is not None
    first = min(max(first, start), end)
    paint(start, first, (Part.STARTUP, None, before, True))
    stall = us(own.stall_stop_at, -1)
    last = us(own.last_progress, -1)
    lost_end = end
    if stall >= 0 and last >= 0:
        lost_end = min(max(last, first), end)
        paint(lost_end, end, (Part.STALLED, None, blame, True))
    for a, b in own.blind:
        # Progress unread: the first progress or the last may have come unseen in there.
        lo, hi = us(a, start), us(b, end)
        unknown = (Part.UNKNOWN, None, blame if ended else NO_BLAME, True)
        paint(max(lo, start), min(hi, first), unknown)
        if lost_end < end:
            paint(max(lo, lost_end), min(hi, end), unknown)
    if final:
        paint(first, lost_end, (Part.PRODUCTIVE, None, NO_BLAME, True))
        return
    kept: int | None = None
    if nxt is not None and nxt.resumed_fresh:
        kept = first
    elif nxt is not None and nxt.checkpoint_at is not None:
        kept = min(max(us(nxt.checkpoint_at, first), first), lost_end)
    if kept is None:
        paint(first, lost_end, (Part.UNKNOWN, None, blame if ended else NO_BLAME, True))
        return
    paint(first, kept, (Part.PRODUCTIVE, None, NO_BLAME, True))
    paint(kept, lost_end, (Part.RECOMPUTATION, None, blame, True))


# --------------------------------------------------------------------------- prices


@attrs.frozen
class Prices:
    """What an hour of a GPU or a core costs on one cluster, with per-queue overrides."""

    gpu_hour: float | None = None
    core_hour: float | None = None
    queues: Mapping[str, Prices] = attrs.field(factory=dict, hash=False)

    def per_hour(self, unit: Unit, queue: str | None) -> float | None:
        own = self.queues.get(queue) if queue is not None else None
        for p in (own, self):
            if p is None:
                continue
            price = p.gpu_hour if unit is Unit.GPU else p.core_hour
            if price is not None:
                return price
        return None


_PRICE_KEYS = ("gpu_hour", "core_hour")


def _price(value: object, at: str, problems: list[Problem]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(Problem(at, f"must be a number (a price per hour), got {value!r}"))
        return None
    if not math.isfinite(value) or value < 0:
        problems.append(Problem(at, f"must be a finite price, 0 or more, got {value!r}"))
        return None
    return float(value)


def prices_from(table: object, at: str = "prices") -> Prices:
    """A cluster's ``prices`` table, checked: ``gpu_hour``, ``core_hour`` and ``queues`` (a
    table of queue name to its own ``gpu_hour``/``core_hour``). ValidationError names every
    key that is wrong."""
    problems: list[Problem] = []
    got = _prices(table, at, problems, nested=True)
    if problems:
        raise ValidationError(problems)
    return got


def _prices(table: object, at: str, problems: list[Problem], *, nested: bool) -> Prices:
    if not isinstance(table, Mapping):
        problems.append(Problem(at, f"must be a table, got {table!r}"))
        return Prices()
    known = (*_PRICE_KEYS, "queues") if nested else _PRICE_KEYS
    for key in table:
        if key not in known:
            problems.append(Problem(f"{at}.{key}", f"unknown key (known keys: {', '.join(known)})"))
    fields = {k: _price(table[k], f"{at}.{k}", problems) for k in _PRICE_KEYS if k in table}
    queues: dict[str, Prices] = {}
    raw = table.get("queues", {}) if nested else {}
    if not isinstance(raw, Mapping):
        problems.append(Problem(f"{at}.queues", f"must be a table of queue names, got {raw!r}"))
        raw = {}
    for name, sub in raw.items():
        queues[str(name)] = _prices(sub, f"{at}.queues.{name}", problems, nested=False)
    return Prices(fields.get("gpu_hour"), fields.get("core_hour"), queues)


# --------------------------------------------------------------------------- many jobs


@attrs.frozen(kw_only=True)
class Selection:
    """Which jobs a report counts. Empty means any. A name ending in ``*`` is a prefix."""

    clusters: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    states: tuple[State, ...] = ()
    submitters: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def wants_cluster(self, cluster: str) -> bool:
        return not self.clusters or cluster in self.clusters

    def wants(self, view: ev.View, state: State | None) -> bool:
        header = view.header
        return self._wants(
            header.job,
            header.spec.name,
            (str(header.created_by), header.created_by.id),
            header.created_at,
            state,
        )

    def wants_summary(self, summary: JobSummary) -> bool:
        """:meth:`wants` for a job known by its :class:`JobSummary` (the same answer as for
        its view: the summary keeps what the selection matches)."""
        f = summary.figures
        return self._wants(
            f.job, f.name, (f.submitter, summary.submitter_id), f.created_at, f.state
        )

    def _wants(
        self,
        job: str,
        name: str,
        submitter: tuple[str, str],
        created_at: datetime,
        state: State | None,
    ) -> bool:
        if self.jobs and job not in self.jobs:
            return False
        if self.names and not any(
            name.startswith(n[:-1]) if n.endswith("*") else name == n for n in self.names
        ):
            return False
        if self.submitters and not any(s in submitter for s in self.submitters):
            return False
        if self.states and state not in self.states:
            return False
        return self.until is None or created_at < self.until


@attrs.define
class Figure:
    """Wall time and resource time, in microseconds, and what it cost (None: no price)."""

    micros: int = 0
    gpu_micros: int = 0
    core_micros: int = 0
    cost: float | None = None

    def add(self, micros: int, unit: Unit, resource: int, price: float | None) -> None:
        self.micros += micros
        if unit is Unit.GPU:
            self.gpu_micros += resource
        else:
            self.core_micros += resource
        if price is not None and resource:
            self.cost = (self.cost or 0.0) + resource / 3.6e9 * price


@attrs.define
class Tally:
    """A total, with its split by part (``queued:REASON`` for the queued part's reasons)."""

    total: Figure = attrs.Factory(Figure)
    parts: dict[str, Figure] = attrs.Factory(dict)
    jobs: int = 0

    def add(self, key: str, micros: int, unit: Unit, resource: int, price: float | None) -> None:
        self.total.add(micros, unit, resource, price)
        fig = self.parts.get(key)
        if fig is None:
            fig = self.parts[key] = Figure()
        fig.add(micros, unit, resource, price)


@attrs.frozen
class ClusterFigures:
    """A cluster's observed interruptions and the checkpoint interval they suggest.

    ``running_micros``: time its executions held nodes (wall, not resource); ``interruptions``:
    runs ended by a cause in :data:`INTERRUPTIONS`. ``mtbi`` is their ratio, ``checkpoint_cost``
    the median measured write (or the one given), ``interval`` Young/Daly's optimum."""

    cluster: str
    running_micros: int
    interruptions: int
    mtbi: timedelta | None
    checkpoint_cost: timedelta | None
    interval: timedelta | None

    @property
    def rate_per_hour(self) -> float | None:
        if not self.running_micros:
            return None
        return self.interruptions / (self.running_micros / 3.6e9)


def young_daly(checkpoint_cost: timedelta, mtbi: timedelta) -> timedelta:
    """The checkpoint interval that minimises expected loss to first order (Young 1974, Daly
    2006): ``sqrt(2 × cost × MTBI)``. Assumes interruptions arrive independently at a steady
    rate and the cost is small beside the MTBI."""
    seconds = math.sqrt(2 * checkpoint_cost.total_seconds() * mtbi.total_seconds())
    return timedelta(seconds=seconds)


@attrs.frozen(kw_only=True)
class Report:
    """Many jobs' figures, totalled."""

    jobs: tuple[tuple[str, JobGoodput], ...]
    total: Tally
    by_cause: Mapping[str, Tally]
    by_rule: Mapping[str, Tally]
    by_cluster: Mapping[str, Tally]
    clusters: tuple[ClusterFigures, ...]
    since: datetime | None
    until: datetime


def part_key(span: Span | Share) -> str:
    """How a report names a part: the part, and for ``queued`` its reason."""
    if span.reason is not None:
        return f"{span.part}:{span.reason}"
    return str(span.part)


def rule_key(plan: Plan, rule: int) -> str:
    """How a report names a rule: its index, causes and action (``2: out-of-memory →
    resubmit``), so equal rules of different jobs add up together."""
    if 0 <= rule < len(plan.rules):
        a = plan.rules[rule]
        causes = ",".join(str(c) for c in a.effective.on)
        return f"{rule}: {causes} -> {a.effective.action} ({a.enforcer})"
    return str(rule)


def report(
    records: Iterable[tuple[str, ev.View | JobSummary]],
    now: datetime,
    selection: Selection | None = None,
    *,
    prices: Mapping[str, Prices] | None = None,
    checkpoint_cost: timedelta | None = None,
    evidence: Mapping[str, Evidence] | None = None,
) -> Report:
    """The figures of every selected record (``(cluster, view)`` pairs), limited to the
    selection's window and totalled by cause, rule, cluster and job. Pure.

    A record may come as its :class:`JobSummary` instead of its view (``(cluster, summary)``):
    figures computed already, by :func:`summarize`, which the report counts as they are (so
    ``evidence`` applies to views only). A summary counts exactly as its view would have."""
    selection = selection or Selection()
    prices = prices or {}
    until = selection.until or now
    jobs: list[tuple[str, JobGoodput]] = []
    total = Tally()
    by_cause: dict[str, Tally] = {}
    by_rule: dict[str, Tally] = {}
    by_cluster: dict[str, Tally] = {}
    running: dict[str, int] = {}
    interrupted: dict[str, int] = {}
    costs: dict[str, list[timedelta]] = {}
    for cluster, item in records:
        if not selection.wants_cluster(cluster):
            continue
        if isinstance(item, JobSummary):
            if not selection.wants_summary(item):
                continue
            summary = item
        else:
            if not selection.wants(item, _state_of(item)):
                continue
            own = evidence.get(item.header.job) if evidence is not None else None
            summary = summarize(item, now, own)
        job = summary.figures
        if selection.since is not None or selection.until is not None:
            job = job.clipped(selection.since, selection.until)
        if not job.spans:
            continue
        jobs.append((cluster, job))
        price = prices[cluster].per_hour(job.unit, job.queue) if cluster in prices else None
        tallies = [total, by_cluster.setdefault(cluster, Tally())]
        for t in tallies:
            t.jobs += 1
        counted: set[int] = set()
        for s in job.spans:
            micros = s.end - s.start
            resource = micros * job.width if s.holding else 0
            key = part_key(s)
            for t in tallies:
                t.add(key, micros, job.unit, resource, price)
            if s.part is Part.PRODUCTIVE:
                continue
            cause = by_cause.setdefault(str(s.blame.cause), Tally())
            cause.add(key, micros, job.unit, resource, price)
            if id(cause) not in counted:
                counted.add(id(cause))
                cause.jobs += 1
            if s.blame.rule is not None:
                rk = summary.rule_label(s.blame.rule)
                tally = by_rule.setdefault(rk, Tally())
                tally.add(key, micros, job.unit, resource, price)
                if id(tally) not in counted:
                    counted.add(id(tally))
                    tally.jobs += 1
        for run in job.runs:
            running[cluster] = running.get(cluster, 0) + run.running_micros
            if run.blame.cause in INTERRUPTIONS and run.ended_at is not None:
                interrupted[cluster] = interrupted.get(cluster, 0) + 1
        costs.setdefault(cluster, []).extend(job.checkpoint_costs)
    clusters = []
    for cluster in sorted(by_cluster):
        held = running.get(cluster, 0)
        count = interrupted.get(cluster, 0)
        mtbi = timedelta(microseconds=held / count) if count else None
        measured = costs.get(cluster) or []
        cost = (
            timedelta(seconds=statistics.median(c.total_seconds() for c in measured))
            if measured
            else checkpoint_cost
        )
        interval = young_daly(cost, mtbi) if cost is not None and mtbi is not None else None
        clusters.append(ClusterFigures(cluster, held, count, mtbi, cost, interval))
    return Report(
        jobs=tuple(jobs),
        total=total,
        by_cause=dict(sorted(by_cause.items())),
        by_rule=dict(sorted(by_rule.items())),
        by_cluster=dict(sorted(by_cluster.items())),
        clusters=tuple(clusters),
        since=selection.since,
        until=until,
    )


def _state_of(view: ev.View) -> State | None:
    for e in view.events:
        if type(e) is ev.OutcomeDecided:
            return e.state
        if type(e) is ev.CancelRequested:
            return STATE_CANCELLED
    return None
