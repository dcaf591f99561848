"""The supervisor's loop: polling and sleeping around ownership and the step executor.

``run(job)`` supervises one job until it settles; ``serve(filter)`` supervises every job of a
store it can own, with one backend query per poll for all of them. Both stop acting on a job
the moment its lease is lost, and ``stop()`` ends them cleanly from another thread. ``serve``
works in rounds of batches (:meth:`Executor.run_batch`, spec 0004 D2) over every job it owns.

How often they poll is the adapter's (its :class:`~jobdispatch.spi.Pacing`: Slurm every 30 s,
never more often than its floor), jittered, and cut short by a step's wake time or by news on
the adapter's Watcher; ``on_observed`` hands each poll's observations to whoever reports on the
jobs, so a report costs the scheduler nothing more.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import DispatchError, Invalid, NotFound, ReadOnly, Unavailable, Unreachable
from jobdispatch.job import fold
from jobdispatch.progress import ProgressReader
from jobdispatch.records import events as ev
from jobdispatch.records.store import Lease, ListFilter, Measured, Records
from jobdispatch.spi import Backend, Discovery, OutputGrowthReader, find_all, pacing_of
from jobdispatch.steps import (
    Authorize,
    Canonical,
    Escalate,
    Observe,
    Outcome,
    RecordProgress,
    Settle,
    Step,
    VerifiedStopped,
    Wait,
)
from jobdispatch.types import Actor
from jobdispatch.validate import MAX_DURATION

from jobdispatch_supervise.executor import Executor, Pass
from jobdispatch_supervise.heap import COLLECT_EVERY, HeapKeeper
from jobdispatch_supervise.heartbeat import Heartbeat
from jobdispatch_supervise.outage import AWAY, WatchedStore
from jobdispatch_supervise.outbox import Outbox
from jobdispatch_supervise.ownership import Ownership, fair_share
from jobdispatch_supervise.progress import ProgressPoll
from jobdispatch_supervise.sinks import LogSink, Sink
from jobdispatch_supervise.watching import Watching

__all__ = ["Supervisor"]

log = logging.getLogger("jobdispatch.supervise")

#: The least lease left for a notice of a job to be sent: more than a sink's longest timeout.
SEND_MARGIN = timedelta(seconds=12)
#: How long ``run`` waits, once its job settled, for the job's last notices to go.
SETTLE_FLUSH = 10.0


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Supervisor:
    """Carries out what ``next`` returns for the jobs it owns.

    Args:
        backend: the adapter's backend.
        store: the record store the jobs live in.
        clock: where time comes from (the simulator passes its own).
        sinks: where escalations go; the log by default.
        poll: the longest wait between two looks at a job, in seconds; by default the
            adapter's poll interval (``Pacing.interval``). Never below the poll floor.
        poll_floor: the least time between two polls, raised above the adapter's floor (a
            site's setting); never lowered.
        draw: the randomness that jitters each poll, numbers in [0, 1) (a seeded source makes
            the schedule repeatable; the simulator's clock and sleep go with one).
        on_observed: called with each job and what this supervisor's own poll showed of it,
            after the job's passes, from the supervising thread; a report built from it asks
            the backend nothing (``Observer.get(job, discovery)``). Its errors are logged.
        watch_limit: the most jobs ``serve`` follows on the adapter's Watcher at once (where
            its pacing says a watch brings news early); ``run`` follows its one job.
        lease_ttl: how long ownership lasts without renewal; renewed between a third and a
            half of it, each job at its own point (:class:`Ownership`).
        holder: this supervisor's identity in leases and in the record.
        sleep: how to wait (an Event's wait by default, so ``stop`` interrupts it).
        sweep_every: how often ``serve`` looks for residual objects of settled jobs.
        residual_horizon: how long after an unresolved attempt its object is still looked for.
        call_concurrency: the most backend calls ``serve`` makes at once in one round, from a
            pool of threads; capped by what the adapter declares (``ConcurrentCalls``), so an
            adapter that declares nothing gets its calls one at a time.
        freeze_heap: whether ``serve`` keeps the garbage collector's full passes out of its
            polls (:mod:`jobdispatch_supervise.heap`): the heap frozen after each poll, and
            collected fully between two polls every ``full_collection_every``.
        full_collection_every: the longest time garbage in reference cycles waits.
        progress: where the progress of jobs that name a progress source is read (one listing
            per checkpoint root per poll, :mod:`jobdispatch_supervise.progress`). None: such
            jobs are blind here (recorded, shown, escalated past their bound; never stalled).
        cluster: the cluster's name, carried by every notice.
        heartbeat: pinged after every poll that saw the store and the cluster (never after
            a blind one), from a thread of its own.
        link: a job's dashboard page, for notices, when one is configured.

    Escalations and lifecycle notices go through an :class:`Outbox`: each pass offers the
    record it read, and one thread per sink sends and records, so no delivery delays a poll.

    Raises Invalid at construction for a poll or a lease ttl that is not positive or is longer
    than the core's MAX_DURATION (a NaN poll included), for a poll below the poll floor or a
    floor below the adapter's (or above ``MAX_POLL_FLOOR``), and for a call concurrency that is
    not an integer of at least 1 (or an adapter declaring one that is not).
    """

    def __init__(
        self,
        backend: Backend,
        store: Records,
        *,
        clock: Clock = system_clock,
        sinks: Sequence[Sink] | None = None,
        poll: float | None = None,
        poll_floor: float | None = None,
        lease_ttl: timedelta = timedelta(seconds=30),
        holder: str | None = None,
        sleep: Callable[[float], object] | None = None,
        sweep_every: timedelta = timedelta(minutes=5),
        residual_horizon: timedelta = timedelta(hours=24),
        draw: Callable[[], float] | None = None,
        on_observed: Callable[[str, Discovery], object] | None = None,
        watch_limit: int = 16,
        call_concurrency: int = 8,
        freeze_heap: bool = True,
        full_collection_every: timedelta = COLLECT_EVERY,
        progress: ProgressReader | None = None,
        cluster: str = "",
        heartbeat: Heartbeat | None = None,
        link: Callable[[str], str | None] | None = None,
    ) -> None:
        # Checked here, not when the first lease is needed: a supervisor that cannot work must
        # say so before it serves anything. Pacing names NaN, infinities and out-of-range
        # values (NaN passes every comparison, and a NaN poll would be a busy loop).
        try:
            self.pacing = pacing_of(backend).for_site(interval=poll, floor=poll_floor)
        except Invalid as exc:
            msg = f"a supervisor's poll: {exc.message}"
            raise Invalid(msg) from None
        if isinstance(watch_limit, bool) or not isinstance(watch_limit, int) or watch_limit < 0:
            msg = f"a supervisor's watch_limit must be a count of jobs, got {watch_limit!r}"
            raise Invalid(msg)
        if not timedelta(0) < lease_ttl <= MAX_DURATION:
            msg = (
                f"a supervisor's lease ttl must be positive and at most {MAX_DURATION.days} "
                f"days, got {lease_ttl}"
            )
            raise Invalid(msg)
        self.backend = backend
        #: The store, watched: an outage of it is logged once, and its end once.
        self.store = WatchedStore(store, clock)
        self.clock = clock
        #: The interval this supervisor polls at (before jitter).
        self.poll = self.pacing.interval
        self.lease_ttl = lease_ttl
        self.holder = holder or _holder_id()
        self.heartbeat = heartbeat
        #: Within a renewed lease's life (renewed with half of it left, or more) whatever the ttl.
        self._send_margin = min(SEND_MARGIN, lease_ttl / 4)
        self.outbox = Outbox(
            self.store,
            list(sinks) if sinks is not None else [LogSink()],
            by=Actor.supervisor(self.holder),
            clock=clock,
            cluster=cluster,
            sender=self.holder,
            owns=self._may_send,
            link=link,
        )
        self.executor = Executor(
            backend,
            self.store,
            clock=clock,
            holder=self.holder,
            sinks=self.outbox.sinks,
            concurrency=call_concurrency,
            outbox=self.outbox,
            poll=timedelta(seconds=self.pacing.interval),
        )
        self.sweep_every = sweep_every
        self.heap = HeapKeeper(clock, collect_every=full_collection_every, enabled=freeze_heap)
        self.residual_horizon = residual_horizon
        self._stopping = threading.Event()
        #: Set by :meth:`wake` (and by :meth:`stop`): ends the sleep after the poll floor.
        self._woken = threading.Event()
        self._sleep = sleep
        self._draw = draw or random.Random(secrets.randbits(64)).random
        self.on_observed = on_observed
        self.progress = progress
        self._unreadable_roots: set[str] = set()  # progress roots an earlier poll could not list
        self._watching = Watching(
            backend,
            self.wake,
            pause=max(self.pacing.floor, 0.01),
            stopping=self._stopping,
            limit=watch_limit if self.pacing.watch else 0,
        )
        #: The leases this supervisor holds: the same piece the simulator's processes run.
        self.ownership = Ownership(self.store, self.holder, lease_ttl, clock)
        #: Jobs whose record this process cannot read or fold: reported once, then left alone
        #: (a record only grows, so it never becomes readable here; a newer version may take it).
        self._unreadable: set[str] = set()
        #: Settled jobs the last sweep found owing something but could not lease (a supervisor
        #: killed just after its job settled holds the lease until it lapses), and when to ask
        #: for them again: within a lease's life, not a whole ``sweep_every`` later.
        self._refused_residual: list[str] = []
        self._residual_retry = clock()
        #: The live members at the last announcement (spec 0004 D7).
        self._last_members: tuple[str, ...] = (self.holder,)
        #: What this supervisor measured of its polls, published with each announcement in
        #: the shared members list (spec 0004 D7, read by the metrics endpoint): None until a
        #: poll has completed.
        self.measured: Measured | None = None

    # ---------------------------------------------------------------- notices

    def _may_send(self, job: str) -> bool:
        """Whether this supervisor may send ``job``'s notices now: it holds the job's lease,
        with at least SEND_MARGIN of it left (a send takes at most a sink's timeout)."""
        lease = self.ownership.held(job)
        return lease is not None and lease.expires - self.clock() > self._send_margin

    def _beat(self) -> None:
        if self.heartbeat is not None:
            self.heartbeat.beat(self.holder, self.clock())

    def close(self, timeout: float = 5.0) -> None:
        """Let queued notices go (at most ``timeout`` seconds), then stop the sink threads and
        the heartbeat. What is not sent stays owed by the record."""
        self.outbox.close(timeout)
        if self.heartbeat is not None:
            self.heartbeat.stop()

    # ---------------------------------------------------------------- loops

    def _wait_for(self, wake: datetime | None) -> None:
        """Sleep until the next poll: the jittered interval, or sooner when a step is due
        (``wake``) or :meth:`wake` is called, but never less than the floor."""
        until = None if wake is None else (wake - self.clock()).total_seconds()
        delay = self.pacing.delay(self._draw(), until)
        if self._sleep is not None:
            self._sleep(delay)
            return
        floor = min(delay, self.pacing.floor)
        if self._stopping.wait(floor):
            return
        self._woken.wait(delay - floor)
        self._woken.clear()

    def wake(self) -> None:
        """Poll now (or once the floor has passed since the last poll) instead of at the end
        of the interval: news from a Watcher, or from a command that changed a job."""
        self._woken.set()

    def _progress_poll(self) -> ProgressPoll:
        """A poll's readings of progress: the injected progress source for checkpoint roots,
        and this supervisor's adapter for output growth, where it can see it."""
        growth = self.backend if isinstance(self.backend, OutputGrowthReader) else None
        return ProgressPoll(self.progress, self.holder, self._unreadable_roots, growth)

    def _observed(self, job: str, discovery: Discovery | None) -> None:
        if self.on_observed is None or discovery is None:
            return
        try:
            self.on_observed(job, discovery)
        except Exception as exc:  # a report's trouble must not stop the supervision
            log.warning("reporting on job %s failed: %s", job, exc)

    def run(self, job: str) -> None:
        """Supervise ``job`` until it has settled (or :meth:`stop` is called).

        Raises NotFound for a job the store does not know.
        """
        self.store.read(job)  # NotFound now, not later
        self._watching.follow([job])
        # Each poll starts with a Find made here, so that what it showed can be reported; the
        # passes after it reuse it while they only commit to the record (as serve's rounds do),
        # and after a call the executor looks again itself.
        polled = True
        discovery: Discovery | None = None
        readings = self._progress_poll()
        try:
            while not self._stopping.is_set():
                try:
                    lease = self.ownership.own(job)
                    if lease is None:
                        self._wait_for(None)  # another supervisor owns it; wait for its lease
                        polled = True
                        continue
                    if polled:
                        discovery, polled = self.backend.find(job), False
                        readings = self._progress_poll()
                    result = self.executor.run_batch([(job, lease, discovery)], readings)[0]
                    if result.error is not None:
                        raise result.error
                    if discovery is not None:
                        self._observed(job, discovery)
                        self._beat()
                    if not _record_only(result):
                        discovery = None
                except (Unreachable, Unavailable) as exc:
                    # Transient by definition: nothing was decided on an answer never given.
                    # The store's own outage is logged once, by the store's watch.
                    if not self.store.told(exc):
                        log.warning("job %s: %s; trying again", job, exc)
                    self._wait_for(None)
                    polled = True
                    continue
                if result.settled:
                    # Its last notices go while the lease still stands (at most the bound).
                    self.outbox.flush(SETTLE_FLUSH)
                    return
                if result.conflict:
                    # Lost a race or the lease: forget the lease so ownership is checked anew.
                    self.ownership.forget(job)
                    polled = True
                    continue
                if result.step is None or isinstance(result.step, Wait):
                    self._wait_for(result.wake)
                    polled = True
        finally:
            self._watching.stop()
            self.ownership.release(job)

    def residual_jobs(self) -> list[str]:
        """Settled jobs that may still have an object to sweep: an attempt whose outcome stayed
        unknown less than ``residual_horizon`` ago, or a recorded object not yet done; and
        settled jobs whose record still owes a sink a notice (their supervisor stopped first).

        It folds every settled record, so it runs once per ``sweep_every``, not every poll.
        """
        now = self.clock()
        out = []
        for job in self.store.list(ListFilter(settled=True)):
            try:
                view = self.store.read(job)
                folded = fold(view, now)
            except (NotFound, Invalid) as exc:
                log.warning("residual sweep skips job %s: %s", job, exc)
                continue
            if not folded.settled:
                # Listed as settled, so no supervisor serves it, though its record says it is
                # not: a damaged index, never to be left silent.
                log.error(
                    "job %s is listed as settled but its record (revision %d) is not: no "
                    "supervisor serves it; the store's index of settled jobs is damaged",
                    job,
                    folded.revision,
                )
                continue
            recent = any(now - a.started_at < self.residual_horizon for a in folded.residuals())
            if recent or any(not o.done for o in folded.objects.values()):
                out.append(job)
            elif (
                folded.settled_at is not None
                and now - folded.settled_at < self.residual_horizon
                and self.outbox.owes(view)
            ):
                # Its supervisor stopped before its last notices went: serve it until they do.
                out.append(job)
        return out

    def serve(self, filter: ListFilter | None = None) -> None:
        """Supervise this supervisor's fair share of the store's unsettled jobs (spec 0004
        D7: the live supervisors split them evenly) until :meth:`stop`, one backend query
        per poll for all of them where the adapter can; every ``sweep_every``, settled jobs
        with residual attempts join a poll, so late objects of lost Start replies are stopped."""
        wanted = filter or ListFilter(settled=False)
        swept: datetime | None = None
        try:
            while not self._stopping.is_set():
                swept = self._poll(wanted, swept)
        finally:
            self.heap.stop()
        self._watching.stop()
        # While the leases still stand: what is queued may go (what cannot stays owed).
        self.outbox.close(SETTLE_FLUSH)
        self.ownership.release_all()
        try:
            self.store.withdraw(self.holder)
        except DispatchError as exc:
            log.debug("withdrawing %s failed: %s; its announcement lapses", self.holder, exc)

    def _poll(self, wanted: ListFilter, swept: datetime | None) -> datetime | None:
        """One poll of :meth:`serve` and the wait after it; answers when it last swept.

        A store that does not answer (its server restarting, failing over, cut off) ends the
        poll before anything is decided or called, however long it lasts: the next poll
        starts again from the store's list, so the first one after the store answers works
        from the store's view (leases renewed, or lapsed and taken anew under a greater token),
        never from this process's memory of the time before."""
        started = time.perf_counter()
        try:
            jobs = [j for j in self.store.list(wanted) if j not in self._unreadable]
            share = fair_share(len(jobs), self._members(), self.holder)
            outbox = self.outbox
            with outbox.guard:  # no lease goes while a lane sends under it
                owned = self.ownership.own_share(jobs, share, busy=outbox.in_flight)
            # Jobs (settled ones, mostly) whose notices are still queued here stay owned.
            waiting = [j for j in outbox.jobs() if j not in owned]
            if waiting:
                owned.update(self.ownership.own_many(waiting))
            if swept is None or self.clock() - swept >= self.sweep_every:
                # Outside the share: a sweep is one pass per settled job (its lease is let go
                # after it), and counting these would move every share on each sweep's poll.
                residual = [j for j in self.residual_jobs() if j not in jobs]
                owned.update(self._own_residual(residual))
                swept = self.clock()
            elif self._refused_residual and self.clock() >= self._residual_retry:
                again = [j for j in self._refused_residual if j not in jobs]
                owned.update(self._own_residual(again))
        except AWAY:
            self._wait_for(None)  # the store's watch logged it (once per outage)
            return swept
        self._watching.follow(owned)
        self._woken.clear()  # news from here on wakes the coming sleep
        try:
            found = find_all(self.backend, list(owned)) if owned else {}
        except (Unreachable, Unavailable) as exc:
            log.warning("the backend did not answer: %s; trying again", exc)
            self._wait_for(None)
            return swept
        wake, sighted = self._rounds(owned, found)
        self._measure(started)
        if sighted:
            self._beat()
        self.heap.between_polls()
        self._wait_for(wake)
        return swept

    def _measure(self, started: float) -> None:
        """Keep what this poll measured for the next announcement: its wall time from the
        store's list to its last round, and its longest commit (the previous poll's stands
        when this one committed nothing)."""
        commit = self.executor.take_commit_seconds()
        previous = self.measured.commit_seconds if self.measured is not None else None
        self.measured = Measured(
            poll_seconds=time.perf_counter() - started,
            commit_seconds=commit if commit is not None else previous,
        )

    def _members(self) -> tuple[str, ...]:
        """The live supervisors, this one included: each announces itself in the store every
        poll for one lease ttl, so a dead one drops out within one ttl, as its leases do. A
        store that cannot be written (read-only) leaves the last members (at first, this one
        alone: take everything, as a lone supervisor would); one that does not answer ends the
        poll (:meth:`_poll`)."""
        try:
            self._last_members = self.store.announce(self.holder, self.lease_ttl, self.measured)
        except ReadOnly as exc:
            log.warning("cannot announce %s as a member: %s", self.holder, exc)
        return self._last_members

    def _rounds(
        self, owned: dict[str, Lease], found: dict[str, Discovery]
    ) -> tuple[datetime | None, bool]:
        """Execute steps for every owned job until each has to wait, in rounds: each round is
        one batch of passes (:meth:`Executor.run_batch`: every decision committed in one
        batch, the calls made, every answer committed in one batch); a job that executed a
        step joins the next round. Answers the earliest wake asked for.

        The first round uses the poll's shared discovery, and so does a job's next round
        while each of its steps only committed to the record (an observation, an outcome:
        nothing changed on the backend); once a step of the job has called the backend, the
        poll's Find is never used for it again (it lacks, say, the object a Start made): the
        next round starts with one batched Find (``find_all``) for every job whose step
        called, made after those calls, and that one is reused in turn. So news costs the
        scheduler nothing beyond the poll's query, and a round after calls one query however
        many jobs it has. Each job whose rounds ended without an error is then handed to
        ``on_observed`` with the latest Find of it.

        Likewise a job whose step only committed its decision (a :class:`Pass` with a
        ``view``: progress evidence, say) is not read again for its next round: the record is
        what the pass read plus what it committed. In a poll where every job's progress
        interval ends, that is one ``read_many`` of every job fewer.

        Answers the earliest wake, and whether the poll saw everything it asked about (no
        job's pass ended because the store or the backend did not answer): only such a poll
        is followed by a heartbeat."""
        wake: datetime | None = None
        sighted = True
        fresh = dict(found)  # job -> its latest Find, while no step of the job called out since
        seen = dict(found)  # job -> its latest Find, for on_observed
        failed: set[str] = set()
        known: dict[str, ev.View] = {}  # job -> its record as its last pass left it, if known
        batch: list[tuple[str, Lease, Discovery | None]] = [
            (job, lease, fresh.get(job)) for job, lease in owned.items()
        ]
        readings = self._progress_poll()  # one listing per root, one look per job, per poll
        while batch and not self._stopping.is_set():
            results = self.executor.run_batch(batch, readings, known)
            again: list[str] = []
            known = {}
            for (job, _, _), result in zip(batch, results, strict=True):
                if not _record_only(result):
                    fresh.pop(job, None)
                if result.view is not None:
                    known[job] = result.view
                if result.error is not None:
                    failed.add(job)
                    if isinstance(result.error, (Unreachable, Unavailable)):
                        sighted = False
                    self._failed(job, result.error)
                elif result.settled:
                    with self.outbox.guard:
                        if not self.outbox.in_flight(job) and job not in self.outbox.jobs():
                            self.ownership.release(job)
                elif result.conflict:
                    # Lost a race or the lease: forget the lease so ownership is checked anew.
                    self.ownership.forget(job)
                elif result.step is None or isinstance(result.step, Wait):
                    if result.wake is not None:
                        wake = result.wake if wake is None else min(wake, result.wake)
                else:
                    again.append(job)
            leases = self.ownership.own_many(again)
            stale = [job for job in leases if job not in fresh]
            if stale and not self._stopping.is_set():
                # One query for every job whose last step called the backend: a Find made
                # after that call, so it shows what the call did (never the poll's, which
                # predates it), and reused as the poll's is while the job's steps only record.
                try:
                    fresh.update(find_all(self.backend, stale))
                except (Unreachable, Unavailable) as exc:
                    log.warning("the backend did not answer: %s; trying again", exc)
                    sighted = False
                    break
                seen.update((job, fresh[job]) for job in stale if job in fresh)
            batch = [(job, lease, fresh.get(job)) for job, lease in leases.items()]
        for job in owned:
            if job not in failed:
                self._observed(job, seen.get(job))
        return wake, sighted

    def _own_residual(self, residual: list[str]) -> dict[str, Lease]:
        """Lease the settled jobs a sweep found; keep those refused to ask again once a
        standing lease may have lapsed (half a lease's life on), until the next sweep."""
        got = self.ownership.own_many(residual)
        self._refused_residual = [j for j in residual if j not in got]
        self._residual_retry = self.clock() + self.lease_ttl / 2
        return got

    def _failed(self, job: str, exc: Exception) -> None:
        """What ended one job's pass in a round: that job's problem, the others go on; an
        error of another kind ends ``serve`` as it would have in a pass of its own."""
        if isinstance(exc, NotFound):
            return
        if isinstance(exc, (Unreachable, Unavailable)):
            if not self.store.told(exc):  # the store's own outage is logged once, not per job
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
        self._woken.set()


#: Steps that commit to the record and call nothing: after one, the backend is still as the
#: pass's Find showed it (none of them follows a Start, whose object a Find before it lacks).
_RECORD_ONLY: tuple[type[Step], ...] = (
    Observe,
    RecordProgress,
    Authorize,
    Canonical,
    VerifiedStopped,
    Outcome,
    Escalate,
    Settle,
)


def _record_only(result: Pass) -> bool:
    """Whether a pass only committed to the record: its Find still shows the backend."""
    step = result.step
    return type(step) in _RECORD_ONLY and not result.conflict
