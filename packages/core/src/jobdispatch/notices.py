"""Lifecycle notices: what a person may want to hear about a job, read off its record.

A notice is never committed as an intent of its own: the record already commits each fact once
(an execution seen running, seen ended, a rule's recovery, the settling), at one revision, and
every supervisor reads the same record. So a notice's id is derived from the record alone (its
kind and the revision of the event that caused it, plus the execution's index where one
observation shows several), and two supervisors, on two hosts, before and after a takeover,
name the same notice alike. Delivery is then recorded per sink (``notice-delivered``; an
escalation's keeps its ``escalation-delivered``), which is what makes delivery at least once and
not more, but for a delivery whose record was lost.

This module is pure: :func:`notices` reads a view and answers every notice the record implies,
in record order; :func:`delivered` answers which (notice, sink) pairs the record shows
delivered. ``stalled`` follows a committed stall verdict (enforced or observe-only) and
``resumed`` a run's resumed-from evidence (the checkpoint step it started from).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import attrs

from jobdispatch.records import events as ev
from jobdispatch.triggers import EscalationId
from jobdispatch.types import (
    Action,
    Cause,
    CauseKind,
    Enforcer,
    NoticeKind,
    ObjectState,
    State,
)

__all__ = [
    "ALERTS",
    "NOTICE_SCHEMA",
    "Notice",
    "RuleFiring",
    "delivered",
    "notices",
    "says_nothing",
]

#: The version of a notice's JSON body (``Notice.body``); a change that is not additive bumps it.
NOTICE_SCHEMA = "jobdispatch.notice/1"

#: Kinds that open an alert (a PagerDuty incident): each stays open until a later notice of the
#: job resolves it (``Notice.resolves``).
ALERTS = frozenset({NoticeKind.ENDED, NoticeKind.ESCALATED, NoticeKind.STALLED})

#: Causes that end an execution without anything wrong: no alert.
_QUIET_ENDS = frozenset({CauseKind.NONE, CauseKind.CANCELLED, CauseKind.DUPLICATE})
#: A rule with at most this many recoveries left after firing is running low.
BUDGET_LOW_LEFT = 1


@attrs.frozen(kw_only=True)
class RuleFiring:
    """The rule that acted: its index, its action, who enforces it and what budget it has left."""

    index: int
    action: Action
    enforcer: Enforcer
    budget_left: int
    budget: int


@attrs.frozen(kw_only=True)
class Notice:
    """One lifecycle notice of one job."""

    #: Unique within the job and stable across supervisors: ``KIND:REVISION`` (``:INDEX`` for
    #: one execution of several), or an escalation's own id for ``escalated``.
    id: str
    kind: NoticeKind
    job: str
    name: str
    revision: int
    at: datetime
    summary: str
    cause: Cause | None = None
    submission: int | None = None
    execution: int | None = None
    rule: RuleFiring | None = None
    outcome: State | None = None
    escalation: EscalationId | None = None
    #: An escalation's detail, as committed.
    detail: str = ""
    #: The ids of earlier alert notices of the job this one closes (a recovery, the settling).
    resolves: tuple[str, ...] = ()

    @property
    def alert(self) -> bool:
        """Whether this notice opens an alert: an end with a cause that is a problem, an
        escalation, a stall."""
        if self.kind is NoticeKind.ENDED:
            return self.cause is not None and self.cause.kind not in _QUIET_ENDS
        return self.kind in ALERTS

    @property
    def key(self) -> str:
        """The notice's id among every job's: ``JOB/ID``, what receivers deduplicate on."""
        return f"{self.job}/{self.id}"


def _cause_text(cause: Cause | None) -> str:
    return str(cause) if cause is not None else "no cause recorded"


class _Reader:
    """Walks a record once, in order, keeping what deriving notices needs."""

    def __init__(self, view: ev.View) -> None:
        self.header = view.header
        self.job = view.header.job
        self.name = view.header.spec.name
        self.out: list[Notice] = []
        self.canonical: dict[str, int] = {}  # object id -> submission
        self.last_obs: dict[str, ev.Observed] = {}
        self.started: set[tuple[str, int]] = set()
        self.ended: set[tuple[str, int]] = set()
        self.uses: dict[int, int] = {}
        self.open_alerts: list[str] = []
        self.outcome: ev.OutcomeDecided | None = None

    def add(self, notice: Notice) -> None:
        if notice.alert:
            self.open_alerts.append(notice.id)
        self.out.append(notice)

    def notice(
        self, kind: NoticeKind, id: str, revision: int, at: datetime, summary: str, **fields: object
    ) -> None:
        self.add(
            Notice(
                id=id,
                kind=kind,
                job=self.job,
                name=self.name,
                revision=revision,
                at=at,
                summary=summary,
                **fields,  # type: ignore[arg-type]
            )
        )

    def resolve(self) -> tuple[str, ...]:
        closed, self.open_alerts = tuple(self.open_alerts), []
        return closed

    def executions(self, revision: int, e: ev.Observed) -> None:
        obs = e.obs
        n = self.canonical.get(obs.ref.id)
        if n is None:
            return
        for x in obs.executions:
            key = (obs.ref.id, x.index)
            ran = x.state is ObjectState.RUNNING or (
                x.state is ObjectState.ENDED and x.started_at is not None
            )
            if ran and key not in self.started:
                self.started.add(key)
                self.notice(
                    NoticeKind.STARTED,
                    f"started:{revision}:{x.index}",
                    revision,
                    x.started_at or e.at,
                    f"submission {n} started running ({obs.ref})",
                    submission=n,
                    execution=x.index,
                )
            if x.state is ObjectState.ENDED and key not in self.ended:
                self.ended.add(key)
                self.notice(
                    NoticeKind.ENDED,
                    f"ended:{revision}:{x.index}",
                    revision,
                    x.ended_at or e.at,
                    f"submission {n} ended: {_cause_text(x.cause)}",
                    cause=x.cause,
                    submission=n,
                    execution=x.index,
                )

    def fired(self, revision: int, at: datetime, rule: int, cause: Cause | None, n: int) -> None:
        rules = self.header.plan.rules
        if not 0 <= rule < len(rules):
            return  # fold refuses such a record; nothing to tell here
        assignment = rules[rule]
        self.uses[rule] = self.uses.get(rule, 0) + 1
        budget = assignment.effective.budget
        left = max(budget - self.uses[rule], 0)
        firing = RuleFiring(
            index=rule,
            action=assignment.effective.action,
            enforcer=assignment.enforcer,
            budget_left=left,
            budget=budget,
        )
        self.notice(
            NoticeKind.RECOVERED,
            f"recovered:{revision}",
            revision,
            at,
            f"rule {rule} ({firing.action}) recovers from {_cause_text(cause)}; "
            f"{left} of {budget} left",
            cause=cause,
            submission=n,
            rule=firing,
            resolves=self.resolve(),
        )
        if left <= BUDGET_LOW_LEFT:
            self.notice(
                NoticeKind.BUDGET_LOW,
                f"budget-low:{revision}",
                revision,
                at,
                f"rule {rule} has {left} of its {budget} recoveries left",
                cause=cause,
                submission=n,
                rule=firing,
            )

    def read(self, revision: int, e: ev.AnyEvent) -> None:
        match e:
            case ev.CanonicalChosen(ref=ref, submission=n):
                self.canonical[ref.id] = n
                seen = self.last_obs.get(ref.id)
                if seen is not None:  # seen before it was chosen: what it showed counts now
                    self.executions(revision, seen)
            case ev.Observed(obs=obs):
                self.last_obs[obs.ref.id] = e
                self.executions(revision, e)
            case ev.SubmissionAuthorized(rule=rule, cause=cause, n=n) if rule is not None:
                self.fired(revision, e.at, rule, cause, n)
            case ev.RecoveryDecided(rule=rule, cause=cause, submission=n):
                self.fired(revision, e.at, rule, cause, n)
            case ev.Escalated(id=esc, detail=detail):
                self.notice(
                    NoticeKind.ESCALATED,
                    str(esc),
                    revision,
                    e.at,
                    f"escalated: {detail}",
                    escalation=esc,
                    detail=detail,
                )
            case ev.StallDeclared(ref=ref, execution=index, cause=cause, enforced=enforced):
                of = self.canonical.get(ref.id)
                what = "stalled, stopping it" if enforced else "stalled (observe only: not stopped)"
                self.notice(
                    NoticeKind.STALLED,
                    f"stalled:{revision}",
                    revision,
                    e.at,
                    f"submission {of} {what}: {_cause_text(cause)}",
                    cause=cause,
                    submission=of,
                    execution=index,
                )
            case ev.ResumedFrom(submission=n, execution=execution, step=step):
                self.notice(
                    NoticeKind.RESUMED,
                    f"resumed:{revision}",
                    revision,
                    e.resumed_at,
                    f"submission {n} resumed from the checkpoint of step {step}",
                    submission=n,
                    execution=int(execution) if execution.isdigit() else None,
                    detail=f"step {step}",
                )
            case ev.OutcomeDecided():
                self.outcome = e
            case ev.Settled():
                outcome = self.outcome
                state = outcome.state if outcome is not None else None
                cause = outcome.cause if outcome is not None else None
                # A failed job's alerts stay open for a person; any other end closes them.
                closes = self.resolve() if state is not State.FAILED else ()
                self.notice(
                    NoticeKind.SETTLED,
                    f"settled:{revision}",
                    revision,
                    e.at,
                    f"settled {state or 'without an outcome'}: {_cause_text(cause)}",
                    cause=cause,
                    outcome=state,
                    resolves=closes,
                )
            case _:
                pass


#: Events that imply no notice, mark none delivered and change nothing a later notice is read
#: from: a record that grew by these alone owes what it owed before (progress evidence, which a
#: job with a progress source adds every interval).
_SILENT: frozenset[type[ev.Event]] = frozenset(
    {ev.ProgressSeen, ev.ProgressBlind, ev.ProgressSighted}
)


def says_nothing(events: Iterable[ev.Event]) -> bool:
    """Whether ``events``, added to a record, change none of its notices or deliveries (so a
    caller that offered the record before them need not read it again for notices)."""
    return all(type(e) in _SILENT for e in events)


def notices(view: ev.View) -> tuple[Notice, ...]:
    """Every lifecycle notice ``view`` implies, in record order (a pure function of the record:
    any supervisor reading the same revision answers the same notices with the same ids)."""
    reader = _Reader(view)
    for revision, event in enumerate(view.events, start=1):
        reader.read(revision, event)
    return tuple(reader.out)


def delivered(view: ev.View) -> frozenset[tuple[str, str]]:
    """The (notice id, sink) pairs the record shows delivered, escalations' included."""
    out: set[tuple[str, str]] = set()
    for e in view.events:
        if isinstance(e, ev.NoticeDelivered):
            out.add((e.notice, e.sink))
        elif isinstance(e, ev.EscalationDelivered):
            out.add((str(e.escalation), e.sink))
    return frozenset(out)
