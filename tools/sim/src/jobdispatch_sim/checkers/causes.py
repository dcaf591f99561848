"""Invariant 5: every ended execution's cause is in the record as observed, and the outcome's
cause is the cause of the execution that ended the job.

The backend's history says how each execution really ended. By the time a job settles, the
record must hold an observation of each of those executions, ended, with that exact cause (never
collapsed to "failed", never guessed). And an outcome the supervisor decides must carry the
cause of the last execution of the latest submission's canonical object, as the backend ended
it (or, for a run the supervisor stopped as stalled, that stall's cause unless the run had
ended by itself before the stall was decided (``jobdispatch.job.ended_before``), and for an
object it
stopped for its pending deadline, the deadline's); with no execution to
point to (a launch that never ran), the cause must say so. An outcome
decided while that object still runs, or a job settled while any of its executions runs, has
no ended execution behind it at all.
"""

from __future__ import annotations

from datetime import datetime

from jobdispatch.job import ended_before
from jobdispatch.members import OBJ_ENDED
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.types import Cause, CauseKind

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.timeline import Commit, Happened, Item

_NO_RUN = (CauseKind.LAUNCH_FAILED, CauseKind.UNKNOWN)


class Causes(Checker):
    invariant = 5
    name = "causes as observed"

    def __init__(self) -> None:
        self.latest: dict[str, int] = {}
        self.canonical: dict[tuple[str, int], str] = {}
        #: job -> object id -> execution index -> cause, as the backend ended them
        self.ended: dict[str, dict[str, dict[int, Cause]]] = {}
        #: (job, object id, execution index) -> when the backend ended it
        self.ended_at: dict[tuple[str, str, int], datetime] = {}
        #: job -> (object id, execution index, cause) observed ended in the record
        self.observed: dict[str, set[tuple[str, int, Cause]]] = {}
        #: job -> object id -> indices of executions running now, as the backend has them
        self.running: dict[str, dict[str, set[int]]] = {}
        #: (job, object id, execution index) -> the cause of its enforced stall and when it was
        #: decided: the record's cause of that run's end, whatever the backend shows of the
        #: stop, unless the run ended by itself before (spec 0001 D6, P3)
        self.stalled: dict[tuple[str, str, int], tuple[Cause, datetime]] = {}
        #: (job, object id) -> the cause of its pending deadline's expiry: the record's cause
        #: of its end, run or not, whatever the backend shows of the stop (row P6)
        self.pending: dict[tuple[str, str], Cause] = {}

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Happened):
            e = item.entry
            if e.job is None:
                return []
            if isinstance(e, h.ExecutionStarted):
                self.running.setdefault(e.job, {}).setdefault(e.ref.id, set()).add(e.index)
            elif isinstance(e, h.ExecutionEnded):
                self.ended.setdefault(e.job, {}).setdefault(e.ref.id, {})[e.index] = e.cause
                self.ended_at[(e.job, e.ref.id, e.index)] = e.at
                self.running.setdefault(e.job, {}).setdefault(e.ref.id, set()).discard(e.index)
            return []
        if not isinstance(item, Commit):
            return []
        job, event = item.job, item.event
        if isinstance(event, ev.SubmissionAuthorized):
            self.latest[job] = event.n
        elif isinstance(event, ev.CanonicalChosen):
            self.canonical[(job, event.submission)] = event.ref.id
        elif isinstance(event, ev.Observed):
            seen = self.observed.setdefault(job, set())
            for x in event.obs.executions:
                if x.state is OBJ_ENDED and x.cause is not None:
                    seen.add((event.obs.ref.id, x.index, x.cause))
        elif isinstance(event, ev.StallDeclared) and event.enforced:
            self.stalled[(job, event.ref.id, event.execution)] = (event.cause, event.at)
        elif isinstance(event, ev.PendingExpired):
            self.pending[(job, event.ref.id)] = event.cause
        elif isinstance(event, ev.OutcomeDecided):
            return self._outcome(job, event, item.seq)
        elif isinstance(event, ev.Settled):
            return self._settled(job, item.seq)
        return []

    def _outcome(self, job: str, event: ev.OutcomeDecided, seq: int) -> list[Violation]:
        n = self.latest.get(job)
        ref = self.canonical.get((job, n)) if n is not None else None
        runs = self.ended.get(job, {}).get(ref, {}) if ref is not None else {}
        live = self.running.get(job, {}).get(ref, set()) if ref is not None else set()
        if live:
            return [
                self.violation(
                    job,
                    f"outcome {event.state} ({event.cause.kind}) decided while {ref}'s "
                    f"execution {max(live)} still runs: no execution ended the job",
                    seq,
                )
            ]
        expired = self.pending.get((job, ref)) if ref is not None else None
        if runs:
            last = max(runs)
            expected = runs[last]
            if ref:
                stall = self.stalled.get((job, ref, last))
                if stall is not None and not ended_before(
                    expected, self.ended_at.get((job, ref, last)), stall[1]
                ):
                    expected = stall[0]
            expected = expired or expected
            if event.cause != expected:
                return [
                    self.violation(
                        job,
                        f"outcome {event.state} with cause {event.cause!r}, but {ref}'s last "
                        f"execution ended {expected!r}",
                        seq,
                    )
                ]
        elif expired is not None:
            if event.cause != expired:
                return [
                    self.violation(
                        job,
                        f"outcome {event.state} with cause {event.cause!r}, but {ref} was "
                        f"stopped for its pending deadline ({expired!r})",
                        seq,
                    )
                ]
        elif event.cause.kind not in _NO_RUN:
            return [
                self.violation(
                    job,
                    f"outcome {event.state} with cause {event.cause.kind}, yet submission {n}'s "
                    "canonical object never ended an execution",
                    seq,
                )
            ]
        return []

    def _settled(self, job: str, seq: int) -> list[Violation]:
        seen = self.observed.get(job, set())
        out = []
        for ref, live in sorted(self.running.get(job, {}).items()):
            if live:
                out.append(
                    self.violation(
                        job,
                        f"settled while {ref}'s execution {max(live)} still runs: its end can "
                        "never be observed",
                        seq,
                    )
                )
        for ref, runs in sorted(self.ended.get(job, {}).items()):
            for index, cause in sorted(runs.items()):
                if (ref, index, cause) not in seen:
                    out.append(
                        self.violation(
                            job,
                            f"settled, yet {ref} execution {index}'s end ({cause.kind}) was "
                            "never observed in the record",
                            seq,
                        )
                    )
        return out[:1]
