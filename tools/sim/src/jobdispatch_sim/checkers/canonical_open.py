"""Invariant 2: only a submission's committed canonical object is ever opened.

An Open that lifted a gate (or a requeue that brought an ended object back to run) must come,
in the timeline, after the commit that made that very object its submission's canonical one.
Opening first and committing after is exactly the window in which a crash leaves a running
object the record does not own.
"""

from __future__ import annotations

from jobdispatch.memory import history as h
from jobdispatch.records import events as ev

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.timeline import Commit, Happened, Item


class CanonicalOpen(Checker):
    invariant = 2
    name = "only the canonical object opens"

    def __init__(self) -> None:
        #: job -> object id -> submission it is canonical for
        self.canonical: dict[str, dict[str, int]] = {}

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Commit):
            if isinstance(item.event, ev.CanonicalChosen):
                self.canonical.setdefault(item.job, {})[item.event.ref.id] = item.event.submission
            return []
        if not isinstance(item, Happened):
            return []
        e = item.entry
        job = e.job
        if job is None:
            return []
        opening = (isinstance(e, h.Opened) and e.lifted) or (
            isinstance(e, h.Requeued) and e.was.value == "ended"
        )
        if not opening:
            return []
        chosen = self.canonical.get(job, {})
        if e.ref.id not in chosen:
            what = "opened" if isinstance(e, h.Opened) else "requeued back to run"
            return [
                self.violation(
                    job,
                    f"{e.ref} ({e.name}) was {what} without being committed as canonical first",
                    item.seq,
                )
            ]
        return []
