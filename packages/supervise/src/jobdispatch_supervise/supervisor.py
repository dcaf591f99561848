"""The supervisor's loop: polling and sleeping around ownership and the step executor.

``run(job)`` supervises one job until it settles; ``serve(filter)`` supervises every job of a
store it can own, with one backend query per poll for all of them. Both stop acting on a job
the moment its lease is lost, and ``stop()`` ends them cleanly from another thread.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import DispatchError, Invalid, NotFound, ReadOnly, Unavailable, Unreachable
from jobdispatch.job import fold
from jobdispatch.records.store import Lease, ListFilter, Records
from jobdispatch.spi import Backend, Discovery, find_all
from jobdispatch.steps import Wait
from jobdispatch.validate import MAX_DURATION

from jobdispatch_supervise.executor import Executor
from jobdispatch_supervise.ownership import Ownership, fair_share
from jobdispatch_supervise.sinks import LogSink, Sink

__all__ = ["Supervisor"]

log = logging.getLogger("jobdispatch.supervise")


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Supervisor:
    """Carries out what ``next`` returns for the jobs it owns.

    Args:
        backend: the adapter's backend.
        store: the record store the jobs live in.
        clock: where time comes from (the simulator passes its own).
        sinks: where escalations go; the log by default.
        poll: the longest wait between two looks at a job, in seconds.
        lease_ttl: how long ownership lasts without renewal; renewed at half of it.
        holder: this supervisor's identity in leases and in the record.
        sleep: how to wait (an Event's wait by default, so ``stop`` interrupts it).
        sweep_every: how often ``serve`` looks for residual objects of settled jobs.
        residual_horizon: how long after an unresolved attempt its object is still looked for.
        call_concurrency: the most backend calls ``serve`` makes at once in one round, from a
            pool of threads; capped by what the adapter declares (``ConcurrentCalls``), so an
            adapter that declares nothing gets its calls one at a time.

    Raises Invalid at construction for a poll or a lease ttl that is not positive or is longer
    than the core's MAX_DURATION (a NaN poll included), and for a call concurrency that is not
    an integer of at least 1 (or an adapter declaring one that is not).
    """

    def __init__(
        self,
        backend: Backend,
        store: Records,
        *,
        clock: Clock = system_clock,
        sinks: Sequence[Sink] | None = None,
        poll: float = 0.5,
        lease_ttl: timedelta = timedelta(seconds=30),
        holder: str | None = None,
        sleep: Callable[[float], object] | None = None,
        sweep_every: timedelta = timedelta(minutes=5),
        residual_horizon: timedelta = timedelta(hours=24),
        call_concurrency: int = 8,
    ) -> None:
        # Checked here, not when the first lease is needed: a supervisor that cannot work must
        # say so before it serves anything. NaN passes every comparison, so it is named.
        if not math.isfinite(poll) or not 0 < poll <= MAX_DURATION.total_seconds():
            msg = (
                "a supervisor's poll must be a positive number of seconds, at most "
                f"{MAX_DURATION.total_seconds():.0f}, got {poll}"
            )
            raise Invalid(msg)
        if not timedelta(0) < lease_ttl <= MAX_DURATION:
            msg = (
                f"a supervisor's lease ttl must be positive and at most {MAX_DURATION.days} "
                f"days, got {lease_ttl}"
            )
            raise Invalid(msg)
        self.backend = backend
        self.store = store
        self.clock = clock
        self.poll = poll
        self.lease_ttl = lease_ttl
        self.holder = holder or _holder_id()
        self.executor = Executor(
            backend,
            store,
            clock=clock,
            holder=self.holder,
            sinks=list(sinks) if sinks is not None else [LogSink()],
            concurrency=call_concurrency,
        )
        self.sweep_every = sweep_every
        self.residual_horizon = residual_horizon
        self._stopping = threading.Event()
        self._sleep = sleep or self._stopping.wait
        #: The leases this supervisor holds: the same piece the simulator's processes run.
        self.ownership = Ownership(store, self.holder, lease_ttl, clock)
        #: Jobs whose record this process cannot read or fold: reported once, then left alone
        #: (a record only grows, so it never becomes readable here; a newer version may take it).
        self._unreadable: set[str] = set()
        #: The live members at the last announcement (spec 0004 D7).
        self._last_members: tuple[str, ...] = (self.holder,)

    # ---------------------------------------------------------------- loops

    def _wait_for(self, wake: datetime | None) -> None:
        delay = self.poll
        if wake is not None:
            delay = max(0.0, min(delay, (wake - self.clock()).total_seconds()))
        self._sleep(delay)

    def run(self, job: str) -> None:
        """Supervise ``job`` until it has settled (or :meth:`stop` is called).

        Raises NotFound for a job the store does not know.
        """
        self.store.read(job)  # NotFound now, not later
        try:
            while not self._stopping.is_set():
                lease = self.ownership.own(job)
                if lease is None:
                    self._wait_for(None)  # another supervisor owns it; wait for its lease
                    continue
                try:
                    result = self.executor.run_pass(job, lease)
                except (Unreachable, Unavailable) as exc:
                    # Transient by definition: nothing was decided on an answer never given.
                    log.warning("job %s: %s; trying again", job, exc)
                    self._wait_for(None)
                    continue
                if result.settled:
                    return
                if result.conflict:
                    # Lost a race or the lease: forget the lease so ownership is checked anew.
                    self.ownership.forget(job)
                    continue
                if result.step is None or isinstance(result.step, Wait):
                    self._wait_for(result.wake)
        finally:
            self.ownership.release(job)

    def residual_jobs(self) -> list[str]:
        """Settled jobs that may still have an object to sweep: an attempt whose outcome stayed
        unknown less than ``residual_horizon`` ago, or a recorded object not yet done.

        It folds every settled record, so it runs once per ``sweep_every``, not every poll.
        """
        now = self.clock()
        out = []
        for job in self.store.list(ListFilter(settled=True)):
            try:
                folded = fold(self.store.read(job), now)
            except (NotFound, Invalid) as exc:
                log.warning("residual sweep skips job %s: %s", job, exc)
                continue
            recent = any(now - a.started_at < self.residual_horizon for a in folded.residuals())
            if recent or any(not o.done for o in folded.objects.values()):
                out.append(job)
        return out

    def serve(self, filter: ListFilter | None = None) -> None:
        """Supervise this supervisor's fair share of the store's unsettled jobs (spec 0004
        D7: the live supervisors split them evenly) until :meth:`stop`, one backend query
        per poll for all of them where the adapter can; every ``sweep_every``, settled jobs
        with residual attempts join a poll, so late objects of lost Start replies are stopped."""
        wanted = filter or ListFilter(settled=False)
        swept: datetime | None = None
        while not self._stopping.is_set():
            jobs = [j for j in self.store.list(wanted) if j not in self._unreadable]
            share = fair_share(len(jobs), self._members(), self.holder)
            owned = self.ownership.own_share(jobs, share)
            if swept is None or self.clock() - swept >= self.sweep_every:
                swept = self.clock()
                # Outside the share: a sweep is one pass per settled job (its lease is let go
                # after it), and counting these would move every share on each sweep's poll.
                residual = [j for j in self.residual_jobs() if j not in jobs]
                owned.update(self.ownership.own_many(residual))
            try:
                found = find_all(self.backend, list(owned)) if owned else {}
            except (Unreachable, Unavailable) as exc:
                log.warning("the backend did not answer: %s; trying again", exc)
                self._wait_for(None)
                continue
            wake = self._rounds(owned, found)
            self._wait_for(wake)
        self.ownership.release_all()
        try:
            self.store.withdraw(self.holder)
        except DispatchError as exc:
            log.debug("withdrawing %s failed: %s; its announcement lapses", self.holder, exc)

    def _members(self) -> tuple[str, ...]:
        """The live supervisors, this one included: each announces itself in the store every
        poll for one lease ttl, so a dead one drops out within one ttl, as its leases do. A
        store that cannot answer leaves the last members (at first, this one alone: take
        everything, as a lone supervisor would) rather than stopping the loop."""
        try:
            self._last_members = self.store.announce(self.holder, self.lease_ttl)
        except (Unavailable, ReadOnly) as exc:
            log.warning("cannot announce %s as a member: %s", self.holder, exc)
        return self._last_members

    def _rounds(self, owned: dict[str, Lease], found: dict[str, Discovery]) -> datetime | None:
        """Execute steps for every owned job until each has to wait, in rounds: each round is
        one batch of passes (:meth:`Executor.run_batch`: every decision committed in one
        batch, the calls made, every answer committed in one batch). The first round uses the
        poll's shared discovery; a job that executed a step joins the next round, which looks
        again because the step changed something. Answers the earliest wake asked for."""
        wake: datetime | None = None
        batch: list[tuple[str, Lease, Discovery | None]] = [
            (job, lease, found.get(job)) for job, lease in owned.items()
        ]
        while batch and not self._stopping.is_set():
            results = self.executor.run_batch(batch)
            again: list[str] = []
            for (job, _, _), result in zip(batch, results, strict=True):
                if result.error is not None:
                    self._failed(job, result.error)
                elif result.settled:
                    self.ownership.release(job)
                elif result.conflict:
                    # Lost a race or the lease: forget the lease so ownership is checked anew.
                    self.ownership.forget(job)
                elif result.step is None or isinstance(result.step, Wait):
                    if result.wake is not None:
                        wake = result.wake if wake is None else min(wake, result.wake)
                else:
                    again.append(job)
            batch = [(job, lease, None) for job, lease in self.ownership.own_many(again).items()]
        return wake

    def _failed(self, job: str, exc: Exception) -> None:
        """What ended one job's pass in a round: that job's problem, the others go on; an
        error of another kind ends ``serve`` as it would have in a pass of its own."""
        if isinstance(exc, NotFound):
            return
        if isinstance(exc, (Unreachable, Unavailable)):
            log.warning("job %s: %s; trying again", job, exc)
            return
        if isinstance(exc, Invalid):
            # Unreadable (damaged, or a newer version wrote it) or not folding: one
            # job's problem. Serve the others; let its lease go for whoever can read it.
            log.error("job %s is left unsupervised: %s", job, exc)
            self._unreadable.add(job)
            self.ownership.release(job)
            return
        raise exc

    def stop(self) -> None:
        """Stop after the step under way; leases are released."""
        self._stopping.set()
