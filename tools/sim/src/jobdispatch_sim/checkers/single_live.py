"""Invariant 1: no two objects of one job are past their gate and live at the same time.

Checked on the backend's own history, not on the record: what matters is what ran. An object is
live from the moment Open lifts its gate (or a requeue brings an opened object back) until the
backend ends it; held and pending count as live, because a release or the scheduler may start
them at any moment without asking the supervisor. Order is the timeline's, not timestamps, so
an end and an open in the same simulated instant are still told apart.
"""

from __future__ import annotations

from jobdispatch.memory import history as h

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.timeline import Happened, Item


class SingleLive(Checker):
    invariant = 1
    name = "one live object per job"

    def __init__(self) -> None:
        self.live: dict[str, dict[str, int]] = {}
        self.opened: set[tuple[str, str]] = set()
        self.reported: set[str] = set()

    def feed(self, item: Item) -> list[Violation]:
        if not isinstance(item, Happened):
            return []
        e = item.entry
        job = e.job
        if job is None:
            return []
        key = (item.shape, e.ref.id)
        live = self.live.setdefault(job, {})
        if isinstance(e, h.Opened) and e.lifted:
            self.opened.add(key)
            live[e.ref.id] = item.seq
        elif isinstance(e, h.Requeued) and e.was.value == "ended" and key in self.opened:
            live[e.ref.id] = item.seq
        elif isinstance(e, h.ObjectEnded):
            live.pop(e.ref.id, None)
        if len(live) > 1 and job not in self.reported:
            self.reported.add(job)
            since = ", ".join(f"{ref} (live since #{seq})" for ref, seq in sorted(live.items()))
            return [self.violation(job, f"objects {since} are live at once", item.seq)]
        return []
