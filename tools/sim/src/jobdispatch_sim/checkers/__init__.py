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
from jobdispatch.records.events import View

from jobdispatch_sim.timeline import Item


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


def all_checkers() -> list[Checker]:
    """A fresh instance of every safety checker, in invariant order (liveness is separate)."""
    from jobdispatch_sim.checkers.budget import Budget
    from jobdispatch_sim.checkers.canonical_open import CanonicalOpen
    from jobdispatch_sim.checkers.causes import Causes
    from jobdispatch_sim.checkers.folds import Folds
    from jobdispatch_sim.checkers.outcome_final import OutcomeFinal
    from jobdispatch_sim.checkers.single_live import SingleLive

    return [SingleLive(), CanonicalOpen(), Budget(), OutcomeFinal(), Causes(), Folds()]
