"""Which jobs one holder owns: the leases it took, renewed and gave back.

One piece for every process that supervises, so that the supervisor's threaded loop and the
simulator's processes run the same ownership rules (spec 0004 D3, spec 0005 D2): a simulator
that drove a copy would prove the copy. It does no waiting and starts no thread; time comes from
the injected clock, so the simulator's processes (each with its own skewed clock) drive it
deterministically.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta

from jobdispatch.clock import Clock
from jobdispatch.errors import Conflict
from jobdispatch.phases import phase
from jobdispatch.records.store import Lease, Records, Refusal

__all__ = ["RENEWAL_SPREAD", "Ownership", "fair_share"]

log = logging.getLogger("jobdispatch.supervise")

#: How far before half its life a lease may be renewed, as a share of its ttl: each job's
#: lease is renewed once less than ``ttl / 2 + phase`` remains, its phase drawn from its id in
#: ``[0, ttl * RENEWAL_SPREAD)`` (:func:`jobdispatch.phases.phase`), so between a third and a
#: half of its life. Why: the leases of jobs taken in one poll (a launch, a takeover) would
#: otherwise all come due in the same later poll, and that poll would renew every one of them
#: (10,000 renewals on PostgreSQL added half a second to it). Spread, they are renewed over a
#: sixth of a ttl of polls, and drift further apart with each renewal. Renewing earlier costs a
#: few more renewals (a fifth, on average) and never less safety: more of the lease is left.
RENEWAL_SPREAD = 1 / 6


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

    ``own(job)`` acquires a lease when the holder has none, renews it once less than the job's
    own renewal margin remains (half of ``ttl`` and up to a sixth more, :data:`RENEWAL_SPREAD`;
    judged by the holder's own clock), and answers None while another holder has the job: a
    Conflict from the store means the lease is not ours, so it is forgotten and the next
    ``own`` tries to acquire afresh.
    """

    def __init__(self, store: Records, holder: str, ttl: timedelta, clock: Clock) -> None:
        self.store = store
        self.holder = holder
        self.ttl = ttl
        self.clock = clock
        self._leases: dict[str, Lease] = {}
        self._spread = ttl * RENEWAL_SPREAD

    def renew_below(self, job: str) -> timedelta:
        """The lease's life left under which ``job``'s lease is renewed: half the ttl, and the
        job's phase of the spread more (so renewed between a third and a half of its life)."""
        return self.ttl / 2 + phase(job, self._spread)

    def own(self, job: str) -> Lease | None:
        """The current lease on ``job``: acquired when missing, renewed once less than
        :meth:`renew_below` of it is left. None while another holder owns it."""
        now = self.clock()
        lease = self._leases.get(job)
        try:
            if lease is None:
                lease = self.store.acquire(job, self.holder, self.ttl)
            elif lease.expires - now < self.renew_below(job):
                lease = self.store.renew(lease, self.ttl)
        except Conflict:
            self._leases.pop(job, None)
            return None
        self._leases[job] = lease
        return lease

    def own_many(self, jobs: Sequence[str]) -> dict[str, Lease]:
        """``own`` for every job of ``jobs``, in two store calls whatever their number: one
        ``acquire_many`` for the jobs without a lease and one ``renew_many`` for the leases
        due (:meth:`renew_below`; each call one durable commit on a durable store), so a poll over
        thousands of jobs pays two syncs for its ownership, not one per job. Answers the jobs
        owned, in the order asked; a job refused (another holder has it, the lease lapsed, or
        the store has no such job) is left out and its lease forgotten, as ``own`` does."""
        now = self.clock()
        leases = self._leases
        below = self.renew_below
        missing: list[str] = []
        due: list[Lease] = []
        for job in jobs:
            lease = leases.get(job)
            if lease is None:
                missing.append(job)
            elif lease.expires - now < below(job):
                due.append(lease)
        if missing:
            acquired = self.store.acquire_many(missing, self.holder, self.ttl)
            for job, answer in zip(missing, acquired, strict=True):
                self._keep(job, answer)
        if due:
            renewed = self.store.renew_many(due, self.ttl)
            for lease, answer in zip(due, renewed, strict=True):
                self._keep(lease.job, answer)
        return {job: leases[job] for job in jobs if job in leases}

    def _keep(self, job: str, answer: Lease | Refusal) -> None:
        if isinstance(answer, Lease):
            self._leases[job] = answer
        else:
            self._leases.pop(job, None)

    def own_share(
        self, jobs: Sequence[str], share: int, busy: Callable[[str], bool] | None = None
    ) -> dict[str, Lease]:
        """The leases to serve ``jobs`` with, taking no more than ``share`` of them, through
        :meth:`own_many` (so in a few store calls, whatever the number of jobs).

        Jobs already held are kept (renewed when due); unowned ones are acquired, in order,
        only while fewer than ``share`` are held, a chunk of the room left at a time, so jobs
        other holders own are passed over for the next ones. Held beyond the share (a new
        member joined, so every share shrank), one job, the last held, is released per call:
        the surplus drains gradually to the newcomers, and releasing is always safe (its next
        owner is fenced by a greater token and starts from the record). A job ``busy`` says is
        in the middle of something that must finish under this lease (a notice being sent) is
        not the one released.
        """
        held = [job for job in jobs if job in self._leases]
        if len(held) > share:
            free = [job for job in held if busy is None or not busy(job)]
            if free:
                held.remove(free[-1])
                self.release(free[-1])
        owned = self.own_many(held)
        free = [job for job in jobs if job not in self._leases]
        at = 0
        while len(owned) < share and at < len(free):
            room = share - len(owned)
            owned.update(self.own_many(free[at : at + room]))
            at += room
        return {job: owned[job] for job in jobs if job in owned}

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
        """Give back every lease held (a supervisor that stops), in one ``release_many``;
        a release that fails is only logged, as in ``release``."""
        leases = list(self._leases.values())
        self._leases.clear()
        if not leases:
            return
        try:
            self.store.release_many(leases)
        except Exception as exc:
            log.debug("release of %d leases failed: %s", len(leases), exc)
