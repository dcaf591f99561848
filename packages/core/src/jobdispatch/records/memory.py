"""The in-memory record store: for tests, the tutorial and the simulator.

It keeps the records of one process, lost when the process ends, and implements every promise
of :class:`~jobdispatch.records.store.Records` that does not concern durability: the idempotent
create, the conditional append, fencing by lease tokens, and ``list`` in creation order. The
conformance suite (``jobdispatch_conformance.records``) holds it to the same tests as the durable
LMDB store, so code proven against this store behaves the same on disk.

Events are kept as the (frozen) objects they were given, not as bytes. By default every create
and append still encodes what it is given (without decoding it back), so this store refuses
exactly what a durable store would refuse to write (a naive datetime, a value the codec cannot
carry) instead of accepting a record no disk could hold. ``validate=False`` skips that for
callers that only ever append events they built themselves and want the speed (the simulator).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

import attrs

from jobdispatch import codec
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import Conflict, Invalid, NotFound, Unreadable
from jobdispatch.records.events import EVENT_TYPES, SCHEMA_VERSION, AnyEvent, Header, Settled, View
from jobdispatch.records.store import Created, Lease, ListFilter
from jobdispatch.types import JobID

__all__ = ["MemoryRecords"]

_KNOWN_TYPES = frozenset(EVENT_TYPES.values())

#: The token stored on decisions committed by ``create``: nobody can own a job before it
#: exists, and leases hand out tokens from 1, so 0 reads as "written by the creator".
CREATOR_TOKEN = 0


def _check_events(job: str, events: Sequence[AnyEvent]) -> None:
    for i, event in enumerate(events):
        if type(event) not in _KNOWN_TYPES:
            msg = (
                f"record {job}: event {i} of the batch is a {type(event).__name__}, "
                "not one of the record's event types"
            )
            raise Invalid(msg)


def _stamp(events: Sequence[AnyEvent], token: int | None) -> list[AnyEvent]:
    """Decisions carry ``token``; controls and evidence carry none, whatever they were given,
    so a stored token always means "committed under this lease"."""
    out: list[AnyEvent] = []
    for event in events:
        want = token if event.decision else None
        out.append(event if event.token == want else attrs.evolve(event, token=want))
    return out


def _effective_key(header: Header, idempotency_key: str) -> str:
    if idempotency_key and header.idempotency_key and idempotency_key != header.idempotency_key:
        msg = (
            f"record {header.job}: idempotency key {idempotency_key!r} differs from the "
            f"header's {header.idempotency_key!r}"
        )
        raise Invalid(msg)
    return idempotency_key or header.idempotency_key


def _check_header(header: Header) -> None:
    if not isinstance(header.job, str) or not header.job:
        msg = f"a record needs a non-empty job id, got {header.job!r}"
        raise Invalid(msg)
    if header.schema != SCHEMA_VERSION:
        msg = (
            f"record {header.job}: header schema {header.schema} cannot be written by this "
            f"version (it writes schema {SCHEMA_VERSION})"
        )
        raise Invalid(msg)


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= timedelta(0):
        msg = f"a lease needs a positive ttl, got {ttl}"
        raise Invalid(msg)


@attrs.define
class _Record:
    header: Header
    events: list[AnyEvent]
    settled: bool
    lease: Lease | None = None
    #: The last token handed out for this job; survives release so tokens only ever grow.
    token: int = 0
    #: The View last read, handed out again until the next append: it is immutable, so every
    #: reader of one revision may share it (and a reader may tell an unchanged record by it).
    view: View | None = None
    #: Revisions made unreadable by :meth:`MemoryRecords.damage`, with what is wrong with each.
    damaged: dict[int, str] = attrs.Factory(dict)


class MemoryRecords:
    """Records held in this process. Thread-safe: one lock guards every record.

    Args:
        clock: judges lease expiry; tests and the simulator pass a ManualClock.
        validate: encode every header and event on write, so that what this store accepts a
            durable store could hold (see the module docstring).
    """

    def __init__(self, clock: Clock = system_clock, *, validate: bool = True) -> None:
        self._clock = clock
        self._validate = validate
        self._lock = threading.Lock()
        self._records: dict[JobID, _Record] = {}
        self._keys: dict[str, JobID] = {}
        # Dicts keep insertion order, which is creation order: list() walks _records.

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> Created:
        _check_header(header)
        key = _effective_key(header, idempotency_key)
        if key != header.idempotency_key:
            header = attrs.evolve(header, idempotency_key=key)
        _check_events(header.job, events)
        stamped = _stamp(events, CREATOR_TOKEN)
        if self._validate:
            codec.encode_header(header)
            for event in stamped:
                codec.encode_event(event)
        with self._lock:
            if key and key in self._keys:
                return Created(job=self._keys[key], created=False)
            if header.job in self._records:
                msg = f"record {header.job} exists already, created under another idempotency key"
                raise Conflict(msg)
            settled = any(isinstance(e, Settled) for e in stamped)
            self._records[header.job] = _Record(header, stamped, settled)
            if key:
                self._keys[key] = header.job
            return Created(job=header.job, created=True)

    def read(self, job: JobID) -> View:
        with self._lock:
            record = self._get(job)
            if record.damaged:
                revision = min(record.damaged)
                msg = f"record {job} revision {revision}: {record.damaged[revision]}"
                raise Unreadable(msg, job=job, revision=revision)
            view = record.view
            if view is None:
                view = record.view = View(record.header, tuple(record.events))
            return view

    def append(
        self,
        job: JobID,
        events: Sequence[AnyEvent],
        *,
        expect_revision: int,
        owner: Lease | None = None,
    ) -> int:
        _check_events(job, events)
        decides = any(e.decision for e in events)
        if decides and owner is None:
            msg = f"record {job}: decisions need the job's lease, and none was given"
            raise Conflict(msg)
        stamped = _stamp(events, owner.token if owner is not None else None)
        if self._validate:
            for event in stamped:
                codec.encode_event(event)
        with self._lock:
            record = self._get(job)
            revision = len(record.events)
            if revision != expect_revision:
                msg = f"record {job} is at revision {revision}, not {expect_revision}"
                raise Conflict(msg)
            if decides:
                assert owner is not None
                self._check_owner(job, record, owner)
            record.events.extend(stamped)
            record.view = None
            if not record.settled and any(isinstance(e, Settled) for e in stamped):
                record.settled = True
            return len(record.events)

    def list(self, filter: ListFilter | None = None) -> Iterator[JobID]:
        want = filter.settled if filter is not None else None
        with self._lock:
            # A snapshot: every job created before this call is in it, in creation order.
            if want is None:
                jobs = list(self._records)
            else:
                jobs = [job for job, r in self._records.items() if r.settled is want]
        return iter(jobs)

    def acquire(self, job: JobID, holder: str, ttl: timedelta) -> Lease:
        _check_ttl(ttl)
        if not holder:
            msg = f"job {job}: a lease needs a non-empty holder"
            raise Invalid(msg)
        with self._lock:
            record = self._get(job)
            now = self._clock()
            current = record.lease
            if current is not None and now < current.expires:
                if current.holder != holder:
                    msg = f"job {job} is owned by {current.holder} until {current.expires}"
                    raise Conflict(msg)
                token = current.token
            else:
                record.token += 1
                token = record.token
            record.lease = Lease(job, holder, token, now + ttl)
            return record.lease

    def renew(self, lease: Lease, ttl: timedelta) -> Lease:
        _check_ttl(ttl)
        with self._lock:
            record = self._get(lease.job)
            now = self._clock()
            self._check_owner(lease.job, record, lease, now=now)
            record.lease = Lease(lease.job, lease.holder, lease.token, now + ttl)
            return record.lease

    def release(self, lease: Lease) -> None:
        with self._lock:
            record = self._get(lease.job)
            current = record.lease
            if (
                current is not None
                and current.holder == lease.holder
                and current.token == lease.token
            ):
                record.lease = None

    def close(self) -> None:
        """Nothing to release; the records stay readable until the object is dropped."""

    def damage(
        self, job: JobID, revision: int = 0, reason: str = "damaged (made so by a test)"
    ) -> None:
        """Make one stored value of ``job`` unreadable, as a damaged disk or a newer writer
        makes a durable store's: ``read`` of the job then raises Unreadable naming ``revision``
        (0: the header), and nothing else changes (``list`` still streams it, appends still
        commit). For tests and fault models of what readers do with such a record; a durable
        store's tests damage its bytes instead."""
        with self._lock:
            record = self._get(job)
            if not 0 <= revision <= len(record.events):
                msg = f"record {job} has no revision {revision} (it is at {len(record.events)})"
                raise Invalid(msg)
            record.damaged[revision] = reason

    # ------------------------------------------------------------------------------ helpers

    def _get(self, job: JobID) -> _Record:
        try:
            return self._records[job]
        except KeyError:
            msg = f"no record for job {job!r}"
            raise NotFound(msg) from None

    def _check_owner(
        self, job: JobID, record: _Record, owner: Lease, *, now: datetime | None = None
    ) -> None:
        """Conflict unless ``owner`` is the job's current, unexpired lease."""
        when = self._clock() if now is None else now
        current = record.lease
        if owner.job != job:
            msg = f"record {job}: the lease given is for job {owner.job}"
            raise Conflict(msg)
        if current is None or current.holder != owner.holder or current.token != owner.token:
            who = f"{current.holder} (token {current.token})" if current else "nobody"
            msg = (
                f"job {job}: the lease of {owner.holder} (token {owner.token}) is not current; "
                f"it is held by {who}"
            )
            raise Conflict(msg)
        if not when < current.expires:
            msg = (
                f"job {job}: the lease of {owner.holder} (token {owner.token}) expired at "
                f"{current.expires}"
            )
            raise Conflict(msg)
