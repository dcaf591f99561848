"""The record store interface every store implements, and its small value types.

A store keeps one append-only record per job and hands out per-job ownership leases. Its
promises, which the conformance suite in ``jobdispatch_conformance.records`` checks for every
store:

* ``create`` is idempotent on its key: the same key returns the existing job, never a second.
* ``append`` is conditional: it commits only if the record is still at ``expect_revision``;
  decision events also need the owner's current, unexpired lease, and carry its token.
* Lease tokens strictly increase per job, so a holder whose lease expired or was taken is
  fenced off: its decisions are refused even if it does not know it lost the lease.
* The batch forms (``append_many``, ``acquire_many``, ``renew_many``, ``release_many``) keep
  each job's promise exactly as the single forms do and answer per job, in request order: one
  job's refusal never affects another's part, each job's part is applied whole or not at all,
  and everything a batch answered as applied is durable when it returns. They exist so a
  supervisor of thousands of jobs pays one durable commit (one sync) per batch, not per job.
* ``read_many`` reads many records at once (one read transaction, one round trip to a server)
  and answers per job the same way: one record's NotFound or Unreadable never hides another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import attrs

from jobdispatch.errors import Conflict, DispatchError, Invalid, NotFound, Unreadable
from jobdispatch.records.events import AnyEvent, Header, View
from jobdispatch.types import JobID

#: Why a store refused one job's part of a batch: the conflict a single call would have raised
#: (RevisionMoved, LeaseLost, LeaseHeld), or NotFound for a job it has no record of. Answered,
#: not raised, so that the other jobs of the batch still get theirs.
Refusal = Conflict | NotFound

#: What ``read_many`` answers for one job: its View, or the error ``read`` would have raised
#: for it (NotFound, Unreadable; a store that can fail job by job, as the simulator's does,
#: may answer Unavailable for one job and read the others).
ReadAnswer = View | DispatchError


#: Records read per ``read_many`` by a reader of many (:func:`read_in_batches`): one read
#: transaction (one round trip to a server) each, and a bounded number of views held at once.
READ_BATCH = 500


def read_in_batches(
    store: Records, jobs: Iterable[JobID], batch: int = READ_BATCH
) -> Iterator[tuple[JobID, ReadAnswer]]:
    """Each job with its ``read_many`` answer, in order, read ``batch`` jobs at a time: what a
    reader of many records uses instead of ``read`` per job, which costs a read transaction
    (a round trip, for a server) per record. Each batch's views are of one moment."""
    pending: list[JobID] = []
    for job in jobs:
        pending.append(job)
        if len(pending) == batch:
            yield from zip(pending, store.read_many(pending), strict=True)
            pending = []
    if pending:
        yield from zip(pending, store.read_many(pending), strict=True)


def read_each(
    read: Callable[[JobID], View],
    jobs: Iterable[JobID],
    answered: tuple[type[DispatchError], ...] = (NotFound, Unreadable),
) -> tuple[ReadAnswer, ...]:
    """``read_many`` for a store that reads one job at a time: ``read`` of each job in order,
    an error of a kind in ``answered`` becoming that job's answer and any other raised. The
    memory store answers NotFound and Unreadable; the simulator's store Unavailable too, since
    each of its reads draws its own fault. The caller checks the batch first
    (``rules.read_batch``)."""
    answers: list[ReadAnswer] = []
    for job in jobs:
        try:
            answers.append(read(job))
        except answered as exc:
            answers.append(exc)
    return tuple(answers)


@attrs.frozen
class Lease:
    """Ownership of one job: who holds it, the fencing token, and when it lapses."""

    job: JobID
    holder: str
    token: int
    expires: datetime


@attrs.frozen(kw_only=True)
class ListFilter:
    """Which records ``list`` streams. ``settled=None`` streams every record."""

    settled: bool | None = None


def _as_tuple(events: Iterable[AnyEvent]) -> tuple[AnyEvent, ...]:
    return tuple(events)


@attrs.frozen(kw_only=True)
class AppendRequest:
    """One job's part of :meth:`Records.append_many`: the arguments of one ``append``.

    ``events`` is taken as a tuple whatever iterable it is given as, so a generator is read
    once, here, and never found empty by a store that looks at it twice."""

    job: JobID
    events: tuple[AnyEvent, ...] = attrs.field(converter=_as_tuple)
    expect_revision: int
    owner: Lease | None = None


@attrs.frozen(kw_only=True)
class Created:
    """What ``create`` answers: the job, and whether this call created it (False when the
    idempotency key named an existing job)."""

    job: JobID
    created: bool


@runtime_checkable
class Records(Protocol):
    """A record store. Every method may raise :class:`~jobdispatch.Unavailable` when the store
    cannot answer; none ever half-applies a write."""

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> Created:
        """Create the job's record; with a key seen before, return that job instead."""
        ...

    def read(self, job: JobID) -> View:
        """The whole record; NotFound for an unknown job, Unreadable (naming the job and the
        revision) for one it cannot read: damaged, or written by a newer version. That is one
        record's problem: every other record stays readable."""
        ...

    def read_many(self, jobs: Sequence[JobID]) -> tuple[ReadAnswer, ...]:
        """``read`` of every job, answered in order: each job's View, or the error ``read``
        would have raised for it (:data:`ReadAnswer`). One read transaction where the store
        has them, so the views are of one moment; a job may appear more than once. Invalid for
        the whole batch, before anything is read, when an id is malformed; Unavailable when
        the store cannot answer at all. A supervisor reads every job it owns with one call
        per poll instead of one per job."""
        ...

    def append(
        self,
        job: JobID,
        events: Sequence[AnyEvent],
        *,
        expect_revision: int,
        owner: Lease | None = None,
    ) -> int:
        """Commit ``events`` if the record is at ``expect_revision``; returns the new revision.

        Raises Conflict when the revision moved, or when a decision is appended without the
        job's current lease. Decisions are stored with the lease's token.
        """
        ...

    def list(self, filter: ListFilter | None = None) -> Iterator[JobID]:
        """Stream the jobs the filter selects, in creation order. It never decodes a record,
        so one that cannot be read is streamed like any other (and hides none)."""
        ...

    def acquire(self, job: JobID, holder: str, ttl: timedelta) -> Lease:
        """Take ownership of ``job``: Conflict while another holder's lease is unexpired.

        Re-acquiring one's own live lease renews it under the same token; every other
        acquisition hands out a token greater than any before it for this job.
        """
        ...

    def renew(self, lease: Lease, ttl: timedelta) -> Lease:
        """Extend a lease that is still current; Conflict once it expired or was taken."""
        ...

    def release(self, lease: Lease) -> None:
        """Give ownership up; a lease no longer current is ignored."""
        ...

    def append_many(self, requests: Sequence[AppendRequest]) -> tuple[int | Refusal, ...]:
        """Every request's conditional append, in one durable commit: answered in request
        order with the job's new revision, or the :data:`Refusal` that ``append`` would have
        raised for it. Invalid for the whole batch, before anything is written, when a request
        is malformed (not an AppendRequest, an unknown event type, a value the store cannot
        encode: checked for every part before any part is refused for its lease) or a job
        appears twice. Unavailable means no answer: each part may or may not have been
        applied, but each whole or not at all."""
        ...

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[Lease | Refusal, ...]:
        """``acquire`` for every job, in one durable commit, answered in order."""
        ...

    def renew_many(self, leases: Sequence[Lease], ttl: timedelta) -> tuple[Lease | Refusal, ...]:
        """``renew`` for every lease, in one durable commit, answered in order."""
        ...

    def release_many(self, leases: Sequence[Lease]) -> None:
        """``release`` for every lease, in one durable commit; stale leases are ignored.
        NotFound, releasing nothing, when a lease names a job the store has no record of
        (such a lease cannot be one it handed out)."""
        ...

    def announce(
        self, member: str, ttl: timedelta, measured: Measured | None = None
    ) -> tuple[str, ...]:
        """Say that ``member`` (a supervisor's holder name) is alive until ``ttl`` from now,
        by the store's clock, and answer every member alive now, itself included, sorted by
        name. Supervisors count these to take only their fair share of the jobs (spec 0004
        D7); a member that stops announcing drops out when its ttl runs out. ``measured`` is
        what the member measured of its latest poll, kept beside its announcement (replacing
        the previous one; None: nothing measured) for a reader of the whole store
        (:class:`Survey`). Invalid for an empty name, a ttl that is not positive, or a
        measurement that is not a finite number of seconds at least 0."""
        ...

    def withdraw(self, member: str) -> None:
        """Drop ``member`` from the members at once (a supervisor that stops); an unknown
        member is ignored."""
        ...

    def close(self) -> None:
        """Release files and handles."""
        ...


def _seconds(_: object, attribute: attrs.Attribute[float | None], value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e9:
        msg = f"a member's {attribute.name} must be a number of seconds >= 0, got {value!r}"
        raise Invalid(msg)


@attrs.frozen(kw_only=True)
class Measured:
    """What a supervisor measured of its latest poll, published with its announcement in the
    shared members list (not kept per process), so that any reader of the store (the metrics
    endpoint) sees every supervisor's figures, whichever process it runs in. None: not
    measured yet (a supervisor's first poll; no commit yet), never 0.

    ``poll_seconds``: how long its latest complete poll took, wall time. ``commit_seconds``:
    the longest durable commit (one ``append_many``) of the latest poll that committed."""

    poll_seconds: float | None = attrs.field(default=None, validator=_seconds)
    commit_seconds: float | None = attrs.field(default=None, validator=_seconds)


@attrs.frozen(kw_only=True)
class Survey:
    """What a store shows of itself at one moment, read without changing anything: for a
    reader that watches the whole store (the metrics endpoint), not for a supervisor.

    ``revisions`` lets such a reader fold again only the records that grew since it last
    looked, without fetching any record; ``members`` and ``leases`` are the supervisors'
    side of the store (spec 0004 D7), as of ``now`` by the store's clock."""

    #: The store's clock when it was read (the database's, for a shared store).
    now: datetime
    #: Every job's revision, in creation order.
    revisions: Mapping[JobID, int]
    #: Every member still in the membership table and when its announcement lapses; one past
    #: its expiry has stopped announcing and is not pruned yet (a member prunes on announcing).
    members: Mapping[str, datetime]
    #: How many unexpired leases each holder has.
    leases: Mapping[str, int]
    #: What each member of ``members`` published with its latest announcement; a member that
    #: published nothing is absent.
    measured: Mapping[str, Measured] = attrs.field(factory=dict)
    #: The room the store takes, in bytes; None when it cannot tell.
    size_bytes: int | None = None


@runtime_checkable
class Surveyed(Protocol):
    """A store that can answer :meth:`survey`: the LMDB and PostgreSQL stores do. Not part
    of :class:`Records`: a store without it still stores and leases, it just cannot be
    watched cheaply."""

    def survey(self) -> Survey:
        """The store as it is now (:class:`Survey`), from one read transaction; Unavailable
        when it cannot answer."""
        ...


@runtime_checkable
class Revisions(Protocol):
    """A store that can tell records' current revisions without reading their events: the
    memory, LMDB and PostgreSQL stores do. Not part of :class:`Records`: it lets a reader that
    keeps something derived from records (the CLI's cache of settled jobs' figures) tell which
    it can use again, and a store without it simply gets no such cache."""

    def revisions(self, jobs: Sequence[JobID]) -> tuple[int | None, ...]:
        """Each job's current revision, in order (None: no record of that job), from one read
        transaction (one round trip to a server) and without decoding any event; Invalid for
        a batch ``read_many`` would refuse, Unavailable when the store cannot answer."""
        ...
