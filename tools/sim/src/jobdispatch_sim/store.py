"""The crash-model record store: :class:`MemoryRecords` as a durable store on another machine.

The wrapped store *is* the disk: it outlives every supervisor crash, so "a process crash loses
nothing committed" holds by construction. What the wrapper adds is what can go wrong between a
process and a durable store, and only that:

* an append refused before it applies (``Unavailable``): nothing changed;
* an append applied whose reply is lost: the writer sees ``Unavailable`` (and lives on) or
  crashes, yet the events are committed, exactly as with a synced store whose reply was cut;
* a power cut while an append is in flight: the append was not synced, so it is lost, and every
  supervisor process dies;
* an acquire or renew applied whose reply is lost;
* a read that fails.

Every commit is noted in the run's timeline with the token it was stored under, for the
checkers. Nothing else is changed: the conditional append, fencing and leases are the real
store's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from jobdispatch.errors import LeaseLost, NotFound, Unavailable, Unreadable
from jobdispatch.records import rules, store
from jobdispatch.records.events import AnyEvent, Header, View
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.types import JobID

from jobdispatch_sim.faults import Crash, PowerCut

if TYPE_CHECKING:
    from jobdispatch_sim.world import World


class SimStore:
    """A :class:`~jobdispatch.records.store.Records` over ``inner`` with the faults above."""

    def __init__(self, inner: MemoryRecords, world: World) -> None:
        self.inner = inner
        self.world = world

    def _faulty(self) -> bool:
        return self.world.faults_on and self.world.current.proc is not None

    def _draw(self, *faults: tuple[float, str, Callable[[], BaseException]]) -> None:
        """Draw each of ``faults`` (its probability, the case it covers, how to make what it
        raises) in order and raise the first that happens; a process outside fault injection
        draws none. The order is part of the seed's story: the same calls draw the same
        faults."""
        if not self._faulty():
            return
        for probability, case, fault in faults:
            if self.world.chance(probability):
                if case:
                    self.world.cover(case)
                raise fault()

    def _before_commit(self, cut: str, append: str) -> None:
        """A commit cut by a power cut or refused by the store: nothing of it lands."""
        opts = self.world.opts
        self._draw(
            (opts.p_power_cut, "power cut with a commit in flight", lambda: PowerCut(cut)),
            (opts.p_store_unavailable, "store append refused", lambda: _refused(append)),
        )

    def _after_commit(self, crash: str, append: str) -> None:
        """A commit applied, then its writer crashed or its reply was lost: all of it landed."""
        opts = self.world.opts
        self._draw(
            (opts.p_store_crash_after, "crash after a commit applied", lambda: Crash(crash)),
            (opts.p_store_reply_lost, "commit applied, reply lost", lambda: _lost(append)),
        )

    def _reply_lost(self, what: str, case: str = "") -> None:
        """A call that applied, its reply to ``what`` lost (``case`` names it for coverage)."""
        self._draw((self.world.opts.p_store_reply_lost, case, lambda: _lost(what)))

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> store.Created:
        created = self.inner.create(header, events, idempotency_key=idempotency_key)
        if created.created:
            self.world.note_created(header)
        return created

    def read(self, job: JobID) -> View:
        p = self.world.opts.p_store_unavailable
        self._draw((p, "store read failed", lambda: _refused(f"read of {job}")))
        return self.inner.read(job)

    def read_many(self, jobs: Sequence[JobID]) -> tuple[store.ReadAnswer, ...]:
        """Each job read as :meth:`read` reads it, with its own chance of failing: a failed
        read is that job's answer (Unavailable), the others are read. So a batch draws what
        the same reads one by one drew, in the same order."""
        return store.read_each(
            self.read, rules.read_batch(jobs), (NotFound, Unreadable, Unavailable)
        )

    def append(
        self,
        job: JobID,
        events: Sequence[AnyEvent],
        *,
        expect_revision: int,
        owner: store.Lease | None = None,
    ) -> int:
        world = self.world
        world.point("store.before", job, events)
        self._before_commit(f"power cut during a commit to {job}", f"append to {job}")
        try:
            revision = self.inner.append(job, events, expect_revision=expect_revision, owner=owner)
        except LeaseLost as exc:
            if owner is not None:
                world.cover("lease lost mid-step")
                world.note("fenced", f"{owner.holder} (token {owner.token}): {exc}")
            raise
        world.note_commit(job, revision - len(events) + 1, events, owner)
        self._after_commit(f"crash after committing to {job} r{revision}", f"an append to {job}")
        return revision

    def append_many(
        self, requests: Sequence[store.AppendRequest]
    ) -> tuple[int | store.Refusal, ...]:
        """The batch as one commit, with one commit's faults: refused or cut by a power cut
        before it applies (nothing of it lands), or applied with its reply lost or its writer
        crashed after it (all of it lands). A batch of one draws exactly the faults ``append``
        draws, so a pass of one job runs the same with either."""
        world = self.world
        if not requests:
            return self.inner.append_many(requests)
        # One commit, so one moment before it where its writer may crash or pause (a point
        # per part would make a batch of a thousand a thousand times likelier to fail).
        events = [e for request in requests for e in request.events]
        world.point("store.before", requests[0].job, events)
        batch = f"a batch of {len(requests)}"
        self._before_commit(f"power cut during {batch} commits", f"{batch} appends")
        answers = self.inner.append_many(requests)
        for request, answer in zip(requests, answers, strict=True):
            if isinstance(answer, int):
                first = answer - len(request.events) + 1
                world.note_commit(request.job, first, request.events, request.owner)
            elif isinstance(answer, LeaseLost) and request.owner is not None:
                world.cover("lease lost mid-step")
                world.note(
                    "fenced", f"{request.owner.holder} (token {request.owner.token}): {answer}"
                )
        # A batch every part of which was refused applied nothing, so (as for a refused
        # append) there is no applied commit whose reply could be lost.
        if any(isinstance(answer, int) for answer in answers):
            self._after_commit(f"crash after committing {batch}", f"{batch} appends")
        return answers

    def list(self, filter: store.ListFilter | None = None) -> Iterator[JobID]:
        return self.inner.list(filter)

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        leases = self.inner.acquire_many(jobs, holder, ttl)
        self._reply_lost(f"acquiring {len(jobs)} jobs", "lease granted, reply lost")
        return leases

    def renew_many(
        self, leases: Sequence[store.Lease], ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        renewed = self.inner.renew_many(leases, ttl)
        self._reply_lost(f"renewing {len(leases)} leases")
        return renewed

    def release_many(self, leases: Sequence[store.Lease]) -> None:
        self.inner.release_many(leases)

    def acquire(self, job: JobID, holder: str, ttl: timedelta) -> store.Lease:
        lease = self.inner.acquire(job, holder, ttl)
        self._reply_lost(f"acquiring {job}", "lease granted, reply lost")
        return lease

    def renew(self, lease: store.Lease, ttl: timedelta) -> store.Lease:
        renewed = self.inner.renew(lease, ttl)
        self._reply_lost(f"renewing {lease.job}")
        return renewed

    def release(self, lease: store.Lease) -> None:
        self.inner.release(lease)

    def announce(
        self, member: str, ttl: timedelta, measured: store.Measured | None = None
    ) -> tuple[str, ...]:
        return self.inner.announce(member, ttl, measured)

    def withdraw(self, member: str) -> None:
        self.inner.withdraw(member)

    def close(self) -> None:
        self.inner.close()


def _refused(what: str) -> Unavailable:
    return Unavailable(f"record store unavailable ({what})")


def _lost(what: str) -> Unavailable:
    return Unavailable(f"record store: the reply to {what} was lost")
