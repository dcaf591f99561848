"""Mutants: each reverts one protection of the real code, for the duration of one run.

A simulator that passes proves little until it is seen failing for the right reasons. Each
mutant here undoes exactly one thing the contract relies on, by patching or wrapping the real
code (never by a flag in production code), and the mutants session shows that a bounded number
of seeds catches every one of them. The patches live only inside ``active(name)`` and are undone
on exit, so one process can run the real code and every mutant in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any

import attrs
from jobdispatch import cluster as cluster_mod
from jobdispatch import job as job_mod
from jobdispatch import progress as progress_mod
from jobdispatch import steps as steps_mod
from jobdispatch.job import Job
from jobdispatch.memory.cluster import Cluster as _MemCluster
from jobdispatch.records import events as ev
from jobdispatch.records import rules
from jobdispatch.records.store import Lease
from jobdispatch.spi import Discovery
from jobdispatch.steps import Authorize, Canonical, Observe, Outcome, Start, Step
from jobdispatch.triggers import End, Launch, Retry, Trigger
from jobdispatch.types import Actor
from jobdispatch_supervise import executor as executor_mod
from jobdispatch_supervise.executor import Executor, Work
from jobdispatch_supervise.ownership import Ownership


@contextmanager
def _patched(*patches: tuple[object, str, object]) -> Iterator[None]:
    """Set attributes for the duration of the block; put the originals back after."""
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, value in patches:
        setattr(obj, name, value)
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


# ---------------------------------------------------------------------------- the store


def _accept(*args: object, **kwargs: object) -> None:
    return None


def no_revision_check() -> AbstractContextManager[None]:
    """Appends ignore ``expect_revision``: a decision computed from an old read lands anyway.
    The rule is patched in :mod:`jobdispatch.records.rules`, so every store loses it."""
    return _patched((rules, "check_revision", _accept))


def no_fencing() -> AbstractContextManager[None]:
    """Decisions (and renewals) are accepted from any holder, current lease or not. The rule
    is patched in :mod:`jobdispatch.records.rules`, so every store loses it."""
    return _patched((rules, "check_owner", _accept))


# ---------------------------------------------------------------------------- ownership


def refused_never_retried() -> AbstractContextManager[None]:
    """A holder refused a job once (another held it, or its own lease was lost) never tries
    to own it again: the Supervisor's :class:`Ownership` no longer drops a refused lease to try
    afresh, so a job every live supervisor was once refused is left unsupervised."""
    original = Ownership.own

    def own(self: Ownership, job: str) -> Lease | None:
        refused: set[str] = self.__dict__.setdefault("_refused", set())
        if job in refused:
            return None
        lease = original(self, job)
        if lease is None:
            refused.add(job)
        return lease

    original_many = Ownership.own_many

    def own_many(self: Ownership, jobs: Sequence[str]) -> dict[str, Lease]:
        refused: set[str] = self.__dict__.setdefault("_refused", set())
        owned = original_many(self, [j for j in jobs if j not in refused])
        refused.update(j for j in jobs if j not in owned)
        return owned

    return _patched((Ownership, "own", own), (Ownership, "own_many", own_many))


# ---------------------------------------------------------------------------- the executor


def open_before_canonical() -> AbstractContextManager[None]:
    """The chosen object's gate is lifted before it is committed as canonical."""
    original = Executor._execute

    def execute(self: Executor, works: Sequence[Work]) -> None:
        for w in works:
            if isinstance(w.step, Canonical):
                self.backend.open(w.step.ref)
        original(self, works)

    return _patched((Executor, "_execute", execute))


def _rule_for(folded: Job, kind: object) -> int | None:
    for a in folded.header.plan.rules:
        if kind in a.effective.on:
            return a.index
    return None


def budget_after_start() -> AbstractContextManager[None]:
    """A rule's submission is authorized without its budget reservation, and the budget is
    charged only once the first Start has answered (a crash in between loses the charge)."""
    original = Executor._execute

    def execute(self: Executor, works: Sequence[Work]) -> None:
        for w in works:
            if isinstance(w.step, Authorize) and w.step.rule is not None:
                w.step = attrs.evolve(w.step, rule=None)
        original(self, works)
        for w in works:
            if isinstance(w.step, Start) and w.going:
                _charge_after_start(self, w.job, w.folded, w.step, w.lease)

    return _patched((Executor, "_execute", execute))


def call_before_commit() -> AbstractContextManager[None]:
    """The batch path's calls are made while their batch's decisions are still being
    committed (as a pool that started the calls with the batch, not after its commit
    returned would): a call is made for a decision that then lands, is refused, or is lost."""

    def execute(self: Executor, works: Sequence[Work]) -> None:
        for w in works:
            w.call = w.step.call(w.ctx)
        self._call(works)
        made = {id(w): w.result for w in works}
        self._decide(works)
        for w in works:
            result = made[id(w)]
            # The answers name the revision the decision landed at, as the real path's do.
            w.result = None if result is None else attrs.evolve(result, revision=w.revision)
        self._answer(works)

    return _patched((Executor, "_execute", execute))


def _charge_after_start(self: Executor, job: str, folded: Job, step: Start, lease: Lease) -> None:
    """Charge a rule's budget for the submission whose first Start just answered."""
    sub = folded.submission(step.submission)
    if step.attempt != 1 or sub is None or sub.cause is None:
        return
    if not isinstance(sub.trigger, End | Launch):
        return
    rule = _rule_for(folded, sub.cause.kind)
    if rule is None:
        return
    view = self.store.read(job)
    # The late charge needs a trigger of its own that no rule's accounting reads: a retry
    # named by the revision it lands at is used by nothing else in a record.
    charge = ev.RecoveryDecided(
        at=self.clock(),
        by=self.actor,
        rule=rule,
        trigger=Retry(view.revision + 1),
        cause=sub.cause,
        submission=step.submission,
    )
    self.store.append(job, [charge], expect_revision=view.revision, owner=lease)


# ---------------------------------------------------------------------------- fold and next


def open_next_before_stopped() -> AbstractContextManager[None]:
    """Submission n+1 is opened without waiting for submission n's object to be verified
    stopped."""
    original = steps_mod._launch

    def launch(job: Job, sub: Any, hold: Any, now: datetime) -> Any:
        hidden = []
        for older in job.submissions[: sub.n - 1]:
            for o in job.objects_of(older.n):
                if o.canonical and o.open_decided and not o.done:
                    o.verified_stopped = True
                    hidden.append(o)
        try:
            return original(job, sub, hold, now)
        finally:
            for o in hidden:
                o.verified_stopped = False

    return _patched((steps_mod, "_launch", launch))


def trigger_ignored() -> AbstractContextManager[None]:
    """Fold forgets which triggers were used, so one trigger can authorize again and again."""

    def use_trigger(self: Any, i: int, trigger: Trigger) -> None:
        return None

    return _patched((job_mod._Folder, "_use_trigger", use_trigger))


def outcome_overwritten() -> AbstractContextManager[None]:
    """A terminal job's outcome can be decided again: an execution that ends after a cancel or
    a give-up replaces the outcome."""
    original_next = steps_mod.next_steps

    def on_outcome(self: Any, i: int, e: ev.OutcomeDecided) -> None:
        self._outcome(e.state, e.cause, e.at)

    def next_steps(
        job: Job,
        discovery: Discovery,
        now: datetime,
        progress: progress_mod.Reading | None = None,
    ) -> list[Step]:
        steps = original_next(job, discovery, now, progress)
        if job.terminal and not job.settled and not isinstance(steps[0], Observe):
            saved = job.outcome
            job.outcome = None
            try:
                again = steps_mod._drive(job, now)
            finally:
                job.outcome = saved
            if again and isinstance(again[0], Outcome):
                return again
        return steps

    return _patched(
        (job_mod._Folder, "_on_outcome_decided", on_outcome),
        (executor_mod, "next_steps", next_steps),
    )


def no_absence_grace() -> AbstractContextManager[None]:
    """An object missing from one complete Find is judged stopped at once."""
    return _patched((steps_mod, "ABSENCE_GRACE", timedelta(0)))


# ---------------------------------------------------------------------------- the adapter


def open_ignores_deadline() -> AbstractContextManager[None]:
    """The memory adapter lifts a gate however late the open call lands: it keeps the deadline
    the call carries (its history shows it) but no longer refuses the call past it."""
    original = _MemCluster.check_deadline

    def check_deadline(self: _MemCluster, deadline: datetime, what: str) -> None:
        if not what.startswith("open of "):
            original(self, deadline, what)

    return _patched((_MemCluster, "check_deadline", check_deadline))


# ---------------------------------------------------------------------------- the operator


def cancel_not_first() -> AbstractContextManager[None]:
    """Cancel stops what is live first and commits the outcome after."""

    def cancel(
        self: cluster_mod.Operator, job: str, *, by: Actor, reason: str = ""
    ) -> cluster_mod.CancelReceipt:
        report = cluster_mod._stop_all(
            self._backend, job, f"cancelled by {by}: {reason}".rstrip(": ")
        )
        committed, folded = self._commit(
            job,
            lambda j: (
                None if j.terminal else ev.CancelRequested(at=self._clock(), by=by, reason=reason)
            ),
        )
        return cluster_mod.CancelReceipt(
            job=job,
            committed=committed,
            already=folded.outcome.state if not committed and folded.outcome else None,
            cleanup_complete=not report.live,
            live=report.live,
        )

    return _patched((cluster_mod.Operator, "cancel", cancel))


# ---------------------------------------------------------------------------- progress


def declares_while_blind() -> AbstractContextManager[None]:
    """A reading that could not be made is judged as a reading that shows no progress: a
    blind supervisor declares a stall once the run's grace or stall time has passed."""
    original = progress_mod.judge

    def judge_blind(job: Job, reading: progress_mod.Reading, now: datetime) -> progress_mod.Verdict:
        if isinstance(reading, progress_mod.Blind):
            stalled = progress_mod._stall(job, progress_mod.JobProgress(), now)
            if stalled is not None:
                return progress_mod.Verdict(stall=stalled)
        return original(job, reading, now)

    return _patched((progress_mod, "judge", judge_blind))


def stall_from_record_only() -> AbstractContextManager[None]:
    """A stall is judged on the progress the record holds, not on the poll's reading: since
    progress enters the record at most once per ``record_every``, a run that marks every step
    looks hung between two recordings."""
    original = progress_mod._stall

    def stall(job: Job, reading: progress_mod.JobProgress, now: datetime) -> Any:
        return original(job, progress_mod.JobProgress(), now)

    return _patched((progress_mod, "_stall", stall))


def charges_on_advance() -> AbstractContextManager[None]:
    """Every firing of a no-advance rule is charged, whether training advanced or not."""
    return _patched((Job, "would_charge", lambda self, rule: True))


def kills_before_stall_commit() -> AbstractContextManager[None]:
    """A stalled run is stopped without the stall (and the stop) committed first: its end
    reads as the stop the backend shows, not as a stall."""

    def before(self: steps_mod.DeclareStall, ctx: steps_mod.Context) -> list[ev.AnyEvent]:
        return []

    return _patched((steps_mod.DeclareStall, "before", before))


def kills_before_pending_commit() -> AbstractContextManager[None]:
    """An object pending past its deadline is stopped without the expiry (and the stop)
    committed first: its end reads as the stop the backend shows, not as the deadline's cause."""

    def before(self: steps_mod.ExpirePending, ctx: steps_mod.Context) -> list[ev.AnyEvent]:
        return []

    return _patched((steps_mod.ExpirePending, "before", before))


@attrs.frozen
class Mutant:
    """One reverted protection: its name, what it reverts, and how."""

    name: str
    reverts: str
    patch: Callable[[], AbstractContextManager[None]]


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "no-revision-check", "decisions conditional on the revision read", no_revision_check
        ),
        Mutant("no-fencing", "decisions conditional on the owner's lease token", no_fencing),
        Mutant(
            "refused-never-retried",
            "a holder refused a job tries to own it again",
            refused_never_retried,
        ),
        Mutant(
            "open-before-canonical",
            "open only after the canonical commit",
            open_before_canonical,
        ),
        Mutant(
            "open-next-before-stopped",
            "open n+1 only once n is ended or verified stopped",
            open_next_before_stopped,
        ),
        Mutant(
            "call-before-commit",
            "a batch's calls only once its decisions' commit returned",
            call_before_commit,
        ),
        Mutant(
            "budget-after-start",
            "the budget reserved with the authorization, before Start",
            budget_after_start,
        ),
        Mutant("trigger-ignored", "one trigger authorizes at most one recovery", trigger_ignored),
        Mutant("outcome-overwritten", "a committed outcome is final", outcome_overwritten),
        Mutant("cancel-not-first", "cancel commits before it stops anything", cancel_not_first),
        Mutant(
            "open-ignores-deadline",
            "an open call is refused past the deadline its decision recorded",
            open_ignores_deadline,
        ),
        Mutant(
            "no-absence-grace",
            "an object is judged stopped only after absence across a grace period",
            no_absence_grace,
        ),
        Mutant(
            "declares-while-blind",
            "no stall is declared while progress cannot be read",
            declares_while_blind,
        ),
        Mutant(
            "stall-from-record-only",
            "a stall is judged on the poll's fresh reading, not only on the bounded record",
            stall_from_record_only,
        ),
        Mutant(
            "charges-on-advance",
            "a no-advance rule is charged only when training did not advance",
            charges_on_advance,
        ),
        Mutant(
            "kills-before-stall-commit",
            "a stall and its stop are committed before the run is stopped",
            kills_before_stall_commit,
        ),
        Mutant(
            "kills-before-pending-commit",
            "a pending deadline's expiry and its stop are committed before the object is stopped",
            kills_before_pending_commit,
        ),
    )
}


@contextmanager
def active(name: str | None) -> Iterator[None]:
    """Run the block under mutant ``name`` (the real code when None)."""
    if name is None:
        yield
        return
    try:
        mutant = MUTANTS[name]
    except KeyError:
        known = ", ".join(MUTANTS)
        msg = f"no mutant {name!r}; known: {known}"
        raise ValueError(msg) from None
    with mutant.patch():
        yield
