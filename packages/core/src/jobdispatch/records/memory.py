"""The in-memory record store: for tests, the tutorial and the simulator.

It keeps the records of one process, lost when the process ends, and implements every promise
of :class:`~jobdispatch.records.store.Records` that does not concern durability: the idempotent
create, the conditional append, fencing by lease tokens, and ``list`` in creation order. The
rules themselves (and their messages) are :mod:`jobdispatch.records.rules`, shared with every
store; this module keeps the state they decide over. The
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
from jobdispatch.records import rules, store
from jobdispatch.records.events import AnyEvent, Header, Settled, View
from jobdispatch.records.singles import SingleCalls
from jobdispatch.types import JobID

__all__ = ["MemoryRecords"]


@attrs.define
class _Record:
    header: Header
    events: list[AnyEvent]
    settled: bool
    lease: store.Lease | None = None
    #: The last token handed out for this job; survives release so tokens only ever grow.
    token: int = 0
    #: The View last read, handed out again until the next append: it is immutable, so every
    #: reader of one revision may share it (and a reader may tell an unchanged record by it).
    view: View | None = None
    #: Revisions made unreadable by :meth:`MemoryRecords.damage`, with what is wrong with each.
    damaged: dict[int, str] = attrs.Factory(dict)


class MemoryRecords(SingleCalls):
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
        self._members: dict[str, datetime] = {}
        #: What each member published with its latest announcement (:class:`Measured`).
        self._measured: dict[str, store.Measured] = {}
        # Dicts keep insertion order, which is creation order: list() walks _records.

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> store.Created:
        rules.check_header(header)
        key = rules.effective_key(header, idempotency_key)
        if key != header.idempotency_key:
            header = attrs.evolve(header, idempotency_key=key)
        rules.check_events(header.job, events)
        stamped = rules.stamp(events, rules.CREATOR_TOKEN)
        if self._validate:
            codec.encode_header(header)
            for event in stamped:
                codec.encode_event(event)
        with self._lock:
            if key and key in self._keys:
                return store.Created(job=self._keys[key], created=False)
            if header.job in self._records:
                raise rules.exists_already(header.job)
            settled = any(isinstance(e, Settled) for e in stamped)
            self._records[header.job] = _Record(header, stamped, settled)
            if key:
                self._keys[key] = header.job
            return store.Created(job=header.job, created=True)

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

    def read_many(self, jobs: Sequence[JobID]) -> tuple[store.ReadAnswer, ...]:
        return store.read_each(self.read, rules.read_batch(jobs))

    def revisions(self, jobs: Sequence[JobID]) -> tuple[int | None, ...]:
        """:class:`~jobdispatch.records.store.Revisions`: each record's length, under the lock."""
        checked = rules.batch(jobs, str, "revisions")
        with self._lock:
            found = [self._records.get(job) for job in checked]
            return tuple(None if r is None else len(r.events) for r in found)

    def append_many(
        self, requests: Sequence[store.AppendRequest]
    ) -> tuple[int | store.Refusal, ...]:
        requests = rules.batch(requests, store.AppendRequest, "append_many")
        rules.check_batch_jobs([r.job for r in requests])
        # The whole batch is checked (and encoded) before any part is refused for its lease:
        # a malformed part makes the batch Invalid whatever the other checks would say.
        stamped: list[list[AnyEvent]] = []
        for request in requests:
            rules.check_events(request.job, request.events)
            token = request.owner.token if request.owner is not None else None
            stamped.append(rules.stamp(request.events, token))
            if self._validate:
                for event in stamped[-1]:
                    codec.encode_event(event)
        prepared: list[tuple[store.AppendRequest, list[AnyEvent], bool] | store.Refusal] = []
        for request, events in zip(requests, stamped, strict=True):
            try:
                decides = rules.decides(request.job, request.events, request.owner)
            except Conflict as refused:
                prepared.append(refused)
                continue
            prepared.append((request, events, decides))
        if not prepared:
            return ()
        with self._lock:
            now = self._clock()
            return tuple(
                part if isinstance(part, (Conflict, NotFound)) else self._append_one(*part, now)
                for part in prepared
            )

    def _append_one(
        self, request: store.AppendRequest, stamped: list[AnyEvent], decides: bool, now: datetime
    ) -> int | store.Refusal:
        """One job's part of a batch, under the lock: its refusal is answered, not raised."""
        job = request.job
        try:
            record = self._get(job)
            rules.check_revision(job, len(record.events), request.expect_revision)
            if decides:
                assert request.owner is not None
                rules.check_owner(job, request.owner, record.lease, now)
        except (Conflict, NotFound) as refused:
            return refused
        record.events.extend(stamped)
        record.view = None
        if not record.settled and any(isinstance(e, Settled) for e in stamped):
            record.settled = True
        return len(record.events)

    def list(self, filter: store.ListFilter | None = None) -> Iterator[JobID]:
        want = filter.settled if filter is not None else None
        with self._lock:
            # A snapshot: every job created before this call is in it, in creation order.
            if want is None:
                jobs = list(self._records)
            else:
                jobs = [job for job, r in self._records.items() if r.settled is want]
        return iter(jobs)

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        jobs = rules.acquire_batch(jobs, ttl)
        for job in jobs:
            rules.check_holder(job, holder)
        with self._lock:
            now = self._clock()
            answers: list[store.Lease | store.Refusal] = []
            for job in jobs:
                try:
                    record = self._get(job)
                    lease = rules.acquired(job, holder, ttl, record.lease, record.token, now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                record.lease, record.token = lease, max(record.token, lease.token)
                answers.append(lease)
            return tuple(answers)

    def renew_many(
        self, leases: Sequence[store.Lease], ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        leases = rules.renew_batch(leases, ttl)
        with self._lock:
            now = self._clock()
            answers: list[store.Lease | store.Refusal] = []
            for lease in leases:
                try:
                    record = self._get(lease.job)
                    record.lease = rules.renewed(lease, ttl, record.lease, now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                answers.append(record.lease)
            return tuple(answers)

    def release_many(self, leases: Sequence[store.Lease]) -> None:
        leases = rules.batch(leases, store.Lease, "release_many")
        rules.check_batch_jobs([lease.job for lease in leases])
        with self._lock:
            # Every job is looked up before any lease is dropped: NotFound releases nothing.
            records = [self._get(lease.job) for lease in leases]
            for lease, record in zip(leases, records, strict=True):
                if rules.released(lease, record.lease):
                    record.lease = None

    def announce(
        self, member: str, ttl: timedelta, measured: store.Measured | None = None
    ) -> tuple[str, ...]:
        rules.check_member(member)
        rules.check_ttl(ttl)
        with self._lock:
            now = self._clock()
            # Expired members are dropped as they are seen: every restart names a new holder.
            self._members = {m: e for m, e in self._members.items() if now < e}
            self._members[member] = now + ttl
            self._measured = {m: v for m, v in self._measured.items() if m in self._members}
            if measured is None:
                self._measured.pop(member, None)
            else:
                self._measured[member] = measured
            return rules.live_members(self._members, now)

    def withdraw(self, member: str) -> None:
        rules.check_member(member)
        with self._lock:
            self._members.pop(member, None)
            self._measured.pop(member, None)

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
