"""A cluster: an adapter's backend composed with the core and, where there is one, a record store.

``compose`` and ``open`` return a :class:`Cluster` with three faces:

* the **observer** reads jobs (with a store: at the job level; without: object by object);
* the **operator** acts on jobs, each action naming its actor and recorded; it needs a store
  and a cluster that is not read-only;
* the **stopper** is the emergency stop, which needs no record and exists unless read-only.

Operator actions commit an intent conditionally on the revision they read (retrying on
Conflict); the supervisor turns intents into steps. Cancel is the exception that proves the
rule: its commit is the outcome, and it also stops what is live at once, because a person who
cancels wants the cluster's resources back now.
"""

from __future__ import annotations

import secrets  # sim: allowed (only the default of random_job_id; the simulator injects new_id)
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict, Unpack, overload

import attrs

from jobdispatch import plugins
from jobdispatch.clock import Clock, system_clock
from jobdispatch.config import validate_config
from jobdispatch.errors import Conflict, Invalid, NotFound, ReadOnly, Unreadable, Unsupported
from jobdispatch.job import Job, Transition, fold
from jobdispatch.plan import make_plan
from jobdispatch.records import events as ev
from jobdispatch.records.store import ListFilter, Records
from jobdispatch.spi import Backend, Discovery, ObjectRef, Requeuer, StopReport, find_all
from jobdispatch.status import Status, project, project_objects
from jobdispatch.types import (
    Actor,
    Capability,
    Enforcer,
    JobID,
    JobSpec,
    ObjectState,
    Plan,
    State,
    Support,
    UnmatchedPolicy,
)

__all__ = [
    "CancelReceipt",
    "Cluster",
    "Filter",
    "Listing",
    "Observer",
    "Operator",
    "StopReceipt",
    "Stopper",
    "adapters",
    "compose",
    "new_backend",
    "open",
    "watch",
]

#: How often an operator retries an intent whose commit lost a race.
_CAS_TRIES = 20
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


def random_job_id(rand: Callable[[int], bytes] = secrets.token_bytes) -> JobID:
    """A new job id: 12 characters of lower-case base32, valid in every backend's names."""
    raw = int.from_bytes(rand(8), "big")
    return "".join(_ALPHABET[(raw >> (5 * i)) & 31] for i in range(12))


@attrs.frozen(kw_only=True)
class Filter:
    """Which jobs ``Observer.list`` returns: any of ``states`` (all when empty); records that
    have settled only when ``settled`` is True."""

    states: Collection[State] = ()
    settled: bool = False


@attrs.frozen(kw_only=True)
class CancelReceipt:
    """A cancel's two halves, reported apart: the commit, which is final, and clean-up, which
    may lag behind it."""

    job: JobID
    committed: bool
    #: The terminal state an earlier outcome left, when the cancel could not change it.
    already: State | None = None
    cleanup_complete: bool = False
    live: tuple[ObjectRef, ...] = ()
    #: Nodes that were down or not answering, so processes may live on there.
    cessation_unproven: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class StopReceipt:
    """The emergency stop's report. Nothing was recorded: a supervisor may still recover the job."""

    job: JobID
    report: StopReport
    note: str = (
        "not recorded: recovery may still occur (a supervisor may start it again); cancel to end it"
    )


@attrs.frozen
class Listing(Sequence[Status]):
    """What :meth:`Observer.list` answers: a sequence of the statuses of the jobs it could read,
    in creation order, and apart, one :class:`~jobdispatch.errors.Unreadable` per job it could
    not (each naming the job and what is wrong). A caller that only iterates sees the readable
    jobs; one that must not miss a job checks ``unreadable``."""

    statuses: tuple[Status, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()

    @overload
    def __getitem__(self, index: int) -> Status: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Status]: ...

    def __getitem__(self, index: int | slice) -> Status | Sequence[Status]:
        return self.statuses[index]

    def __len__(self) -> int:
        return len(self.statuses)

    def __iter__(self) -> Iterator[Status]:
        return iter(self.statuses)


class Observer:
    """Reads jobs. With a store, statuses are at the job level; without, object by object."""

    def __init__(self, backend: Backend, store: Records | None, clock: Clock) -> None:
        self._backend = backend
        self._store = store
        self._clock = clock

    def capabilities(self, spec: JobSpec | None = None) -> Mapping[Capability, Support]:
        """What this cluster supports (for ``spec`` when given)."""
        return self._backend.capabilities(spec)

    def get(self, job: JobID, discovery: Discovery | None = None) -> Status:
        """The job's status now. NotFound for a job the store does not know.

        With ``discovery`` (what a supervisor's own poll showed of the job), the backend is
        not asked again: a command reporting on the jobs its supervisor serves costs the
        scheduler nothing beyond the supervisor's batched query."""
        if self._store is None:
            return project_objects(job, discovery or self._backend.find(job))
        view = self._store.read(job)
        if discovery is None:
            discovery = self._backend.find(job)
        now = self._clock()
        return project(_fold_stored(job, view, now), discovery, now)

    def list(self, filter: Filter | None = None) -> Listing:
        """Every job the filter selects, with one backend query for all of them where the
        adapter can (``MultiFinder``).

        A record that cannot be read (damaged, written by a newer version, or not folding)
        does not hide the others: it is left out of the statuses and reported in
        ``unreadable``, whatever the filter's states (its state is what cannot be known)."""
        filter = filter or Filter()
        if self._store is None:
            msg = "listing jobs needs a record store; without one, get a job by its id"
            raise ReadOnly(msg)
        jobs = list(self._store.list(ListFilter(settled=None if filter.settled else False)))
        now = self._clock()
        folded: dict[JobID, Job] = {}
        unreadable: list[Unreadable] = []
        for job in jobs:
            try:
                folded[job] = _fold_stored(job, self._store.read(job), now)
            except NotFound:
                continue  # listed, then gone: a store that forgets is not ours to report on
            except Unreadable as exc:
                unreadable.append(exc)
        active = [j for j, folded_job in folded.items() if not folded_job.settled]
        found = find_all(self._backend, active) if active else {}
        wanted = set(filter.states)
        out = []
        for job, folded_job in folded.items():
            status = project(folded_job, found.get(job, Discovery(job=job)), now)
            if not wanted or status.state in wanted:
                out.append(status)
        return Listing(statuses=tuple(out), unreadable=tuple(unreadable))


def _fold_stored(job: JobID, view: ev.View, now: datetime) -> Job:
    """``fold`` of a record read from the store. A history the protocol cannot have written
    is stored data this version cannot read, as a damaged value is (Unreadable, naming the
    job): the reader gave no bad input, so ``get`` and ``list`` report it alike."""
    try:
        return fold(view, now)
    except Unreadable:
        raise
    except Invalid as exc:
        msg = f"record {job} does not fold: {exc.message}"
        raise Unreadable(msg, job=job) from exc


#: The per-job settings a submit uses unless told otherwise: ``ev.Options``' own defaults.
_DEFAULTS = ev.Options()


class OptionFields(TypedDict, total=False):
    """The fields of :class:`~jobdispatch.records.events.Options`, for naming one of them as a
    keyword of ``submit`` or ``supersede`` (``supervised=True``); the defaults stay in
    ``Options`` alone."""

    supervised: bool
    submit_retries: int
    unresolved_age: timedelta
    cleanup_deadline: timedelta
    unmatched: UnmatchedPolicy


class Operator:
    """Acts on jobs. Every action names its actor and is recorded in the job's record."""

    def __init__(
        self, backend: Backend, store: Records, clock: Clock, new_id: Callable[[], JobID]
    ) -> None:
        self._backend = backend
        self._store = store
        self._clock = clock
        self._new_id = new_id

    # ---------------------------------------------------------------- submit

    def submit(
        self,
        spec: JobSpec,
        *,
        by: Actor,
        options: ev.Options = _DEFAULTS,
        idempotency_key: str = "",
        accept_unenforced: Collection[int] = (),
        accept_unverified: Mapping[int, Enforcer] | None = None,
        supersedes: JobID = "",
        **overrides: Unpack[OptionFields],
    ) -> Plan:
        """Record a new job and return its plan; a supervisor launches it.

        The job's settings are ``options`` (:class:`~jobdispatch.records.events.Options`, which
        holds their defaults), with any of its fields given by name (``supervised=True``)
        replacing the carrier's. With an ``idempotency_key`` seen before, the existing job's
        plan is returned and nothing new is created, so a client may retry a submit whose reply
        it lost.
        """
        header = self._header(
            spec,
            by=by,
            options=attrs.evolve(options, **overrides) if overrides else options,
            idempotency_key=idempotency_key,
            accept_unenforced=accept_unenforced,
            accept_unverified=accept_unverified,
            supersedes=supersedes,
        )
        return self._create(header)

    def _create(self, header: ev.Header) -> Plan:
        created = self._store.create(header, (), idempotency_key=header.idempotency_key)
        if not created.created:
            return self._store.read(created.job).header.plan
        return header.plan

    def _header(
        self,
        spec: JobSpec,
        *,
        by: Actor,
        options: ev.Options,
        idempotency_key: str = "",
        accept_unenforced: Collection[int] = (),
        accept_unverified: Mapping[int, Enforcer] | None = None,
        supersedes: JobID = "",
    ) -> ev.Header:
        """Everything a new record starts with, validated and planned; nothing is written."""
        if options.submit_retries < 0:
            raise Invalid(f"submit_retries must not be negative, got {options.submit_retries}")
        for name, value in (
            ("unresolved_age", options.unresolved_age),
            ("cleanup_deadline", options.cleanup_deadline),
        ):
            if value <= timedelta(0):
                raise Invalid(f"{name} must be positive, got {value}")
        job = self._new_id()
        plan = make_plan(
            self._backend,
            job,
            spec,
            supervised=options.supervised,
            accept_unverified=accept_unverified,
            accept_unenforced=accept_unenforced,
            unmatched=options.unmatched,
        )
        return ev.Header(
            job=job,
            spec=spec,
            plan=plan,
            options=options,
            idempotency_key=idempotency_key,
            supersedes=supersedes,
            created_by=by,
            created_at=self._clock(),
        )

    # ---------------------------------------------------------------- intents

    def _commit(self, job: JobID, make: Callable[[Job], ev.AnyEvent | None]) -> tuple[bool, Job]:
        """Fold, build the intent from the job, commit it at that revision; retry on Conflict.

        ``make`` returns None when there is nothing to commit. Returns (committed, job).
        """
        for _ in range(_CAS_TRIES):
            view = self._store.read(job)
            folded = _fold_stored(job, view, self._clock())
            event = make(folded)
            if event is None:
                return False, folded
            try:
                self._store.append(job, [event], expect_revision=view.revision)
            except Conflict:
                continue
            return True, folded
        msg = f"job {job}: the record kept moving; {_CAS_TRIES} tries lost the race"
        raise Conflict(msg)

    def cancel(self, job: JobID, *, by: Actor, reason: str = "") -> CancelReceipt:
        """Commit the cancel (the outcome ``cancelled``), then stop everything live at once."""
        return self._cancel(job, by=by, reason=reason)

    def _cancel(
        self, job: JobID, *, by: Actor, reason: str, superseded_by: JobID = ""
    ) -> CancelReceipt:
        committed, folded = self._commit(
            job,
            lambda j: (
                None
                if j.terminal
                else ev.CancelRequested(
                    at=self._clock(), by=by, reason=reason, superseded_by=superseded_by
                )
            ),
        )
        # Not committed means the job was terminal already: its outcome is set.
        already = folded.outcome.state if not committed and folded.outcome else None
        known = [o.ref for o in folded.objects.values() if not o.done]
        report = _stop_all(
            self._backend, job, f"cancelled by {by}: {reason}".rstrip(": "), known=known
        )
        return CancelReceipt(
            job=job,
            committed=committed,
            already=already,
            cleanup_complete=not report.live,
            live=report.live,
            cessation_unproven=report.unproven_nodes,
        )

    def hold(
        self, job: JobID, *, by: Actor, reason: str = "", until: datetime | None = None
    ) -> None:
        """Hold the job: nothing new is opened until released (or ``until``)."""
        if until is not None and until <= self._clock():
            raise Invalid(f"hold until {until.isoformat()} is not in the future")

        def make(j: Job) -> ev.AnyEvent | None:
            _live(j, job, "hold")
            if j.active_hold is not None:
                return None
            return ev.HoldRequested(at=self._clock(), by=by, reason=reason, until=until)

        self._commit(job, make)

    def release(self, job: JobID, *, by: Actor, reason: str = "") -> None:
        """Release the hold in force; a recovery hold released resumes the job."""

        def make(j: Job) -> ev.AnyEvent | None:
            _live(j, job, "release")
            if j.active_hold is None:
                raise Invalid(f"job {job} is not held")
            return ev.ReleaseRequested(at=self._clock(), by=by, reason=reason)

        self._commit(job, make)

    def resubmit(self, job: JobID, *, by: Actor, reason: str = "") -> None:
        """Ask for a new submission of the same job (the current one is stopped first)."""

        def make(j: Job) -> ev.AnyEvent:
            _live(j, job, "resubmit")
            return ev.ResubmitRequested(at=self._clock(), by=by, reason=reason)

        self._commit(job, make)

    def give_up(self, job: JobID, *, by: Actor, reason: str = "") -> None:
        """Stop recovering: the job fails with the cause of its last execution."""

        def make(j: Job) -> ev.AnyEvent:
            _live(j, job, "give up")
            return ev.GiveUpRequested(at=self._clock(), by=by, reason=reason)

        self._commit(job, make)

    def abandon(
        self, job: JobID, submission: int, attempt: int, *, by: Actor, reason: str = ""
    ) -> None:
        """Close an attempt whose outcome stayed unknown (the manual unmatched policy)."""

        def make(j: Job) -> ev.AnyEvent:
            sub = j.submission(submission)
            if sub is None or sub.attempt(attempt) is None:
                raise NotFound(f"job {job} has no attempt {submission}.{attempt}")
            if j.settled:
                # A settled record takes evidence only; it needs nothing more from anyone.
                raise Invalid(f"cannot abandon an attempt of job {job}: it has settled")
            return ev.AbandonRequested(
                at=self._clock(), by=by, submission=submission, attempt=attempt, reason=reason
            )

        self._commit(job, make)

    def requeue(self, job: JobID, *, by: Actor, reason: str = "") -> None:
        """Ask the scheduler to rerun the running object in place."""
        if not isinstance(self._backend, Requeuer):
            msg = f"adapter {self._backend.name!r} cannot requeue (it is not a Requeuer)"
            raise Unsupported(msg)

        def make(j: Job) -> ev.AnyEvent:
            _live(j, job, "requeue")
            return ev.RequeueRequested(at=self._clock(), by=by, reason=reason)

        self._commit(job, make)

    def supersede(
        self,
        job: JobID,
        *,
        by: Actor,
        reason: str = "",
        spec: JobSpec | None = None,
        options: ev.Options | None = None,
        accept_unenforced: Collection[int] = (),
        accept_unverified: Mapping[int, Enforcer] | None = None,
        **overrides: Unpack[OptionFields],
    ) -> Plan:
        """Replace the job by a new one (its spec, or ``spec``).

        The new job is validated and planned first, so a spec the cluster refuses changes
        nothing; then the old job is cancelled (naming its successor), so the two never run
        together; then the new record is created, naming the job it supersedes.
        """
        old = self._store.read(job).header
        # The new job keeps the old one's supervision unless told otherwise; the rest of its
        # settings are the carrier's (the defaults when none is given).
        base = options if options is not None else ev.Options(supervised=old.options.supervised)
        header = self._header(
            spec or old.spec,
            by=by,
            options=attrs.evolve(base, **overrides) if overrides else base,
            accept_unenforced=accept_unenforced,
            accept_unverified=accept_unverified,
            supersedes=job,
        )
        self._cancel(
            job, by=by, reason=reason or f"superseded by {header.job}", superseded_by=header.job
        )
        return self._create(header)


def _live(folded: Job, job: JobID, what: str) -> None:
    if folded.outcome is not None:  # terminal
        msg = f"cannot {what} job {job}: it is {folded.outcome.state} already"
        raise Invalid(msg)


def _stop_all(
    backend: Backend, job: JobID, reason: str, known: Sequence[ObjectRef] = ()
) -> StopReport:
    discovery = backend.find(job)
    stopped, live = [], []
    for obs in discovery.objects:
        if obs.state is ObjectState.ENDED:
            continue
        backend.stop(obs.ref, reason)
        stopped.append(obs.ref)
    # What the record knows is stopped too, even when a lagging Find does not show it: an open
    # decided before the cancel may still be on its way to the backend.
    shown = {obs.ref for obs in discovery.objects}
    for ref in known:
        if ref not in shown:
            backend.stop(ref, reason)
            stopped.append(ref)
    after = backend.find(job)
    for obs in after.objects:
        if obs.state is not ObjectState.ENDED and obs.ref in stopped:
            live.append(obs.ref)
    return StopReport(stopped=tuple(stopped), live=tuple(live))


class Stopper:
    """The emergency stop: stops what the backend shows under the job's name, with no record."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def emergency_stop(self, job: JobID, *, by: Actor, reason: str = "") -> StopReceipt:
        """Stop every object of ``job`` now. Not recorded: recovery may still occur."""
        report = _stop_all(self._backend, job, f"emergency stop by {by}: {reason}".rstrip(": "))
        return StopReceipt(job=job, report=report)


class Cluster:
    """An adapter's backend composed with the core."""

    def __init__(
        self,
        backend: Backend,
        store: Records | None,
        *,
        read_only: bool,
        clock: Clock,
        new_id: Callable[[], JobID],
    ) -> None:
        self.backend = backend
        self.store = store
        self.read_only = read_only
        self.observer = Observer(backend, store, clock)
        self._operator = (
            Operator(backend, store, clock, new_id) if store is not None and not read_only else None
        )
        self._stopper = None if read_only else Stopper(backend)

    @property
    def operator(self) -> Operator:
        """The operator; ReadOnly when the cluster is read-only or has no record store."""
        if self._operator is None:
            why = "read-only" if self.read_only else "opened without a record store"
            msg = f"this cluster is {why}: there is no operator"
            raise ReadOnly(msg)
        return self._operator

    @property
    def stopper(self) -> Stopper:
        """The emergency stop; ReadOnly when the cluster is read-only."""
        if self._stopper is None:
            msg = "this cluster is read-only: there is no stopper"
            raise ReadOnly(msg)
        return self._stopper

    def close(self) -> None:
        self.backend.close()


def compose(
    backend: Backend,
    *,
    store: Records | None = None,
    read_only: bool = False,
    clock: Clock = system_clock,
    new_id: Callable[[], JobID] = random_job_id,
) -> Cluster:
    """A cluster over a backend built already (tests, hosts that construct their adapter)."""
    return Cluster(backend, store, read_only=read_only, clock=clock, new_id=new_id)


def adapters() -> list[str]:
    """The registered adapter names, sorted."""
    return plugins.default().registry("adapter").names()


def new_backend(
    name: str, config: Mapping[str, Any] | None = None, *, token: Callable[[], str] | None = None
) -> Backend:
    """Build the named adapter's backend after validating ``config`` against its schema.

    ``token`` is handed to the adapter as is; adapters call it on every use and never cache it.
    """
    entry = plugins.default().registry("adapter").get(name)
    config = dict(config or {})
    validate_config(config, entry.schema, subject=f"adapter {name!r} configuration")
    backend: Backend = entry.factory(config, token)
    return backend


def open(
    name: str,
    config: Mapping[str, Any] | None = None,
    *,
    store: Records | None = None,
    read_only: bool = False,
    token: Callable[[], str] | None = None,
    clock: Clock = system_clock,
) -> Cluster:
    """Build the named adapter and compose the core over it and ``store``."""
    return compose(
        new_backend(name, config, token=token), store=store, read_only=read_only, clock=clock
    )


def watch(
    observer: Observer,
    job: JobID,
    every: float = 1.0,
    *,
    stop: threading.Event | None = None,
    sleep: Callable[[float], Any] = time.sleep,
) -> Iterator[Transition]:
    """Yield each committed transition of the job as it happens, until ``stop`` is set or the
    job settles. Without a store a job is never terminal, so only ``stop`` ends the watch."""
    seen = 0
    while stop is None or not stop.is_set():
        status = observer.get(job)
        yield from status.history[seen:]
        seen = len(status.history)
        if status.settled:
            return
        sleep(every)


_ = Sequence  # typing only
