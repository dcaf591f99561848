"""Which jobs one holder owns: the leases it took, renewed and gave back.

One piece for every process that supervises, so that the supervisor's threaded loop and the
simulator's processes run the same ownership rules (spec 0004 D3, spec 0005 D2): a simulator
that drove a copy would prove the copy. It does no waiting and starts no thread; time comes from
the injected clock, so the simulator's processes (each with its own skewed clock) drive it
deterministically.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from jobdispatch.clock import Clock
from jobdispatch.errors import Conflict
from jobdispatch.records.store import Lease, Records

__all__ = ["Ownership", "fair_share"]

log = logging.getLogger("jobdispatch.supervise")


def fair_share(jobs: int, members: Sequence[str], member: str) -> int:
    """How many of ``jobs`` ``member`` takes when ``members`` (the live ones, as the store's
    ``announce`` answers them: sorted, the asker included) share them out.

    Each takes ``jobs // n``, and the first ``jobs % n`` by name take one more: the shares add
    up to exactly the jobs, so while the members agree on who they are, every job has a taker
    and the spread is even to within one. A member missing from ``members`` (its own
    announcement failed) counts itself last.
    """
    ranked = list(members) if member in members else [*members, member]
    base, extra = divmod(jobs, len(ranked))
    return base + (1 if ranked.index(member) < extra else 0)


class Ownership:
    """The leases of one holder, by job.

    ``own(job)`` acquires a lease when the holder has none, renews it once less than half of
    ``ttl`` remains (judged by the holder's own clock), and answers None while another holder
    has the job: a Conflict from the store means the lease is not ours, so it is forgotten and
    the next ``own`` tries to acquire afresh.
    """

    def __init__(self, store: Records, holder: str, ttl: timedelta, clock: Clock) -> None:
        self.store = store
        self.holder = holder
        self.ttl = ttl
        self.clock = clock
        self._leases: dict[str, Lease] = {}

    def own(self, job: str) -> Lease | None:
        """The current lease on ``job``: acquired when missing, renewed past half its life.
        None while another holder owns it."""
        now = self.clock()
        lease = self._leases.get(job)
        try:
            if lease is None:
                lease = self.store.acquire(job, self.holder, self.ttl)
            elif lease.expires - now < self.ttl / 2:
                lease = self.store.renew(lease, self.ttl)
        except Conflict:
            self._leases.pop(job, None)
            return None
        self._leases[job] = lease
        return lease

    def own_share(self, jobs: Sequence[str], share: int) -> dict[str, Lease]:
        """The leases to serve ``jobs`` with, taking no more than ``share`` of them.

        Jobs already held are kept (renewed); unowned ones are acquired, in order, only while
        fewer than ``share`` are held. Held beyond the share (a new member joined, so every
        share shrank), one job, the last held, is released per call: the surplus drains
        gradually to the newcomers, and releasing is always safe (its next owner is fenced by
        a greater token and starts from the record).
        """
        mine = [job for job in jobs if job in self._leases]
        if len(mine) > share:
            self.release(mine[-1])
        owned: dict[str, Lease] = {}
        held = len([job for job in jobs if job in self._leases])
        for job in jobs:
            fresh = job not in self._leases
            if fresh and held >= share:
                continue
            lease = self.own(job)
            if lease is None:
                held -= not fresh  # a lease found lost no longer counts
                continue
            held += fresh
            owned[job] = lease
        return owned

    def held(self, job: str) -> Lease | None:
        """The lease this holder believes it has on ``job``, without asking the store."""
        return self._leases.get(job)

    def forget(self, job: str) -> None:
        """Drop the lease without telling the store: a pass found it lost (or lost a race), so
        ownership is checked anew on the next ``own``."""
        self._leases.pop(job, None)

    def release(self, job: str) -> None:
        """Give the lease on ``job`` back, so another holder need not wait for it to expire.
        A release that fails is only logged: the lease then lapses by itself."""
        lease = self._leases.pop(job, None)
        if lease is not None:
            try:
                self.store.release(lease)
            except Exception as exc:
                log.debug("release of %s failed: %s", job, exc)

    def release_all(self) -> None:
        """Give back every lease held (a supervisor that stops)."""
        for job in list(self._leases):
            self.release(job)
