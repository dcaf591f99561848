"""Invariants 8 to 11: progress, stalls and no-advance budgets (spec 0001 D6, rows P1 to P5).

The ground truth is what the simulator played of each job's helper and checkpoint store
(``Progressed`` items: marks, publications, resumed entries, hangs, a root going blind and
seeing again); the record is judged against it:

8. no stall is declared while the run's own progress was visible within ``stall.after``;
9. no stall is declared while the job's checkpoint root is blind;
10. no firing of a ``no-advance`` rule is charged when the newest checkpoint advanced since the
    rule's previous firing and the root could be read at the firing;
11. a run stopped as stalled had its stall committed before the stop, and every recovery of
    that run's end names the cause ``stalled``, unless the run had ended by itself before the
    stall was decided (``jobdispatch.job.ended_before``: its own ending is the cause then).

Clocks: a supervisor's clock may be off the world's by the seed's skew (at most 20 s), and a
stall rule is judged on the supervisor's clock against the job's; invariant 8 allows
``SKEW_MARGIN`` for it (a stall rule is never shorter than 2 minutes in the workload).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from jobdispatch.job import ended_before
from jobdispatch.members import CAUSE_STALLED, CHARGE_NO_ADVANCE, OBJ_RUNNING
from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.triggers import End
from jobdispatch.types import Cause, JobSpec, Plan

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.timeline import Commit, Happened, Item, Progressed, Submitted

#: More than the largest clock skew a seed draws (20 s).
SKEW_MARGIN = timedelta(seconds=30)


class Progress(Checker):
    invariant = 8
    name = "progress and stalls"

    def __init__(self) -> None:
        self.specs: dict[str, JobSpec] = {}
        self.plans: dict[str, Plan] = {}
        self.blind: set[str] = set()
        #: (job, submission) -> the newest time the job's helper marked or published for it.
        self.newest: dict[tuple[str, int], datetime] = {}
        #: job -> the newest checkpoint step published (the truth a no-advance charge needs).
        self.checkpoint: dict[str, int] = {}
        #: (job, rule) -> the newest checkpoint at the rule's previous firing (None: none yet).
        self.fired: dict[tuple[str, int], int | None] = {}
        #: (job, object id) -> its submission, once canonical.
        self.submission: dict[tuple[str, str], int] = {}
        #: (job, object id, run) -> when the record first showed the run running.
        self.started: dict[tuple[str, str, int], datetime] = {}
        #: (job, object id, run) of every enforced stall committed -> when it was decided.
        self.stalled: dict[tuple[str, str, int], datetime] = {}
        #: (job, object id, run) -> how and when the backend ended it.
        self.ended: dict[tuple[str, str, int], tuple[Cause, datetime]] = {}
        #: (job, object id) with an enforced stall committed, for the stop that follows.
        self.stopping: set[tuple[str, str]] = set()

    def _fail(self, invariant: int, name: str, job: str, detail: str, seq: int) -> Violation:
        return Violation(invariant=invariant, name=name, job=job, detail=detail, seq=seq)

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Submitted):
            self.specs[item.job] = item.header.spec
            self.plans[item.job] = item.header.plan
            return []
        if isinstance(item, Progressed):
            self._progressed(item)
            return []
        if isinstance(item, Happened):
            return self._happened(item)
        if isinstance(item, Commit):
            return self._commit(item)
        return []

    def _progressed(self, item: Progressed) -> None:
        if item.what == "blind":
            self.blind.add(item.root)
        elif item.what == "see":
            self.blind.discard(item.root)
        elif item.what in ("mark", "publish"):
            key = (item.job, item.submission)
            self.newest[key] = max(self.newest.get(key, item.at), item.at)
            if item.what == "publish" and item.step is not None:
                self.checkpoint[item.job] = max(self.checkpoint.get(item.job, -1), item.step)

    def _happened(self, item: Happened) -> list[Violation]:
        e = item.entry
        job = item.job
        if isinstance(e, h.ExecutionEnded) and job is not None:
            self.ended[(job, e.ref.id, e.index)] = (e.cause, e.at)
            return []
        if not isinstance(e, h.Stopped) or job is None or not e.reason.startswith("stalled"):
            return []
        if (job, e.ref.id) in self.stopping:
            return []
        return [
            self._fail(
                11,
                "a stalled run ends as stalled",
                job,
                f"{e.ref} was stopped as stalled ({e.reason!r}) before any stall of it was "
                "committed: its end would read as a stop, not a stall",
                item.seq,
            )
        ]

    def _root_blind(self, job: str) -> bool:
        spec = self.specs.get(job)
        return spec is not None and spec.progress is not None and spec.progress.root in self.blind

    def _commit(self, item: Commit) -> list[Violation]:
        e = item.event
        job = item.job
        if isinstance(e, ev.CanonicalChosen):
            self.submission[(job, e.ref.id)] = e.submission
        elif isinstance(e, ev.Observed):
            runs = e.obs.executions
            if e.obs.state is OBJ_RUNNING and runs and runs[-1].state is OBJ_RUNNING:
                self.started.setdefault((job, e.obs.ref.id, runs[-1].index), e.at)
        elif isinstance(e, ev.StallDeclared):
            return self._stall(item, e)
        elif isinstance(e, ev.SubmissionAuthorized | ev.RecoveryDecided):
            return self._firing(item, e)
        return []

    def _stall(self, item: Commit, e: ev.StallDeclared) -> list[Violation]:
        job = item.job
        out: list[Violation] = []
        if e.enforced:
            self.stalled[(job, e.ref.id, e.execution)] = e.at
            self.stopping.add((job, e.ref.id))
        if self._root_blind(job):
            out.append(
                self._fail(
                    9,
                    "no stall while blind",
                    job,
                    f"run {e.execution} of {e.ref} declared stalled while its checkpoint root "
                    "could not be read",
                    item.seq,
                )
            )
        spec = self.specs.get(job)
        n = self.submission.get((job, e.ref.id))
        started = self.started.get((job, e.ref.id, e.execution))
        if spec is None or spec.stall is None or n is None or started is None:
            return out
        newest = self.newest.get((job, n))
        if newest is not None and newest >= started:
            quiet = item.at - newest
            if quiet < spec.stall.after - SKEW_MARGIN:
                out.append(
                    self._fail(
                        8,
                        "no stall while progress is visible",
                        job,
                        f"run {e.execution} of {e.ref} declared stalled though it made progress "
                        f"{quiet} ago (stall after {spec.stall.after}): {e.cause.detail}",
                        item.seq,
                    )
                )
        return out

    def _stalled_end(self, job: str, end: End) -> bool:
        """Whether ``end`` is that of a run stopped as stalled, which then ends as stalled: an
        enforced stall was committed for it, and the run had not ended by itself before."""
        key = (job, end.ref, end.index)
        decided = self.stalled.get(key)
        if decided is None:
            return False
        own = self.ended.get(key)
        return own is None or not ended_before(own[0], own[1], decided)

    def _firing(
        self, item: Commit, e: ev.SubmissionAuthorized | ev.RecoveryDecided
    ) -> list[Violation]:
        job = item.job
        out: list[Violation] = []
        trigger = e.trigger
        if isinstance(trigger, End) and self._stalled_end(job, trigger):
            cause = e.cause
            if cause is None or cause.kind is not CAUSE_STALLED:
                out.append(
                    self._fail(
                        11,
                        "a stalled run ends as stalled",
                        job,
                        f"the end of run {trigger.index} of {trigger.ref}, stopped as stalled, "
                        f"was recovered with cause {cause.kind if cause else None}",
                        item.seq,
                    )
                )
        plan = self.plans.get(job)
        rule = e.rule
        if plan is None or rule is None or not 0 <= rule < len(plan.rules):
            return out
        if plan.rules[rule].effective.charge is not CHARGE_NO_ADVANCE or not isinstance(
            trigger, End
        ):
            # A launch failure is charged on the evidence recorded so far: progress is
            # recorded at once only when a run has ended (row P1).
            return out
        newest = self.checkpoint.get(job)
        key = (job, rule)
        first = key not in self.fired
        previous = self.fired.get(key)
        self.fired[key] = newest
        advanced = newest is not None and (first or previous is None or newest > previous)
        if advanced and e.charged is not False and not self._root_blind(job):
            out.append(
                self._fail(
                    10,
                    "no charge when training advanced",
                    job,
                    f"rule {rule} (charge no-advance) charged its firing for {trigger} though "
                    f"the newest checkpoint advanced to step {newest} since its previous firing "
                    f"({'none' if first else previous})",
                    item.seq,
                )
            )
        return out
