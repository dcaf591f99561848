"""How often each interesting situation occurred: Antithesis-style "sometimes" assertions.

A sweep that never crashed between an attempt's commit and its Start call proves nothing about
that window, however many seeds passed. So situations are counted (some noted by the world
where it injects a fault, the rest derived here from the timeline), and a sweep fails when a
required one never happened: the simulator must show it went where the bugs would be.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from jobdispatch.members import CAUSE_STALLED, HOLD_RECOVERY, REPLY_CREATED, REPLY_UNKNOWN
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.triggers import BudgetSpent, End, Launch, Release, Resubmit

from jobdispatch_sim.timeline import Call, Commit, Control, Happened, Item

#: Situations every sweep of enough seeds must reach at least once.
REQUIRED: tuple[str, ...] = (
    "crash between attempt commit and Start",
    "crash between Start and its reply commit",
    "crash between canonical and open",
    "crash between open decision and open call",
    "open refused past its deadline",
    "operator crashed between cancel commit and its stops",
    "crash after a commit applied",
    "commit applied, reply lost",
    "power cut with a commit in flight",
    "pause inside a step",
    "lease lapsed while its holder was paused",
    "lease lost mid-step",
    "decision lost a race",
    "one batch executed several jobs' steps",
    "duplicate retired",
    "lost reply resolved by discovery",
    "a find missed objects",
    "native requeue observed",
    "native restart observed",
    "supervisor requeue",
    "resubmitted by a rule",
    "resubmitted by a person",
    "budget exhausted",
    "recovery hold placed",
    "hold released",
    "resumed after a hold",
    "start refused",
    "outcome succeeded",
    "outcome failed",
    "outcome cancelled",
    "given up",
    "requeue asked by a person",
    "a supervisor's clock went backward",
    "settled",
    "progress recorded",
    "resumed entry recorded",
    "progress source blind",
    "stall enforced",
    "stall observed only",
    "recovered from a stall",
    "firing not charged (training advanced)",
    "firing charged under no-advance",
    "pending deadline expired",
)


#: Events each of which is a situation by itself, whatever it carries.
_ALONE: Mapping[type[ev.Event], str] = {
    ev.Retired: "duplicate retired",
    ev.HoldLifted: "hold lifted by the supervisor",
    ev.ReleaseRequested: "hold released",
    ev.RequeueRequested: "requeue asked by a person",
    ev.GiveUpRequested: "given up",
    ev.VerifiedStopped: "verified stopped",
    ev.Absent: "absence recorded",
    ev.CessationAnswered: "cessation asked",
    ev.Settled: "settled",
    ev.ProgressSeen: "progress recorded",
    ev.ResumedFrom: "resumed entry recorded",
    ev.ProgressBlind: "progress source blind",
    ev.PendingExpired: "pending deadline expired",
}


class Coverage:
    """Counts of situations, fed by the world and by the timeline."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._unknown: set[tuple[str, int, int]] = set()
        self._canonical: set[str] = set()
        self._cancelled: set[str] = set()

    def cover(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def merge(self, other: Counter[str]) -> None:
        self.counts.update(other)

    def observe(self, item: Item) -> None:
        """Derive situations from one timeline item."""
        if isinstance(item, Commit):
            self._committed(item.job, item.event)
        else:
            self._beside(item)

    def _beside(self, item: Item) -> None:
        """Situations from what is not a commit: backend history, calls, operator actions."""
        if isinstance(item, Happened):
            entry = item.entry
            if isinstance(entry, h.NativeRerun):
                self.cover(f"native {entry.mode} by the backend")
            elif isinstance(entry, h.Opened) and entry.lifted and entry.job in self._cancelled:
                self.cover("open decided before a cancel lifted a gate after it")
            return
        if isinstance(item, Call):
            if item.op == "open" and item.result == "Rejected":
                self.cover("open refused past its deadline")
            return
        if isinstance(item, Control) and item.phase == "ok":
            self.cover(f"operator {item.op}")

    def _committed(self, job: str, e: ev.AnyEvent) -> None:
        """Situations from one event committed to ``job``'s record."""
        if isinstance(e, ev.SubmissionAuthorized | ev.RecoveryDecided):
            self._firing(e)
        alone = _ALONE.get(type(e))
        if alone is not None:
            self.cover(alone)
            return
        match e:
            case ev.AttemptReplied() if e.reply is not REPLY_CREATED:
                if e.reply is REPLY_UNKNOWN:
                    self._unknown.add((job, e.submission, e.attempt))
                else:
                    self.cover("start refused")
            case ev.CanonicalChosen():
                self._canonical.add(e.ref.id)
                if (job, e.submission, e.attempt) in self._unknown:
                    self.cover("lost reply resolved by discovery")
            case ev.Observed() if e.obs.ref.id in self._canonical and len(e.obs.executions) > 1:
                mode = "restart" if "/" in e.obs.ref.id else "requeue"
                self.cover(f"native {mode} observed")
            case ev.Escalated():
                self.cover(f"escalated: {e.id.word}")
                if isinstance(e.id, BudgetSpent):
                    self.cover("budget exhausted")
            case ev.HoldPlaced() if e.hold.kind is HOLD_RECOVERY:
                self.cover("recovery hold placed")
            case ev.RecoveryDecided() if e.ref is not None:
                self.cover("supervisor requeue")
            case ev.SubmissionAuthorized() if e.n > 1:
                if isinstance(e.trigger, End | Launch):
                    self.cover("resubmitted by a rule")
                elif isinstance(e.trigger, Resubmit):
                    self.cover("resubmitted by a person")
                elif isinstance(e.trigger, Release):
                    self.cover("resumed after a hold")
            case ev.OutcomeDecided():
                self.cover(f"outcome {e.state}")
            case ev.CancelRequested():
                self.cover("outcome cancelled")
                self._cancelled.add(job)
            case ev.CallIssued():
                self.cover(f"call issued: {e.op.value}")
            case ev.StallDeclared():
                self.cover("stall enforced" if e.enforced else "stall observed only")
            case _:
                pass

    def _firing(self, e: ev.SubmissionAuthorized | ev.RecoveryDecided) -> None:
        if e.charged is not None:
            self.cover(
                "firing charged under no-advance"
                if e.charged
                else "firing not charged (training advanced)"
            )
        if e.cause is not None and e.cause.kind is CAUSE_STALLED:
            self.cover("recovered from a stall")

    def missing(self, required: Iterable[str] = REQUIRED) -> list[str]:
        return [name for name in required if not self.counts.get(name)]

    def table(self) -> list[str]:
        """One line per situation, required ones marked, in a stable order."""
        names = sorted(set(self.counts) | set(REQUIRED))
        width = max(len(n) for n in names)
        lines = []
        for name in names:
            mark = "*" if name in REQUIRED else " "
            count = self.counts.get(name, 0)
            flag = "  <-- never happened" if mark == "*" and not count else ""
            lines.append(f"{mark} {name:<{width}} {count:>9}{flag}")
        return lines
