"""Invariant 12: a pending deadline ends only a wait that lasted it, and its ending keeps its
cause (spec 0001 D6, row P6; issue 35).

A job whose spec has a pending deadline (``[pending] after``) may have its canonical object
stopped for waiting too long. This checks, against the record and the backend's history: the
``pending-expired`` of an object is committed no sooner than ``pending.after`` after that
object's first ``open-decided`` (less twice the skew margin: two supervisors' clocks), with
the deadline's cause; a stop the backend records with the deadline's reason follows a
``pending-expired`` of that object; and every
recovery of that object's end names the deadline's cause (5 checks the outcome's).
"""

from __future__ import annotations

from datetime import datetime

from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.triggers import End
from jobdispatch.types import Cause, JobSpec

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.checkers.progress import SKEW_MARGIN
from jobdispatch_sim.timeline import Commit, Happened, Item, Submitted


class Pending(Checker):
    invariant = 12
    name = "a pending deadline ends only a wait that lasted it"

    def __init__(self) -> None:
        self.specs: dict[str, JobSpec] = {}
        #: (job, object id) -> when its first open was decided, by the deciding supervisor.
        self.opened: dict[tuple[str, str], datetime] = {}
        #: (job, object id) -> the cause its pending deadline ended it with.
        self.expired: dict[tuple[str, str], Cause] = {}

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Submitted):
            self.specs[item.job] = item.header.spec
            return []
        if isinstance(item, Happened):
            return self._stopped(item)
        if not isinstance(item, Commit):
            return []
        job, e = item.job, item.event
        if isinstance(e, ev.OpenDecided):
            self.opened.setdefault((job, e.ref.id), e.at)
        elif isinstance(e, ev.PendingExpired):
            return self._expired(item, e)
        elif isinstance(e, ev.SubmissionAuthorized | ev.RecoveryDecided):
            trigger = e.trigger
            if isinstance(trigger, End) and (job, trigger.ref) in self.expired:
                want = self.expired[(job, trigger.ref)]
                if e.cause is None or e.cause.kind is not want.kind:
                    got = e.cause.kind if e.cause else None
                    return [
                        self.violation(
                            job,
                            f"the end of {trigger.ref}, stopped for its pending deadline "
                            f"({want.kind}), was recovered with cause {got}",
                            item.seq,
                        )
                    ]
        return []

    def _expired(self, item: Commit, e: ev.PendingExpired) -> list[Violation]:
        job = item.job
        self.expired[(job, e.ref.id)] = e.cause
        spec = self.specs.get(job)
        if spec is None or spec.pending is None:
            return [
                self.violation(
                    job, f"{e.ref} expired pending, but its job has no pending deadline", item.seq
                )
            ]
        opened = self.opened.get((job, e.ref.id))
        if opened is None:
            return [self.violation(job, f"{e.ref} expired pending before it was opened", item.seq)]
        waited = e.at - opened
        if waited < spec.pending.after - 2 * SKEW_MARGIN:
            return [
                self.violation(
                    job,
                    f"{e.ref} expired pending {waited} after its open, before its deadline "
                    f"({spec.pending.after})",
                    item.seq,
                )
            ]
        if e.cause.kind is not spec.pending.cause:
            return [
                self.violation(
                    job,
                    f"{e.ref} expired pending with cause {e.cause.kind}, not the deadline's "
                    f"{spec.pending.cause}",
                    item.seq,
                )
            ]
        return []

    def _stopped(self, item: Happened) -> list[Violation]:
        e = item.entry
        job = item.job
        if not isinstance(e, h.Stopped) or job is None:
            return []
        spec = self.specs.get(job)
        if spec is None or spec.pending is None:
            return []
        if not e.reason.startswith(f"{spec.pending.cause}: pending for "):
            return []
        if (job, e.ref.id) in self.expired:
            return []
        return [
            self.violation(
                job,
                f"{e.ref} was stopped for its pending deadline ({e.reason!r}) before the "
                "deadline's expiry was committed: its end would read as a stop",
                item.seq,
            )
        ]
