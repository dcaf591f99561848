"""Invariant 2: only a submission's committed canonical object is ever opened, and only by a
recorded decision's call landing within the deadline that decision recorded.

An Open that lifted a gate (or a requeue that brought an ended object back to run) must come,
in the timeline, after the commit that made that very object its submission's canonical one.
Opening first and committing after is exactly the window in which a crash leaves a running
object the record does not own.

The call that did it must also carry the deadline of a decision committed before it (an
``open-decided``, or a requeue's ``call-issued``), and the backend must have acted no later
than that deadline by its own clock. A call carried out late (its process paused between the
decision and the call, perhaps past its lease, perhaps while the job was cancelled) is refused
by the adapter; this is what bounds such a call (spec 0001, D8).
"""

from __future__ import annotations

from jobdispatch.memory import history as h
from jobdispatch.records import events as ev

from jobdispatch_sim.checkers import Checker, Decided, Violation, runs_again
from jobdispatch_sim.timeline import Commit, Happened, Item


class CanonicalOpen(Checker):
    invariant = 2
    name = "only the canonical object opens"

    def __init__(self) -> None:
        #: job -> object id -> submission it is canonical for
        self.canonical: dict[str, dict[str, int]] = {}
        self.decided = Decided()

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Commit):
            self.decided.feed(item)
            if isinstance(item.event, ev.CanonicalChosen):
                self.canonical.setdefault(item.job, {})[item.event.ref.id] = item.event.submission
            return []
        if not isinstance(item, Happened):
            return []
        job = item.entry.job
        e = runs_again(item.entry)
        if job is None or e is None:
            return []
        what = "opened" if isinstance(e, h.Opened) else "requeued back to run"
        chosen = self.canonical.get(job, {})
        if e.ref.id not in chosen:
            return [
                self.violation(
                    job,
                    f"{e.ref} ({e.name}) was {what} without being committed as canonical first",
                    item.seq,
                )
            ]
        if self.decided.seq(job, e) is None:
            carried = "no deadline" if e.deadline is None else f"deadline {e.deadline}"
            return [
                self.violation(
                    job,
                    f"{e.ref} was {what} by a call carrying {carried}, which no decision "
                    "committed before it recorded",
                    item.seq,
                )
            ]
        assert e.deadline is not None
        if e.at > e.deadline:
            late = (e.at - e.deadline).total_seconds()
            return [
                self.violation(
                    job,
                    f"{e.ref} was {what} {late:.1f}s past the deadline its decision recorded",
                    item.seq,
                )
            ]
        return []
