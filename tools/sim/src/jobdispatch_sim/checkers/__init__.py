"""The invariants of contract section 7, one module per property.

Each checker is a pure fold over the run's timeline (record commits and backend happenings in
one total order): ``feed`` takes the next item and returns the violations it proves, ``settle``
runs after each whole simulation step (for properties that need a consistent moment, like
"the record folds"), ``finish`` after the run. Nothing here reads the world's internals: only
the timeline and the store's public reads, so a checker can be run again over a saved history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar, Protocol

import attrs
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.records.events import View

from jobdispatch_sim.timeline import Commit, Item


@attrs.frozen(kw_only=True)
class Violation:
    """A broken invariant: which one, about which job, what exactly, and where in the timeline."""

    invariant: int
    name: str
    job: str
    detail: str
    seq: int

    def __str__(self) -> str:
        return f"invariant {self.invariant} ({self.name}) broken for job {self.job}: {self.detail}"


class Context(Protocol):
    """What ``settle`` and ``finish`` may ask: the record as the store has it, and the jobs."""

    @property
    def now(self) -> datetime: ...

    def read(self, job: str) -> View: ...

    def listed(self) -> list[str]: ...

    def submitted(self) -> Sequence[str]: ...


class Checker:
    """A property over the timeline. Subclasses override what they need."""

    invariant: ClassVar[int] = 0
    name: ClassVar[str] = ""

    def feed(self, item: Item) -> list[Violation]:
        return []

    def settle(self, ctx: Context) -> list[Violation]:
        return []

    def finish(self, ctx: Context) -> list[Violation]:
        return []

    def violation(self, job: str, detail: str, seq: int) -> Violation:
        return Violation(invariant=self.invariant, name=self.name, job=job, detail=detail, seq=seq)


class Decided:
    """The deadlines decisions recorded for the calls that can make an object run: an open
    (``open-decided``) and a requeue (``call-issued`` of op requeue), each with the timeline
    position of its first commit.

    A backend's history says which deadline the call that lifted a gate (or requeued an ended
    object) carried, so a checker can tell which decision that call carried out, and when it
    was committed.
    """

    def __init__(self) -> None:
        #: (job, object id, "open" or "requeue", deadline) -> seq of the decision's commit
        self._seq: dict[tuple[str, str, str, datetime], int] = {}

    def feed(self, item: Item) -> None:
        if not isinstance(item, Commit):
            return
        e = item.event
        if isinstance(e, ev.OpenDecided) and e.deadline is not None:
            key = (item.job, e.ref.id, "open", e.deadline)
        elif isinstance(e, ev.CallIssued) and e.op is ev.CallOp.REQUEUE:
            key = (item.job, e.ref.id, "requeue", e.deadline)
        else:
            return
        self._seq.setdefault(key, item.seq)

    def seq(self, job: str, entry: h.Opened | h.Requeued) -> int | None:
        """Where the decision whose deadline ``entry``'s call carried was committed, or None
        when no decision recorded that deadline (or the call carried none)."""
        if entry.deadline is None:
            return None
        what = "open" if isinstance(entry, h.Opened) else "requeue"
        return self._seq.get((job, entry.ref.id, what, entry.deadline))


def runs_again(entry: h.Entry) -> h.Opened | h.Requeued | None:
    """``entry`` when it made an object able to run: a lifted gate, or an ended object
    requeued back to pending; else None."""
    if isinstance(entry, h.Opened) and entry.lifted:
        return entry
    if isinstance(entry, h.Requeued) and entry.was.value == "ended":
        return entry
    return None


def all_checkers() -> list[Checker]:
    """A fresh instance of every safety checker, in invariant order (liveness is separate)."""
    from jobdispatch_sim.checkers.budget import Budget
    from jobdispatch_sim.checkers.canonical_open import CanonicalOpen
    from jobdispatch_sim.checkers.causes import Causes
    from jobdispatch_sim.checkers.folds import Folds
    from jobdispatch_sim.checkers.outcome_final import OutcomeFinal
    from jobdispatch_sim.checkers.pending import Pending
    from jobdispatch_sim.checkers.progress import Progress
    from jobdispatch_sim.checkers.single_live import SingleLive

    return [
        SingleLive(),
        CanonicalOpen(),
        Budget(),
        OutcomeFinal(),
        Causes(),
        Folds(),
        Progress(),
        Pending(),
    ]
