"""The shared record store: every job's record and lease in one PostgreSQL database.

How each promise of :class:`~jobdispatch.records.store.Records` is kept
(docs/specs/0013-postgres-store.md says it at length):

* **One transaction per call, one per batch.** Every write locks the rows of the jobs it
  touches (``SELECT ... FOR UPDATE``, in job order, so batches never deadlock), fixes the
  transaction's instant from the database's clock, lets :mod:`jobdispatch.records.rules` decide
  each job's part on what it locked, and writes the parts accepted. A batch is one commit: one
  WAL flush whatever its size.
* **The database enforces what matters even against a wrong client.** Events are keyed by
  (job, revision); triggers refuse a decision whose token is not the job's current unexpired
  lease, a token that is not past every earlier one, a lease taken from a live holder and a
  revision or token that goes back (see :mod:`jobdispatch_records_postgres.schema`). The rules
  decide first, so their refusals are answered per job with their own words; the triggers only
  ever fire when a client's checks are missing or wrong, and then abort its whole transaction.
* **Time is the database's.** Lease expiry is judged at the instant the transaction pins from
  ``clock_timestamp()`` once it holds its rows: every supervisor, on whichever host, is judged
  by one clock, and a client's skewed clock cannot stretch a lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import attrs
import psycopg
from jobdispatch import codec
from jobdispatch.clock import Clock
from jobdispatch.errors import (
    Conflict,
    Invalid,
    LeaseLost,
    NotFound,
    RevisionMoved,
    Unavailable,
    Unreadable,
)
from jobdispatch.records import rules, store
from jobdispatch.records.decoded import DEFAULT_CACHE_EVENTS, Decoded, DecodedCache, extend
from jobdispatch.records.events import AnyEvent, Header, Settled, View
from jobdispatch.records.singles import SingleCalls
from jobdispatch.types import JobID
from psycopg import sql

from jobdispatch_records_postgres import schema as schema_module
from jobdispatch_records_postgres.connection import Connections
from jobdispatch_records_postgres.settings import Settings

__all__ = ["PostgresRecords"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Jobs fetched by the first query while ``list`` streams; each later page is twice the one
#: before, up to ``_LIST_BATCH_MAX``: a caller who stops early fetched little, and a supervisor
#: listing 10,000 jobs every poll makes 6 round trips, not 40.
_LIST_BATCH = 256
_LIST_BATCH_MAX = 8192
#: The longest job id or idempotency key, in UTF-8 bytes (well under a B-tree entry's limit).
_MAX_KEY = 1024
#: SQLSTATEs the schema's guards raise.
_GUARDS = frozenset({"JD001", "JD002"})
#: The one of them that is fencing: a decision without the current lease.
_FENCED = "JD001"


@attrs.frozen
class _Row:
    """A job's row as a write transaction locked it."""

    revision: int
    settled: bool
    holder: str | None
    token: int | None
    expires: datetime | None
    last_token: int
    seq: int

    def lease(self, job: JobID) -> store.Lease | None:
        """The job's lease as the rules see it: None once released (or never taken)."""
        if self.holder is None or self.token is None or self.expires is None:
            return None
        return store.Lease(job, self.holder, self.token, self.expires)


@attrs.frozen
class _Prepared:
    """One job's part of an append batch, checked and encoded before the transaction."""

    request: store.AppendRequest
    decides: bool
    encoded: list[tuple[bytes, int | None, bool]]  # (body, token, settles) per event
    stamped: tuple[AnyEvent, ...]  # the events as stored


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _check_key(what: str, value: object) -> str:
    """Invalid unless ``value`` is text PostgreSQL can hold as a key."""
    if not isinstance(value, str) or not value:
        msg = f"a {what} is a non-empty string, got {value!r}"
        raise Invalid(msg)
    raw = rules.key_utf8(what, value)
    if b"\x00" in raw:
        msg = f"the {what} {value!r} holds a NUL character, which PostgreSQL text cannot"
        raise Invalid(msg)
    rules.check_key_size(what, value, raw, _MAX_KEY)
    return value


@attrs.define
class _Fetched:
    """What a read brings out of the database for one record: its creation sequence and
    revision, its settled flag and its highest stored event (read in one statement, so of one
    moment), the decoded prefix this process has (or the header's bytes when it has none), and
    the rows past that prefix, each a revision and its bytes."""

    seq: int
    revision: int
    settled: bool
    last: int  # the highest revision stored in events, 0 for none
    cached: Decoded | None
    head: bytes | None = None
    rows: list[tuple[int, bytes]] = attrs.Factory(list)
    stored: int | None = None  # how many events are stored, counted only for a damaged record

    @property
    def start(self) -> int:
        """The first revision to fetch."""
        return len(self.cached[1]) + 1 if self.cached is not None else 1


class PostgresRecords(SingleCalls):
    """Records in a PostgreSQL database, shared by every process on every host that opens it.

    Args:
        config: the settings (:data:`~jobdispatch_records_postgres.settings.CONFIG_SCHEMA`: a
            DSN or its fields, TLS, where the password is, the schema, the pool's size), or
            :class:`~jobdispatch_records_postgres.settings.Settings` built from them. The
            schema is created or migrated when the store opens; one written by a newer version
            is refused (Invalid) and left as it is.
        clock: None (the default, and what production uses) judges leases by the database's
            clock. A clock given here is pinned as every write transaction's instant instead,
            so tests (the conformance suite's ManualClock) can move time; the database still
            does the judging, at that instant. Never give one to stores that share a database
            with supervisors on the database's time.
        cache_events: how many decoded events this store keeps for re-reads (least recently
            read records go first; 0 keeps none). A record read again is fetched from where
            its cached part ends, so a supervisor's poll brings only what is new.
        readonly: open sessions that may not write (the database refuses any write in them),
            for a reader such as the metrics endpoint: a missing schema is NotFound and an
            older one Invalid, since neither is created nor migrated.

    Raises, naming the database and never the password, Unavailable when it cannot reach the
    database (down, cut off, out of connections), Unauthorized when the database refuses the
    login, and Invalid for settings it cannot connect with (a password file that cannot be
    read, a variable that is not set); at once, from the first connection's own answer. Once
    open, a store rides out the database's outages: each call while it is away fails
    Unavailable, and the first call after it answers again connects anew
    (:mod:`jobdispatch_records_postgres.connection`).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | Settings,
        clock: Clock | None = None,
        *,
        cache_events: int = DEFAULT_CACHE_EVENTS,
        readonly: bool = False,
    ) -> None:
        settings = config if isinstance(config, Settings) else Settings.from_config(config)
        self.settings = attrs.evolve(settings, read_only=True) if readonly else settings
        self._clock = clock
        self._decoded = DecodedCache(cache_events)
        self._closed = False
        self._owner_checked = False  # whether announce has looked at who this store runs as
        s = sql.Identifier(self.settings.schema)
        self._q = _Queries(s)
        self._connections = Connections(self.settings)
        try:
            self._run(
                lambda conn: schema_module.ensure(
                    conn, self.settings.schema, self.settings.where, readonly=readonly
                )
            )
        except BaseException:
            self._connections.close()
            raise

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PostgresRecords:
        """The store the ``postgresql`` record store's configuration describes."""
        return cls(config)

    def __repr__(self) -> str:
        return f"PostgresRecords({self.settings.where()!r})"

    # --------------------------------------------------------------------------- the interface

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> store.Created:
        job = _check_key("job id", header.job)
        key = rules.effective_key(header, idempotency_key)
        if key != header.idempotency_key:
            header = attrs.evolve(header, idempotency_key=key)
        rules.check_header(header)
        if key:
            _check_key("idempotency key", key)
        rules.check_events(job, events)
        head = codec.encode_header(header)
        stamped = tuple(rules.stamp(events, rules.CREATOR_TOKEN))
        bodies = [codec.encode_event(e) for e in stamped]
        tokens = [e.token for e in stamped]
        settled = any(isinstance(e, Settled) for e in stamped)
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> store.Created:
            if key:
                row = conn.execute(q.by_key, (key,)).fetchone()
                if row is not None:
                    return store.Created(job=row[0], created=False)
            inserted = conn.execute(
                q.insert_job, (job, key or None, head, len(bodies), settled)
            ).fetchone()
            if inserted is None:
                # Taken meanwhile: by a create under the same key (then that job is the answer;
                # this statement's snapshot sees it committed), or the id under another key.
                if key:
                    row = conn.execute(q.by_key, (key,)).fetchone()
                    if row is not None:
                        return store.Created(job=row[0], created=False)
                raise rules.exists_already(job)
            if bodies:
                revisions = list(range(1, len(bodies) + 1))
                conn.execute(q.insert_events, ([job] * len(bodies), revisions, tokens, bodies))
            made.append(int(inserted[0]))
            return store.Created(job=job, created=True)

        made: list[int] = []  # the new record's sequence, once its transaction made it
        created = self._run(body, transaction=True)
        if made:
            self._decoded.put(made[0], header, stamped)  # committed: read without decoding
        return created

    def read(self, job: JobID) -> View:
        (answer,) = self.read_many([job])
        if isinstance(answer, View):
            return answer
        raise answer

    def read_many(self, jobs: Sequence[JobID]) -> tuple[store.ReadAnswer, ...]:
        wanted = [_check_key("job id", job) for job in rules.read_batch(jobs)]
        unique = list(dict.fromkeys(wanted))
        q = self._q
        cache = self._decoded

        def body(conn: psycopg.Connection[Any]) -> dict[str, _Fetched]:
            # Three statements whatever the number of jobs: the revisions, the headers this
            # process has not decoded, and the rows past each cached prefix. Records only
            # grow, so rows up to the revision just read are the same in any later snapshot.
            heads = conn.execute(q.read_heads, (unique,)).fetchall()
            got: dict[str, _Fetched] = {}
            for job, seq, revision, settled, last in heads:
                cached = cache.get(int(seq))
                if cached is not None and len(cached[1]) > int(revision):
                    cached = None  # cannot be (records only grow): decode it again
                got[job] = _Fetched(int(seq), int(revision), bool(settled), int(last), cached)
            self._count_damaged(conn, got, unique)
            missing = [job for job, f in got.items() if f.cached is None and f.stored is None]
            if missing:
                for job, header in conn.execute(q.read_headers, (missing,)):
                    got[job].head = bytes(header)
            pending = [
                (job, f) for job, f in got.items() if f.stored is None and f.start <= f.revision
            ]
            if pending:
                params = (
                    [job for job, _ in pending],
                    [f.start - 1 for _, f in pending],
                    [f.revision for _, f in pending],
                )
                for job, revision, data in conn.execute(q.read_rows, params):
                    got[job].rows.append((int(revision), bytes(data)))
            return got

        fetched = self._run(body, transaction=True) if unique else {}
        decoded: dict[str, store.ReadAnswer] = {}
        for job in unique:
            found = fetched.get(job)
            if found is None:
                decoded[job] = NotFound(f"no record for job {job!r}")
                continue
            try:
                decoded[job] = self._decode(job, found)
            except Unreadable as exc:
                decoded[job] = exc
        return tuple(decoded[job] for job in wanted)

    def revisions(self, jobs: Sequence[JobID]) -> tuple[int | None, ...]:
        """:class:`~jobdispatch.records.store.Revisions`: the jobs' rows, in one statement (one
        round trip), no event read."""
        wanted = [_check_key("job id", job) for job in rules.batch(jobs, str, "revisions")]
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> dict[str, int]:
            return {str(j): int(r) for j, r in conn.execute(q.revisions_of, (wanted,))}

        found = self._run(body) if wanted else {}
        return tuple(found.get(job) for job in wanted)

    def _count_damaged(
        self, conn: psycopg.Connection[Any], got: dict[str, _Fetched], wanted: Sequence[str]
    ) -> None:
        """Count the events stored of each record whose row disagrees with them (its revision
        is not its highest stored event), and of each job asked for that has no row but has
        events (entered in ``got`` with no sequence): one statement, and only when there is
        damage to name or a job was not found, so a healthy poll pays nothing for it."""
        damaged = [job for job, f in got.items() if f.last != f.revision]
        unknown = [job for job in wanted if job not in got]
        if not damaged and not unknown:
            return
        for job, count, last in conn.execute(self._q.count_events, (damaged + unknown,)):
            if job not in got:
                got[job] = _Fetched(-1, 0, False, int(last), None)
            got[job].stored = int(count)

    def _decode(self, job: str, got: _Fetched) -> View:
        """The View of one fetched record, its new rows decoded and the whole kept in the
        decoded cache. Unreadable for damage the rows show, and for a row that disagrees with
        the events stored (their number, whether one settles the job) or is gone from under
        them: the row decides which jobs are served and where appends go, so a mismatch is
        named, never read past."""
        if got.seq < 0:
            msg = f"record {job} is damaged: {got.stored} events stored, but its row is gone"
            raise Unreadable(msg, job=job)
        if got.stored is not None:
            last = f", the last at {got.last}" if got.last != got.stored else ""
            msg = f"record {job} is damaged: {got.stored} events stored{last}, revision "
            raise Unreadable(msg + str(got.revision), job=job)
        view = self._extend(job, got)
        if got.settled != self._decoded.settles(got.seq, view.events):
            said = (
                "settled, but no event settles it"
                if got.settled
                else "not settled, but an event settles it"
            )
            msg = f"record {job} is damaged: its row says {said}"
            raise Unreadable(msg, job=job)
        return view

    def _extend(self, job: str, got: _Fetched) -> View:
        """The View of one fetched record whose row agrees with its stored events."""
        if got.cached is not None and not got.rows and len(got.cached[1]) == got.revision:
            return View(*got.cached)
        if got.cached is not None:
            header, events = extend(job, got.cached[0], got.cached[1], got.rows, got.revision)
        else:
            if got.head is None:
                msg = f"record {job} is damaged: its header is missing"
                raise Unreadable(msg, job=job, revision=0)
            header, events = extend(job, got.head, (), got.rows, got.revision)
        self._decoded.put(got.seq, header, events)
        return View(header, events)

    def append_many(
        self, requests: Sequence[store.AppendRequest]
    ) -> tuple[int | store.Refusal, ...]:
        requests = rules.batch(requests, store.AppendRequest, "append_many")
        rules.check_batch_jobs([r.job for r in requests])
        # Everything that needs no stored state is checked and encoded before the transaction,
        # so rows stay locked only for the conditional part. The whole batch is checked and
        # encoded before any part is refused for its lease: a malformed part makes the batch
        # Invalid whatever the other checks would say (spec 0002, D4).
        encoded_parts: list[tuple[list[tuple[bytes, int | None, bool]], tuple[AnyEvent, ...]]] = []
        for request in requests:
            _check_key("job id", request.job)
            rules.check_events(request.job, request.events)
            token = request.owner.token if request.owner is not None else None
            stamped = tuple(rules.stamp(request.events, token))
            encoded = [(codec.encode_event(e), e.token, isinstance(e, Settled)) for e in stamped]
            encoded_parts.append((encoded, stamped))
        prepared: list[_Prepared | store.Refusal] = []
        for request, (encoded, stamped) in zip(requests, encoded_parts, strict=True):
            try:
                decides = rules.decides(request.job, request.events, request.owner)
            except Conflict as refused:
                prepared.append(refused)
                continue
            prepared.append(_Prepared(request, decides, encoded, stamped))
        parts = [p for p in prepared if isinstance(p, _Prepared)]
        if not parts:
            return tuple(p for p in prepared if not isinstance(p, _Prepared))
        q = self._q

        seqs: dict[str, int] = {}  # job -> its record's sequence, for the parts applied

        def body(conn: psycopg.Connection[Any]) -> tuple[int | store.Refusal, ...]:
            seqs.clear()
            locked, now = self._lock(conn, [p.request.job for p in parts])
            # Under the locks no honest writer can move these records, so a row that
            # disagrees with its stored events is damage: that part alone is refused, since
            # its events would collide with rows already stored and fail the whole batch.
            damaged = dict(
                conn.execute(q.disagreeing, ([p.request.job for p in parts],)).fetchall()
            )
            answers: list[int | store.Refusal] = []
            ev_jobs: list[str] = []
            ev_revisions: list[int] = []
            ev_tokens: list[int | None] = []
            ev_bodies: list[bytes] = []
            up_jobs: list[str] = []
            up_revisions: list[int] = []
            up_settles: list[bool] = []
            for part in prepared:
                if not isinstance(part, _Prepared):
                    answers.append(part)
                    continue
                job, request = part.request.job, part.request
                try:
                    row = locked.get(job)
                    if row is None:
                        msg = f"no record for job {job!r}"
                        raise NotFound(msg)
                    if job in damaged:
                        msg = (
                            f"record {job} is damaged: its events go to revision "
                            f"{damaged[job]}, its row says {row.revision}; nothing was appended"
                        )
                        raise RevisionMoved(msg)
                    rules.check_revision(job, row.revision, request.expect_revision)
                    if part.decides:
                        assert request.owner is not None
                        rules.check_owner(job, request.owner, row.lease(job), now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                for i, (data, token, _) in enumerate(part.encoded, start=row.revision + 1):
                    ev_jobs.append(job)
                    ev_revisions.append(i)
                    ev_tokens.append(token)
                    ev_bodies.append(data)
                new = row.revision + len(part.encoded)
                seqs[job] = row.seq
                if part.encoded:
                    up_jobs.append(job)
                    up_revisions.append(new)
                    up_settles.append(any(s for _, _, s in part.encoded))
                answers.append(new)
            if ev_jobs:
                conn.execute(q.insert_events, (ev_jobs, ev_revisions, ev_tokens, ev_bodies))
                conn.execute(q.update_revisions, (up_jobs, up_revisions, up_settles))
            return tuple(answers)

        answers = self._run(body, transaction=True)
        for part in parts:
            seq = seqs.get(part.request.job)
            if seq is not None and part.stamped:
                # Committed: the writer's next read (a supervisor's next round) need not
                # fetch or decode what it just wrote.
                self._decoded.committed(seq, part.request.expect_revision, part.stamped)
        return answers

    def list(self, filter: store.ListFilter | None = None) -> Iterator[JobID]:
        want = filter.settled if filter is not None else None
        query = {None: self._q.list_all, True: self._q.list_settled, False: self._q.list_unsettled}[
            want
        ]
        return self._list(query, orphans=want is None)

    def _list(self, query: sql.Composed, *, orphans: bool) -> Iterator[JobID]:
        # Pages by creation sequence, each its own short query: a caller who stops iterating
        # (or iterates slowly) holds no connection and no snapshot.
        after, size = 0, _LIST_BATCH
        while True:

            def page(conn: psycopg.Connection[Any], after: int = after, size: int = size) -> Any:
                return conn.execute(query, (after, size)).fetchall()

            rows = self._run(page)
            for _, job in rows:
                yield job
            if len(rows) < size:
                break
            after, size = rows[-1][0], min(2 * size, _LIST_BATCH_MAX)
        if orphans:
            # Events whose job's row is gone (a row deleted by hand, a partial restore): a
            # record all the same, streamed last (its place in creation order went with its
            # row), so that reading it names the damage instead of the job vanishing.
            yield from (
                job for (job,) in self._run(lambda c: c.execute(self._q.orphans).fetchall())
            )

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        jobs = rules.acquire_batch(jobs, ttl)
        for job in jobs:
            _check_key("job id", job)
        for job in jobs:
            rules.check_holder(job, holder)
        if not jobs:
            return ()

        def body(conn: psycopg.Connection[Any]) -> tuple[store.Lease | store.Refusal, ...]:
            locked, now = self._lock(conn, jobs)
            answers: list[store.Lease | store.Refusal] = []
            granted: list[store.Lease] = []
            for job in jobs:
                try:
                    row = locked.get(job)
                    if row is None:
                        msg = f"no record for job {job!r}"
                        raise NotFound(msg)
                    lease = rules.acquired(job, holder, ttl, row.lease(job), row.last_token, now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                granted.append(lease)
                answers.append(lease)
            self._write_leases(conn, granted)
            return tuple(answers)

        return self._run(body, transaction=True)

    def renew_many(
        self, leases: Sequence[store.Lease], ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        leases = rules.renew_batch(leases, ttl)
        for lease in leases:
            _check_key("job id", lease.job)
        if not leases:
            return ()

        def body(conn: psycopg.Connection[Any]) -> tuple[store.Lease | store.Refusal, ...]:
            locked, now = self._lock(conn, [lease.job for lease in leases])
            answers: list[store.Lease | store.Refusal] = []
            renewed: list[store.Lease] = []
            for lease in leases:
                try:
                    row = locked.get(lease.job)
                    if row is None:
                        msg = f"no record for job {lease.job!r}"
                        raise NotFound(msg)
                    extended = rules.renewed(lease, ttl, row.lease(lease.job), now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                renewed.append(extended)
                answers.append(extended)
            self._write_leases(conn, renewed)
            return tuple(answers)

        return self._run(body, transaction=True)

    def release_many(self, leases: Sequence[store.Lease]) -> None:
        leases = rules.batch(leases, store.Lease, "release_many")
        rules.check_batch_jobs([lease.job for lease in leases])
        for lease in leases:
            _check_key("job id", lease.job)
        if not leases:
            return
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> None:
            locked, _ = self._lock(conn, [lease.job for lease in leases])
            given_up: list[str] = []
            for lease in leases:
                row = locked.get(lease.job)
                if row is None:
                    msg = f"no record for job {lease.job!r}"
                    raise NotFound(msg)
                if rules.released(lease, row.lease(lease.job)):
                    # The last token stays: the next acquisition must hand out a greater one.
                    given_up.append(lease.job)
            if given_up:
                conn.execute(q.release, (given_up,))

        self._run(body, transaction=True)

    def announce(
        self, member: str, ttl: timedelta, measured: store.Measured | None = None
    ) -> tuple[str, ...]:
        rules.check_member(member)
        _check_key("member", member)
        rules.check_ttl(ttl)
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> tuple[str, ...]:
            pinned = self._clock() if self._clock is not None else None
            row = conn.execute(q.pin_now, (pinned,)).fetchone()
            assert row is not None
            now = _utc(row[0])
            if not self._owner_checked:
                self._owner_checked = True
                self._warn_if_owner(conn)
            # Expired members are dropped as they are seen: every restart names a new holder.
            conn.execute(q.prune_members, (now,))
            poll = measured.poll_seconds if measured is not None else None
            commit = measured.commit_seconds if measured is not None else None
            conn.execute(q.announce, (member, now + ttl, poll, commit))
            rows = conn.execute(q.members).fetchall()
            return rules.live_members({str(m): _utc(e) for m, e in rows}, now)

        return self._run(body, transaction=True)

    def withdraw(self, member: str) -> None:
        rules.check_member(member)
        _check_key("member", member)
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> None:
            conn.execute(q.withdraw, (member,))

        self._run(body, transaction=True)

    def survey(self) -> store.Survey:
        """Every job's revision, the members, the unexpired leases per holder and the size of
        the schema's tables (with their indexes and TOAST), in one read transaction."""
        q = self._q

        def body(conn: psycopg.Connection[Any]) -> store.Survey:
            pinned = self._clock() if self._clock is not None else None
            row = conn.execute(q.pin_now, (pinned,)).fetchone()
            assert row is not None
            now = _utc(row[0])
            revisions = {str(j): int(r) for j, r in conn.execute(q.revisions)}
            leases = {str(h): int(n) for h, n in conn.execute(q.leases_held, (now,))}
            members: dict[str, datetime] = {}
            measured: dict[str, store.Measured] = {}
            for m, e, poll, commit in conn.execute(q.members_measured):
                members[str(m)] = _utc(e)
                if poll is not None or commit is not None:
                    measured[str(m)] = store.Measured(poll_seconds=poll, commit_seconds=commit)
            size = conn.execute(q.size, (self.settings.schema,)).fetchone()
            return store.Survey(
                now=now,
                revisions=revisions,
                members=members,
                leases=leases,
                measured=measured,
                size_bytes=int(size[0]) if size is not None and size[0] is not None else None,
            )

        return self._run(body, transaction=True)

    def _warn_if_owner(self, conn: psycopg.Connection[Any]) -> None:
        """Say once, at a supervisor's first announcement (only supervisors announce), that it
        runs with the schema owner's rights: raw SQL under those credentials can drop the
        guards, so a supervisor on every host should not hold them (spec 0013 D3)."""
        if schema_module.owns(conn, self.settings.schema):
            log.warning(
                "%s: this supervisor connects as a role with the schema owner's rights, which "
                "can alter or drop the database's guards; give supervisors a role of their own "
                "(`jobdispatch store grant ROLE`, run as the owner; see the PostgreSQL how-to)",
                self.settings.where(),
            )

    def grant(self, role: str) -> None:
        """Give the database role ``role`` what a supervisor, or any other client of this
        store, needs and nothing more (reading, creating records, appending events, moving a
        record's revision and lease; see :func:`~jobdispatch_records_postgres.schema.grant`),
        so that it can be the role every host connects as while the guards bind it. Run as the
        schema's owner (which this store, by opening, has migrated to the current version);
        Invalid for any other role, or for a role the database does not have."""
        _check_key("role", role)
        where = self.settings.where()

        def body(conn: psycopg.Connection[Any]) -> None:
            if not schema_module.owns(conn, self.settings.schema):
                row = conn.execute("SELECT current_user").fetchone()
                msg = (
                    f"{where}: role {row[0] if row else '?'} does not own the store's schema, "
                    "so cannot grant its rights; connect as the owner"
                )
                raise Invalid(msg)
            found = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if found is None:
                msg = f"{where}: the database has no role {role!r}; create it first"
                raise Invalid(msg)
            schema_module.grant(conn, self.settings.schema, role)

        self._run(body)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the pool's connections; the records stay in the database."""
        if not self._closed:
            self._closed = True
            self._connections.close()

    # ------------------------------------------------------------------------------ internals

    def _lock(
        self, conn: psycopg.Connection[Any], jobs: Sequence[JobID]
    ) -> tuple[dict[str, _Row], datetime]:
        """Lock the jobs' rows (in job order) and pin the transaction's instant, after the
        locks, so that no other writer of these jobs commits between that instant and ours."""
        rows = conn.execute(self._q.lock, (list(jobs),)).fetchall()
        locked = {
            job: _Row(
                int(rev),
                bool(settled),
                holder,
                token,
                _utc(exp) if exp else None,
                int(last),
                int(seq),
            )
            for job, rev, settled, holder, token, exp, last, seq in rows
        }
        pinned = self._clock() if self._clock is not None else None
        row = conn.execute(self._q.pin_now, (pinned,)).fetchone()
        assert row is not None
        return locked, _utc(row[0])

    def _write_leases(self, conn: psycopg.Connection[Any], leases: Sequence[store.Lease]) -> None:
        if leases:
            conn.execute(
                self._q.write_leases,
                (
                    [lease.job for lease in leases],
                    [lease.holder for lease in leases],
                    [lease.token for lease in leases],
                    [lease.expires for lease in leases],
                ),
            )

    def _run(self, body: Callable[[psycopg.Connection[Any]], T], *, transaction: bool = False) -> T:
        """Run ``body`` on a pooled connection (in one transaction when asked), turning the
        driver's failures into the store's errors: a guard of the schema's refusing is a
        Conflict; anything that keeps the database from answering is Unavailable, naming the
        database and never the password (connecting: see :class:`Connections`)."""
        if self._closed:
            msg = f"{self.settings.where()}: the store is closed"
            raise Unavailable(msg)
        try:
            with self._connections.connection() as conn:
                if not transaction:
                    return body(conn)
                with conn.transaction():
                    return body(conn)
        except psycopg.Error as exc:
            if exc.sqlstate in _GUARDS:
                # Only a client whose own checks are missing or wrong gets here.
                detail = exc.diag.message_primary or str(exc)
                msg = f"{self.settings.where()}: the database refused the write: {detail}"
                raise (LeaseLost if exc.sqlstate == _FENCED else Conflict)(msg) from None
            msg = f"{self.settings.where()}: {type(exc).__name__}: {_first_line(exc)}"
            raise Unavailable(msg) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


class _Queries:
    """Every statement, composed once per store with its schema's name."""

    def __init__(self, s: sql.Identifier) -> None:
        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(s=s)

        self.by_key = q("SELECT job FROM {s}.jobs WHERE idempotency_key = %s")
        self.insert_job = q(
            "INSERT INTO {s}.jobs (job, idempotency_key, header, revision, settled) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING seq"
        )
        self.insert_events = q(
            "INSERT INTO {s}.events (job, revision, token, body) "
            "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::bytea[])"
        )
        self.update_revisions = q(
            "UPDATE {s}.jobs AS j SET revision = u.revision, settled = j.settled OR u.settles "
            "FROM unnest(%s::text[], %s::bigint[], %s::boolean[]) AS u(job, revision, settles) "
            "WHERE j.job = u.job"
        )
        # The highest stored event beside the row, in one statement (so of one snapshot): a
        # row that disagrees with its events is found without reading them.
        self.read_heads = q(
            "SELECT j.job, j.seq, j.revision, j.settled, coalesce("
            "(SELECT max(e.revision) FROM {s}.events AS e WHERE e.job = j.job), 0) "
            "FROM {s}.jobs AS j WHERE j.job = ANY(%s::text[])"
        )
        self.disagreeing = q(
            "SELECT job, last FROM (SELECT j.job, j.revision, coalesce("
            "(SELECT max(e.revision) FROM {s}.events AS e WHERE e.job = j.job), 0) AS last "
            "FROM {s}.jobs AS j WHERE j.job = ANY(%s::text[])) AS r WHERE revision <> last"
        )
        self.count_events = q(
            "SELECT job, count(*), max(revision) FROM {s}.events WHERE job = ANY(%s::text[]) "
            "GROUP BY job"
        )
        self.read_headers = q("SELECT job, header FROM {s}.jobs WHERE job = ANY(%s::text[])")
        self.read_rows = q(
            "SELECT e.job, e.revision, e.body FROM {s}.events AS e "
            "JOIN unnest(%s::text[], %s::bigint[], %s::bigint[]) AS w(job, after, upto) "
            "ON e.job = w.job AND e.revision > w.after AND e.revision <= w.upto "
            "ORDER BY e.job, e.revision"
        )
        self.lock = q(
            "SELECT job, revision, settled, holder, lease_token, lease_expires, last_token, seq "
            "FROM {s}.jobs WHERE job = ANY(%s::text[]) ORDER BY job FOR UPDATE"
        )
        self.pin_now = q("SELECT {s}.pin_now(%s::timestamptz)")
        self.write_leases = q(
            "UPDATE {s}.jobs AS j SET holder = u.holder, lease_token = u.token, "
            "lease_expires = u.expires, last_token = greatest(j.last_token, u.token) "
            "FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::timestamptz[]) "
            "AS u(job, holder, token, expires) WHERE j.job = u.job"
        )
        self.release = q(
            "UPDATE {s}.jobs SET holder = NULL, lease_token = NULL, lease_expires = NULL "
            "WHERE job = ANY(%s::text[])"
        )
        self.prune_members = q("DELETE FROM {s}.members WHERE expires <= %s")
        self.announce = q(
            "INSERT INTO {s}.members (member, expires, poll_seconds, commit_seconds) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (member) DO UPDATE SET "
            "expires = excluded.expires, poll_seconds = excluded.poll_seconds, "
            "commit_seconds = excluded.commit_seconds"
        )
        self.members = q("SELECT member, expires FROM {s}.members")
        self.members_measured = q(
            "SELECT member, expires, poll_seconds, commit_seconds FROM {s}.members"
        )
        self.withdraw = q("DELETE FROM {s}.members WHERE member = %s")
        self.revisions = q("SELECT job, revision FROM {s}.jobs ORDER BY seq")
        self.revisions_of = q("SELECT job, revision FROM {s}.jobs WHERE job = ANY(%s::text[])")
        self.leases_held = q(
            "SELECT holder, count(*) FROM {s}.jobs WHERE holder IS NOT NULL "
            "AND lease_expires > %s GROUP BY holder"
        )
        self.size = sql.SQL(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'"
        )
        self.orphans = q(
            "SELECT DISTINCT e.job FROM {s}.events AS e "
            "WHERE NOT EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.job = e.job) ORDER BY e.job"
        )
        self.list_all = q(
            "SELECT seq, job FROM {s}.jobs WHERE seq > %s::bigint ORDER BY seq LIMIT %s"
        )
        self.list_settled = q(
            "SELECT seq, job FROM {s}.jobs WHERE settled AND seq > %s::bigint ORDER BY seq LIMIT %s"
        )
        self.list_unsettled = q(
            "SELECT seq, job FROM {s}.jobs WHERE NOT settled AND seq > %s::bigint "
            "ORDER BY seq LIMIT %s"
        )
