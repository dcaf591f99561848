"""The supervisor's record store, watched: when it stops answering, and when it answers again.

A shared store can be away for a while (its server restarted, failed over, or cut off by the
network) and a supervisor must outlast that however long it is: every call it makes to the
store goes through :class:`WatchedStore`, which tells the log once when the store stops
answering and once when it answers again, instead of one line per job and per call. The
supervisor itself decides nothing while the store is away (each poll starts by listing the
store, and a poll that cannot skips to the next); once the store answers, its own checks
(leases renewed or taken anew, fenced by the store) make the first poll after an outage act
on the store's view, never on the one from before it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

from jobdispatch.clock import Clock
from jobdispatch.errors import Unavailable, Unreachable
from jobdispatch.records import store as records
from jobdispatch.records.events import AnyEvent, Header, View
from jobdispatch.types import JobID

__all__ = ["WatchedStore"]

log = logging.getLogger("jobdispatch.supervise")

P = ParamSpec("P")
T = TypeVar("T")

#: What a store raises when it cannot answer now (as opposed to refusing what was asked).
AWAY = (Unavailable, Unreachable)


class WatchedStore:
    """A :class:`~jobdispatch.records.store.Records` that passes every call to ``store`` and
    notes whether it answered: the first failure of an outage is logged, as is the first
    answer after it; ``told(exc)`` says whether an error is the outage's own."""

    def __init__(self, store: records.Records, clock: Clock) -> None:
        self.inner = store
        self._clock = clock
        self._lock = threading.Lock()
        self._since: datetime | None = None
        self._last: BaseException | None = None

    @property
    def away(self) -> bool:
        """Whether the store's last call failed for want of an answer."""
        return self._since is not None

    def told(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the store's failure to answer (one outage line covers it), as
        opposed to, say, the backend's."""
        return exc is self._last

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            answer = fn(*args, **kwargs)
        except AWAY as exc:
            self._failed(exc)
            raise
        self._answered()
        return answer

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._last = exc
            if self._since is not None:
                return
            self._since = self._clock()
        log.warning(
            "the record store does not answer: %s; nothing is decided until it does, and it "
            "is asked again every poll",
            exc,
        )

    def _answered(self) -> None:
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            away = (self._clock() - since).total_seconds()
            log.warning(
                "the record store answers again, %.1f s after its first failure to; "
                "supervising resumes",
                away,
            )

    # ---------------------------------------------------------------- Records

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> records.Created:
        return self._call(self.inner.create, header, events, idempotency_key=idempotency_key)

    def read(self, job: JobID) -> View:
        return self._call(self.inner.read, job)

    def read_many(self, jobs: Sequence[JobID]) -> tuple[records.ReadAnswer, ...]:
        return self._call(self.inner.read_many, jobs)

    def append(
        self,
        job: JobID,
        events: Sequence[AnyEvent],
        *,
        expect_revision: int,
        owner: records.Lease | None = None,
    ) -> int:
        return self._call(
            self.inner.append, job, events, expect_revision=expect_revision, owner=owner
        )

    def append_many(
        self, requests: Sequence[records.AppendRequest]
    ) -> tuple[int | records.Refusal, ...]:
        return self._call(self.inner.append_many, requests)

    def list(self, filter: records.ListFilter | None = None) -> Iterator[JobID]:
        # A store may fetch while the caller iterates: each step is a call of its own, and
        # making the iterator (which may ask nothing yet) does not count as an answer.
        try:
            jobs = self.inner.list(filter)
        except AWAY as exc:
            self._failed(exc)
            raise
        while True:
            try:
                job = self._call(next, jobs)
            except StopIteration:
                return
            yield job

    def acquire(self, job: JobID, holder: str, ttl: timedelta) -> records.Lease:
        return self._call(self.inner.acquire, job, holder, ttl)

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[records.Lease | records.Refusal, ...]:
        return self._call(self.inner.acquire_many, jobs, holder, ttl)

    def renew(self, lease: records.Lease, ttl: timedelta) -> records.Lease:
        return self._call(self.inner.renew, lease, ttl)

    def renew_many(
        self, leases: Sequence[records.Lease], ttl: timedelta
    ) -> tuple[records.Lease | records.Refusal, ...]:
        return self._call(self.inner.renew_many, leases, ttl)

    def release(self, lease: records.Lease) -> None:
        self._call(self.inner.release, lease)

    def release_many(self, leases: Sequence[records.Lease]) -> None:
        self._call(self.inner.release_many, leases)

    def announce(
        self, member: str, ttl: timedelta, measured: records.Measured | None = None
    ) -> tuple[str, ...]:
        return self._call(self.inner.announce, member, ttl, measured)

    def withdraw(self, member: str) -> None:
        self._call(self.inner.withdraw, member)

    def close(self) -> None:
        self.inner.close()
