"""The single-job calls of a record store, written once in terms of its batch calls.

:class:`~jobdispatch.records.store.Records` has each write twice: ``append`` and
``append_many``, ``acquire`` and ``acquire_many``, and so on. In every store the single form
is the batch form called with one item, answering that item's value or raising its refusal;
only the batch form touches storage. :class:`SingleCalls` is that rule, so the memory, LMDB
and PostgreSQL stores say it in one place and cannot answer a single call differently from a
batch of one. It also makes a store a context manager that closes it, since every durable
store is used as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TypeVar

from jobdispatch.errors import Conflict, NotFound
from jobdispatch.records.events import AnyEvent
from jobdispatch.records.store import AppendRequest, Lease, Refusal
from jobdispatch.types import JobID

__all__ = ["SingleCalls", "raised"]

U = TypeVar("U")
S = TypeVar("S", bound="SingleCalls")


def raised(answers: Sequence[U | Refusal]) -> U:
    """The single form's answer from a batch of one: the value, or its refusal raised."""
    (answer,) = answers
    if isinstance(answer, (Conflict, NotFound)):
        raise answer
    return answer


class SingleCalls:
    """``append``, ``acquire``, ``renew`` and ``release`` as batches of one, and ``with``.

    A store inherits this and implements the ``*_many`` calls and ``close``; the stubs here
    only name what it must provide."""

    def append_many(self, requests: Sequence[AppendRequest]) -> tuple[int | Refusal, ...]:
        raise NotImplementedError

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[Lease | Refusal, ...]:
        raise NotImplementedError

    def renew_many(self, leases: Sequence[Lease], ttl: timedelta) -> tuple[Lease | Refusal, ...]:
        raise NotImplementedError

    def release_many(self, leases: Sequence[Lease]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(
        self,
        job: JobID,
        events: Sequence[AnyEvent],
        *,
        expect_revision: int,
        owner: Lease | None = None,
    ) -> int:
        request = AppendRequest(
            job=job, events=events, expect_revision=expect_revision, owner=owner
        )
        return raised(self.append_many([request]))

    def acquire(self, job: JobID, holder: str, ttl: timedelta) -> Lease:
        return raised(self.acquire_many([job], holder, ttl))

    def renew(self, lease: Lease, ttl: timedelta) -> Lease:
        return raised(self.renew_many([lease], ttl))

    def release(self, lease: Lease) -> None:
        self.release_many([lease])
