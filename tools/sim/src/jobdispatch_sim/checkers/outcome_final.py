"""Invariant 4: a committed outcome never changes; after a cancel, nothing is opened that was
not decided before it (and then only within its recorded deadline); and a cancel commits before
it stops anything.

The outcome is fixed by the first commit that makes the job terminal (an outcome decision, a
cancel, a give-up); any later outcome decision is a change, whatever fold makes of it.

After a cancel took effect, a gate of the job may be lifted (or an ended object requeued back
to run) only by a call whose decision was committed before the cancel: a supervisor that
decided, then paused, cannot be kept from calling, since nothing in the scheduler knows of the
cancel until a stop reaches it (spec 0001, D8). What is checked is what the protocol promises:
no such call is decided after the cancel (decisions are conditional on the revision), and the
one decided before lands within the deadline it recorded (invariant 2 checks the deadline of
every call) and never lifts the gate of an object a stop reached first.

And every stop the operator's cancel makes must come after its commit in the timeline: stopping
first lets a supervisor see the stopped execution end and recover it before the cancel lands.
"""

from __future__ import annotations

from jobdispatch.members import STATE_CANCELLED, STATE_FAILED
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.types import State

from jobdispatch_sim.checkers import Checker, Context, Decided, Violation, runs_again
from jobdispatch_sim.timeline import Call, Commit, Happened, Item


class OutcomeFinal(Checker):
    invariant = 4
    name = "outcomes are final"

    def __init__(self) -> None:
        self.outcome: dict[str, tuple[State, int]] = {}
        self.cancelled: dict[str, int] = {}
        self.decided = Decided()
        #: Objects a stop reached before it ended: (job, object id).
        self.stopped: set[tuple[str, str]] = set()

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Commit):
            self.decided.feed(item)
            e = item.event
            job = item.job
            first = self.outcome.get(job)
            if isinstance(e, ev.OutcomeDecided):
                if first is not None:
                    return [
                        self.violation(
                            job,
                            f"outcome {e.state} ({e.cause.kind}) committed after outcome "
                            f"{first[0]} at #{first[1]}",
                            item.seq,
                        )
                    ]
                self.outcome[job] = (e.state, item.seq)
            elif isinstance(e, ev.CancelRequested) and first is None:
                self.outcome[job] = (STATE_CANCELLED, item.seq)
                self.cancelled[job] = item.seq
            elif isinstance(e, ev.GiveUpRequested) and first is None:
                self.outcome[job] = (STATE_FAILED, item.seq)
            return []
        if isinstance(item, Call):
            if item.actor == "op:cancel" and item.op == "stop" and item.job not in self.outcome:
                return [
                    self.violation(
                        item.job,
                        f"the cancel stopped {item.target} before its commit made the job terminal",
                        item.seq,
                    )
                ]
            return []
        if isinstance(item, Happened):
            entry = item.entry
            job2 = entry.job
            if job2 is None:
                return []
            if isinstance(entry, h.Stopped) and entry.was.value != "ended":
                self.stopped.add((job2, entry.ref.id))
                return []
            cancel = self.cancelled.get(job2)
            e2 = runs_again(entry)
            if cancel is None or e2 is None:
                return []
            what = "opened" if isinstance(e2, h.Opened) else "requeued back to run"
            if isinstance(e2, h.Opened) and (job2, e2.ref.id) in self.stopped:
                return [
                    self.violation(
                        job2, f"{e2.ref} was opened after a stop reached it gated", item.seq
                    )
                ]
            decided = self.decided.seq(job2, e2)
            if decided is None or decided > cancel:
                when = "never recorded" if decided is None else f"decided at #{decided}"
                return [
                    self.violation(
                        job2,
                        f"{e2.ref} was {what} after the cancel commit at #{cancel} by a call "
                        f"{when}, not before the cancel",
                        item.seq,
                    )
                ]
        return []

    def finish(self, ctx: Context) -> list[Violation]:
        """The folded record agrees with the first outcome committed."""
        from jobdispatch.job import fold

        out = []
        for job, (state, seq) in sorted(self.outcome.items()):
            folded = fold(ctx.read(job), ctx.now)
            if folded.outcome is None or folded.outcome.state is not state:
                got = folded.outcome.state if folded.outcome else "none"
                out.append(self.violation(job, f"fold shows outcome {got}, committed {state}", seq))
        return out
