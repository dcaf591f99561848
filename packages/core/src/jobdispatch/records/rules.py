"""The store's rules, written once: what every record store checks, decides and says.

The promises of :class:`~jobdispatch.records.store.Records` (the idempotent create, the
conditional append, fencing by lease tokens) are decisions over a few values: the record's
revision, the lease it holds, the last token it handed out, and ``now``. This module makes
those decisions and words their refusals; a store keeps the values (in a dict, in LMDB) and
calls these functions inside its own transaction. So the memory store and the LMDB store cannot
drift apart, the conformance suite tests one set of rules through both, and the simulator's
mutants that revert a rule (``no-fencing``, ``no-revision-check``) patch it here and so revert
it for every store. Stores therefore call these through the module (``rules.check_owner``), never
bind them by name at import.

Every function is pure: no I/O, no clock (``now`` is an argument).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import attrs

from jobdispatch.errors import Conflict, Invalid, LeaseHeld, LeaseLost, RevisionMoved
from jobdispatch.records.events import EVENT_TYPES, SCHEMA_VERSION, AnyEvent, Header
from jobdispatch.records.store import Lease

__all__ = [
    "CREATOR_TOKEN",
    "acquire_batch",
    "acquired",
    "batch",
    "check_batch_jobs",
    "check_events",
    "check_header",
    "check_holder",
    "check_key_size",
    "check_owner",
    "check_revision",
    "check_ttl",
    "decides",
    "effective_key",
    "exists_already",
    "key_utf8",
    "read_batch",
    "released",
    "renew_batch",
    "renewed",
    "stamp",
]

#: The token stored on decisions committed by ``create``: nobody can own a job before it
#: exists, and leases hand out tokens from 1, so 0 reads as "written by the creator".
CREATOR_TOKEN = 0

T = TypeVar("T")

_KNOWN_TYPES = frozenset(EVENT_TYPES.values())


# ---------------------------------------------------------------------------- what is written


def check_header(header: Header) -> None:
    """Invalid unless ``header`` names a job and is of the schema this version writes."""
    if not isinstance(header.job, str) or not header.job:
        msg = f"a record needs a non-empty job id, got {header.job!r}"
        raise Invalid(msg)
    if header.schema != SCHEMA_VERSION:
        msg = (
            f"record {header.job}: header schema {header.schema} cannot be written by this "
            f"version (it writes schema {SCHEMA_VERSION})"
        )
        raise Invalid(msg)


def effective_key(header: Header, idempotency_key: str) -> str:
    """The idempotency key a create is filed under: the argument or the header's, which must
    agree when both are given."""
    if idempotency_key and header.idempotency_key and idempotency_key != header.idempotency_key:
        msg = (
            f"record {header.job}: idempotency key {idempotency_key!r} differs from the "
            f"header's {header.idempotency_key!r}"
        )
        raise Invalid(msg)
    return idempotency_key or header.idempotency_key


def exists_already(job: str) -> Conflict:
    """The refusal of a create whose job id is taken under another key (or none)."""
    return Conflict(f"record {job} exists already, created under another idempotency key")


def check_events(job: str, events: Sequence[AnyEvent]) -> None:
    """Invalid unless every item of the batch is one of the record's event types."""
    for i, event in enumerate(events):
        if type(event) not in _KNOWN_TYPES:
            msg = (
                f"record {job}: event {i} of the batch is a {type(event).__name__}, "
                "not one of the record's event types"
            )
            raise Invalid(msg)


def stamp(events: Sequence[AnyEvent], token: int | None) -> list[AnyEvent]:
    """The events as stored: decisions carry ``token``; controls and evidence carry none,
    whatever they were given, so a stored token always means "committed under this lease"."""
    out: list[AnyEvent] = []
    for event in events:
        want = token if event.decision else None
        out.append(event if event.token == want else attrs.evolve(event, token=want))
    return out


# ---------------------------------------------------------------------------- the append


def batch(items: Iterable[object], kind: type[T], what: str) -> tuple[T, ...]:
    """The items of a batch as a tuple, each checked to be a ``kind`` (a job id, an
    AppendRequest, a Lease): Invalid, naming the item's place, before anything is written.

    A batch is taken whole first, so one given as an iterator is not consumed by the checks
    and then found empty by the write. One string where a sequence of job ids is wanted is
    Invalid too: it is a sequence of its characters, so ``acquire_many("job-1", ...)`` would
    otherwise ask for the jobs "j", "o", "b"...
    """
    if isinstance(items, (str, bytes)):
        msg = f"{what} takes a sequence of {kind.__name__}s, got the single value {items!r}"
        raise Invalid(msg)
    try:
        taken = tuple(items)
    except TypeError:
        msg = f"{what} takes a sequence of {kind.__name__}s, got a {type(items).__name__}"
        raise Invalid(msg) from None
    for i, item in enumerate(taken):
        if not isinstance(item, kind):
            msg = f"{what}: item {i} is a {type(item).__name__}, not a {kind.__name__}"
            raise Invalid(msg)
    return taken  # type: ignore[return-value]


def check_batch_jobs(jobs: Sequence[str]) -> None:
    """Invalid when a batch names a job twice: each job's part of a batch is one conditional
    step, so two parts of one job would race each other inside one commit. Invalid too for an
    item that is not a job id (a non-empty string), which no store could have a record of."""
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        if not isinstance(job, str) or not job:
            msg = f"a batch's item {i} names the job {job!r}; a job id is a non-empty string"
            raise Invalid(msg)
        if job in seen:
            msg = f"a batch names job {job} twice (again at item {i}); give one part per job"
            raise Invalid(msg)
        seen.add(job)


def acquire_batch(jobs: Iterable[object], ttl: timedelta) -> tuple[str, ...]:
    """The job ids of an ``acquire_many``, taken whole and checked with its ttl, before
    anything is locked: each a job id, none twice, and a ttl a lease can have."""
    taken = batch(jobs, str, "acquire_many")
    check_ttl(ttl)
    check_batch_jobs(taken)
    return taken


def renew_batch(leases: Iterable[object], ttl: timedelta) -> tuple[Lease, ...]:
    """The leases of a ``renew_many``, taken whole and checked with its ttl, before anything
    is written: each a Lease, no job twice, and a ttl a lease can have."""
    taken = batch(leases, Lease, "renew_many")
    check_ttl(ttl)
    check_batch_jobs([lease.job for lease in taken])
    return taken


def read_batch(jobs: Iterable[object]) -> tuple[str, ...]:
    """The job ids of a ``read_many``, taken whole and checked to be strings: Invalid, naming
    the item's place, before anything is read. A job may appear more than once (a read
    changes nothing, so two reads of one job cannot race)."""
    return batch(jobs, str, "read_many")


def decides(job: str, events: Sequence[AnyEvent], owner: Lease | None) -> bool:
    """Whether the batch holds a decision, which then needs a lease for this job: LeaseLost
    when none is given or it is another job's (before any stored state is looked at)."""
    if not any(e.decision for e in events):
        return False
    if owner is None:
        msg = f"record {job}: decisions need the job's lease, and none was given"
        raise LeaseLost(msg)
    if owner.job != job:
        msg = f"record {job}: the lease given is for job {owner.job}"
        raise LeaseLost(msg)
    return True


def check_revision(job: str, revision: int, expect_revision: int) -> None:
    """RevisionMoved unless the record is still at the revision its writer read."""
    if revision != expect_revision:
        msg = f"record {job} is at revision {revision}, not {expect_revision}"
        raise RevisionMoved(msg)


def check_owner(job: str, owner: Lease, current: Lease | None, now: datetime) -> None:
    """LeaseLost unless ``owner`` is ``current``, the job's lease, and it is unexpired at
    ``now``. This is fencing: a holder that lost the lease without knowing it is refused by
    its token."""
    if current is None or current.holder != owner.holder or current.token != owner.token:
        who = f"{current.holder} (token {current.token})" if current else "nobody"
        msg = (
            f"job {job}: the lease of {owner.holder} (token {owner.token}) is not current; "
            f"it is held by {who}"
        )
        raise LeaseLost(msg)
    if not now < current.expires:
        msg = (
            f"job {job}: the lease of {owner.holder} (token {owner.token}) expired at "
            f"{current.expires}"
        )
        raise LeaseLost(msg)


# ---------------------------------------------------------------------------- leases


def check_ttl(ttl: timedelta) -> None:
    """Invalid unless a lease would last a positive time (checked before the job is looked
    up, so a bad argument is reported as such even for an unknown job)."""
    if ttl <= timedelta(0):
        msg = f"a lease needs a positive ttl, got {ttl}"
        raise Invalid(msg)


def check_holder(job: str, holder: str) -> None:
    """Invalid unless the holder asking for a lease is named."""
    if not holder:
        msg = f"job {job}: a lease needs a non-empty holder"
        raise Invalid(msg)


def key_utf8(what: str, value: str) -> bytes:
    """A key (a job id, an idempotency key, a member) as the UTF-8 bytes a store keeps it as;
    Invalid, naming ``what``, when it is not UTF-8 text."""
    try:
        return value.encode()
    except UnicodeEncodeError:
        # A command line's argument that is not UTF-8 arrives with lone surrogates in it.
        msg = f"the {what} {value!r} is not UTF-8 text"
        raise Invalid(msg) from None


def check_key_size(what: str, value: str, raw: bytes, limit: int) -> None:
    """Invalid when a key's UTF-8 bytes ``raw`` are more than the store takes (``limit``)."""
    if len(raw) > limit:
        msg = f"the {what} {value[:40]!r}... is {len(raw)} bytes long; the store takes {limit}"
        raise Invalid(msg)


def acquired(
    job: str, holder: str, ttl: timedelta, current: Lease | None, last_token: int, now: datetime
) -> Lease:
    """The lease ``acquire`` hands out, given the job's ``current`` lease (None when released
    or never taken) and ``last_token``, the greatest token ever handed out for the job.

    LeaseHeld while another holder's lease is unexpired. Re-acquiring one's own live lease
    renews it under the same token; every other acquisition takes a token past ``last_token``.
    """
    if current is not None and now < current.expires:
        if current.holder != holder:
            msg = f"job {job} is owned by {current.holder} until {current.expires}"
            raise LeaseHeld(msg)
        token = current.token
    else:
        token = last_token + 1
    return Lease(job, holder, token, now + ttl)


def renewed(lease: Lease, ttl: timedelta, current: Lease | None, now: datetime) -> Lease:
    """``lease`` extended to ``now + ttl``; LeaseLost (from :func:`check_owner`) unless it is
    still the job's current, unexpired lease."""
    check_owner(lease.job, lease, current, now)
    return Lease(lease.job, lease.holder, lease.token, now + ttl)


def released(lease: Lease, current: Lease | None) -> bool:
    """Whether releasing ``lease`` gives the job up: only when it is the current one (a stale
    lease's release is ignored). The job's last token stays, so the next lease's is greater."""
    return current is not None and current.holder == lease.holder and current.token == lease.token


# ---------------------------------------------------------------------------- members


def check_member(member: str) -> None:
    """Invalid unless the supervisor announcing itself is named by a non-empty string."""
    if not isinstance(member, str) or not member:
        msg = f"a member is named by a non-empty string, got {member!r}"
        raise Invalid(msg)


def live_members(expiries: Mapping[str, datetime], now: datetime) -> tuple[str, ...]:
    """The members whose announcement has not expired at ``now``, sorted by name, so that
    every supervisor that reads the same table counts (and orders) the same members."""
    return tuple(sorted(m for m, expires in expiries.items() if now < expires))
