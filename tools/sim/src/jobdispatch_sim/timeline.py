"""The run's history: one total order of record commits, backend calls, backend happenings,
operator actions and injected faults.

The checkers are pure folds over this sequence (Jepsen's lesson: a history is a totally ordered
log, and properties are functions of it). Timestamps cannot order things here, since simulated
time stands still within a step; the sequence number can. The world merges the backend's own
history (``env.history``) in before every commit it notes, so an object opened before a decision
was committed comes first in the timeline too.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

import attrs
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.spi import parse_discovery_name


@attrs.frozen(kw_only=True)
class Submitted:
    """A job's record was created (revision 0): its header, with the plan the checkers use."""

    seq: int
    at: datetime
    job: str
    header: ev.Header


@attrs.frozen(kw_only=True)
class Commit:
    """One event committed to a job's record at ``revision`` by ``actor``."""

    seq: int
    at: datetime
    job: str
    revision: int
    event: ev.AnyEvent
    actor: str
    #: The token the store kept with a decision (None for controls and evidence).
    token: int | None = None


@attrs.frozen(kw_only=True)
class Happened:
    """One entry of a backend's history (``shape`` tells the two backends apart)."""

    seq: int
    shape: str
    entry: h.Entry

    @property
    def job(self) -> str | None:
        return self.entry.job


@attrs.frozen(kw_only=True)
class Call:
    """A backend SPI call made through the simulator, by ``actor``, and how it ended."""

    seq: int
    at: datetime
    actor: str
    op: str
    job: str
    target: str
    result: str


@attrs.frozen(kw_only=True)
class Control:
    """An operator action: ``phase`` is invoke, ok or fail (with the error)."""

    seq: int
    at: datetime
    actor: str
    op: str
    job: str
    phase: str
    detail: str = ""


@attrs.frozen(kw_only=True)
class Note:
    """Something the simulator did to the world: a crash, a pause, a clock jump, a fault."""

    seq: int
    at: datetime
    kind: str
    text: str


@attrs.frozen(kw_only=True)
class Progressed:
    """What a job's helper did (``mark``, ``publish``, ``resume``, ``hang``: its run marks
    nothing more), or what a checkpoint root did (``blind``, ``see``; ``job`` is empty), as
    the simulator plays it: the ground truth the progress checkers judge the record by."""

    seq: int
    at: datetime
    job: str
    root: str
    what: str
    step: int | None = None
    submission: int = 0
    execution: str = ""


Item: TypeAlias = Submitted | Commit | Happened | Call | Control | Note | Progressed


def job_of_name(name: str) -> str | None:
    identity = parse_discovery_name(name)
    return identity[0] if identity else None


def _event_text(e: ev.AnyEvent) -> str:
    """A short, stable rendering of a record event: its kind and the fields that matter."""
    match e:
        case ev.SubmissionAuthorized():
            return f"authorize n={e.n} trigger={e.trigger} rule={e.rule}"
        case ev.AttemptStarted():
            return f"attempt {e.submission}.{e.attempt}"
        case ev.AttemptReplied():
            return f"reply {e.submission}.{e.attempt} {e.reply.value} {e.ref or ''}".rstrip()
        case ev.CanonicalChosen():
            return f"canonical n={e.submission} {e.ref} (attempt {e.attempt})"
        case ev.OpenDecided():
            return f"open-decided n={e.submission} {e.ref}"
        case ev.Retired():
            return f"retired {e.ref}"
        case ev.StopDecided():
            return f"stop-decided {e.ref} ({e.reason})"
        case ev.VerifiedStopped():
            return f"verified-stopped {e.ref}"
        case ev.Observed():
            xs = ",".join(
                f"{x.index}:{x.state}" + (f"/{x.cause.kind}" if x.cause else "")
                for x in e.obs.executions
            )
            return f"observed {e.obs.ref} {e.obs.state} [{xs}]"
        case ev.Absent():
            return f"absent {e.ref}"
        case ev.RecoveryDecided():
            return f"recovery rule={e.rule} trigger={e.trigger} {e.cause.kind}"
        case ev.HoldPlaced():
            return f"hold-placed #{e.instance} {e.hold.kind}"
        case ev.HoldLifted():
            return f"hold-lifted #{e.instance} resume={e.resume}"
        case ev.CallIssued():
            return f"call {e.op.value} {e.ref} #{e.instance}"
        case ev.CallAnswered():
            return f"answer r{e.call} ok={e.ok}"
        case ev.OutcomeDecided():
            return f"OUTCOME {e.state} ({e.cause.kind})"
        case ev.Escalated():
            return f"escalated {e.id}"
        case ev.Settled():
            return "SETTLED"
        case ev.CancelRequested():
            return "CANCEL requested"
        case ev.AbandonRequested():
            return f"abandon {e.submission}.{e.attempt}"
        case _:
            return e.kind


def _entry_text(e: h.Entry) -> str:
    match e:
        case h.Created():
            return f"created {e.ref} {e.name}"
        case h.StartReplyLost():
            return f"start-reply-lost {e.ref}"
        case h.StartRefused():
            return f"start-refused {e.name}"
        case h.Opened():
            return f"opened {e.ref} lifted={e.lifted}"
        case h.ExecutionStarted():
            return f"exec-started {e.ref}#{e.index}"
        case h.ExecutionEnded():
            return f"exec-ended {e.ref}#{e.index} {e.cause.kind}"
        case h.NativeRerun():
            return f"native-{e.mode} {e.ref} rule={e.rule}"
        case h.ObjectEnded():
            return f"object-ended {e.ref}"
        case h.Stopped():
            return f"stopped {e.ref} was={e.was}"
        case h.Requeued():
            return f"requeued {e.ref} was={e.was}"
        case _:
            return type(e).__name__.lower()


def render(item: Item, start: datetime) -> str:
    """One trace line. Deterministic: no addresses, no wall clock, only simulated time."""
    at = item.entry.at if isinstance(item, Happened) else item.at
    t = f"{(at - start).total_seconds():9.1f}s"
    match item:
        case Submitted():
            rules = "; ".join(
                f"{a.effective.action}/{a.enforcer} on {','.join(map(str, a.effective.on))}"
                f" budget {a.effective.budget}"
                for a in item.header.plan.rules
            )
            return f"{item.seq:6d} {t} {'operator':<14} submit {item.job} [{rules or 'no rules'}]"
        case Commit():
            who = item.actor
            return f"{item.seq:6d} {t} {who:<14} commit {item.job} r{item.revision} " + _event_text(
                item.event
            )
        case Happened():
            return f"{item.seq:6d} {t} {'backend':<14} {item.shape} " + _entry_text(item.entry)
        case Call():
            return (
                f"{item.seq:6d} {t} {item.actor:<14} call {item.op} {item.target} -> {item.result}"
            )
        case Control():
            tail = f" ({item.detail})" if item.detail else ""
            return f"{item.seq:6d} {t} {item.actor:<14} {item.op} {item.job} {item.phase}{tail}"
        case Note():
            return f"{item.seq:6d} {t} {'sim':<14} {item.kind}: {item.text}"
        case Progressed():
            step = "" if item.step is None else f" step {item.step}"
            run = f" {item.submission}/{item.execution}" if item.submission else ""
            who = item.job or item.root
            return f"{item.seq:6d} {t} {'job-helper':<14} {item.what} {who}{run}{step}"
    return ""  # pragma: no cover


class Timeline:
    """The append-only, totally ordered history of one run."""

    def __init__(self) -> None:
        self.items: list[Item] = []

    def __len__(self) -> int:
        return len(self.items)

    @property
    def next_seq(self) -> int:
        return len(self.items)

    def add(self, item: Item) -> None:
        self.items.append(item)

    def trace(self, start: datetime, *, job: str | None = None, last: int = 60) -> list[str]:
        """The last ``last`` lines, of one job's items (and the notes) when ``job`` is given."""
        chosen = [i for i in self.items if job is None or _about(i, job)]
        return [render(i, start) for i in chosen[-last:]]


def _about(item: Item, job: str) -> bool:
    if isinstance(item, Note):
        return True
    if isinstance(item, Progressed):
        return item.job in ("", job)
    if isinstance(item, Happened):
        return item.job == job
    return item.job == job
