"""The outbox: what a job's record owes each sink, delivered off the supervising thread.

The supervisor's passes only *offer* each record they read (:meth:`Outbox.offer`): the notices
the record implies (:func:`jobdispatch.notices.notices`), less those the record shows delivered,
are queued per sink. Each sink has a lane of its own, one thread that sends and then records
the delivery in the job's record (``notice-delivered``, or ``escalation-delivered`` for an
escalation), so a slow or dead receiver delays neither a poll nor another sink.

* **Exactly-once intent.** A notice's id derives from the record, so every supervisor queues the
  same notices under the same ids, and a lane holds each (job, notice) once.
* **At-least-once delivery.** A failed send is tried again with exponential backoff and jitter;
  a send is recorded only after it succeeded, and a recorded one is never queued again. A
  supervisor killed between a send and its record sends again after a takeover: that, a lost
  delivery record, is the one way a receiver sees a notice twice (it deduplicates on the key).
* **One sender at a time.** A lane sends a job's notice only while this supervisor holds the
  job's lease with time to spare (``owns``), checked under :attr:`Outbox.guard`; the supervisor
  gives a lease back only under that guard, and never while one of the job's notices is being
  sent (:meth:`Outbox.in_flight`), so the next owner never sends what is in flight here. A
  settled job stays owned while its notices are queued. A lease lost, a job moved to another
  supervisor: its queued notices are dropped here and the new owner queues them from the
  record.
* **Rate limit and cool-down.** Each lane sends at most ``rate_per_minute`` (a token bucket);
  after ``FAILURES_BEFORE_COOLDOWN`` failures in a row it rests for the sink's ``cooldown``,
  logged once, instead of hammering a receiver that is down.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import attrs
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import Conflict
from jobdispatch.notices import Notice, delivered, notices, says_nothing
from jobdispatch.records import events as ev
from jobdispatch.records.store import Records
from jobdispatch.types import Actor, NoticeKind, Notify

from jobdispatch_supervise.messages import NoticeMessage
from jobdispatch_supervise.sinks import EscalationMessage

__all__ = ["FAILURES_BEFORE_COOLDOWN", "Outbox", "wanted_kinds"]

log = logging.getLogger("jobdispatch.notices")

#: Consecutive failed sends after which a lane rests for its sink's cool-down.
FAILURES_BEFORE_COOLDOWN = 3
#: Backoff of one delivery: BASE * 2**(tries - 1) seconds, at most CAP, times a jitter in [0.5, 1).
RETRY_BASE = 1.0
RETRY_CAP = 300.0
#: Lifecycle notices older than this when first offered are not sent (a sink added to a
#: configuration is not flooded with every job's history); escalations are sent whatever their age.
MAX_AGE = timedelta(hours=24)
#: How many jobs' last offered revision the outbox remembers (a job forgotten is read afresh).
OFFERS_KEPT = 100_000
#: How many recorded deliveries a lane remembers, against offers that read an older record.
RECORDED_KEPT = 100_000
#: How many times recording a delivery re-reads a record that kept moving.
RECORD_TRIES = 10


def always(_job: str) -> bool:
    return True


def wanted_kinds(sink: Any, notify: Notify) -> frozenset[NoticeKind]:
    """The notices ``sink`` gets of a job that asks for ``notify``: every escalation; the
    lifecycle kinds the sink asks for (its ``notify`` setting) and those the job asks for, of
    every sink or of this one by name, when the sink takes notices at all (``send``)."""
    kinds = {NoticeKind.ESCALATED}
    if hasattr(sink, "send"):
        kinds.update(getattr(sink, "events", ()))
        if not notify.sinks or sink.name in notify.sinks:
            kinds.update(notify.events)
    return frozenset(kinds)


@attrs.define(eq=False)
class _Item:
    job: str
    notice: Notice
    due: float
    tries: int = 0
    #: Sent already, its record not yet committed: only the record is tried again.
    sent: bool = False


@attrs.define(eq=False)
class LaneStats:
    """What a lane did, for tests and benchmarks."""

    sent: int = 0
    failed: int = 0
    recorded: int = 0
    dropped: int = 0


class _Lane:
    """One sink's queue and the thread that empties it."""

    def __init__(self, outbox: Outbox, sink: Any) -> None:
        self.outbox = outbox
        self.sink = sink
        self.name: str = sink.name
        self.events: frozenset[NoticeKind] = frozenset(getattr(sink, "events", ()))
        self.rate = float(getattr(sink, "rate_per_minute", 60.0))
        self.cooldown = float(getattr(sink, "cooldown", 60.0))
        self.stats = LaneStats()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Item]] = []
        self._items: dict[tuple[str, str], _Item] = {}
        self._busy: _Item | None = None
        #: Keys recorded lately: an offer that read the record just before the commit must
        #: not queue the notice again (bounded: the oldest are forgotten first).
        self._recorded: dict[tuple[str, str], None] = {}
        self._count = itertools.count()
        self._failures = 0
        self._rest_until = 0.0
        self._capacity = max(1.0, min(10.0, self.rate))
        self._tokens = self._capacity
        self._refilled = outbox.monotonic()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name=f"jobdispatch-sink-{self.name}", daemon=True
        )

    # ---------------------------------------------------------------- queueing

    def wants(self, notice: Notice, notify: Notify) -> bool:
        return notice.kind in wanted_kinds(self.sink, notify)

    def put(self, job: str, notice: Notice) -> None:
        with self._cond:
            key = (job, notice.id)
            if key in self._recorded or key in self._items:
                return
            item = _Item(job, notice, self.outbox.monotonic())
            self._items[(job, notice.id)] = item
            if self._thread.ident is None and not self._stopping:
                self._thread.start()  # on the first notice: a sink never used costs no thread
            heapq.heappush(self._heap, (item.due, next(self._count), item))
            self._cond.notify()

    def jobs(self) -> set[str]:
        """The jobs with notices queued here."""
        with self._cond:
            return {job for job, _ in self._items}

    def sending(self, job: str) -> bool:
        """Whether one of ``job``'s notices is being sent (or recorded) now."""
        with self._cond:
            return self._busy is not None and self._busy.job == job

    def pending(self) -> int:
        with self._cond:
            return len(self._items)

    # ---------------------------------------------------------------- the thread

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _next(self) -> _Item | None:
        """The next item due, once it is due (and the lane not resting); None when stopping."""
        with self._cond:
            while not self._stopping:
                now = self.outbox.monotonic()
                wait = 1.0
                if self._heap:
                    due = max(self._heap[0][0], self._rest_until)
                    if due <= now:
                        _, _, item = heapq.heappop(self._heap)
                        self._busy = item
                        return item
                    wait = min(wait, due - now)
                self._cond.wait(wait)
            return None

    def _later(self, item: _Item, delay: float) -> None:
        with self._cond:
            self._busy = None
            item.due = self.outbox.monotonic() + delay
            heapq.heappush(self._heap, (item.due, next(self._count), item))

    def _done(self, item: _Item, recorded: bool = False) -> None:
        with self._cond:
            self._busy = None
            key = (item.job, item.notice.id)
            self._items.pop(key, None)
            if recorded:
                self._recorded[key] = None
                if len(self._recorded) > RECORDED_KEPT:
                    del self._recorded[next(iter(self._recorded))]
            self._cond.notify_all()

    def _token(self) -> float:
        """0 when a send may go now (a token taken), else the seconds until one is there."""
        now = self.outbox.monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._refilled) * self.rate / 60.0)
        self._refilled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) * 60.0 / self.rate

    def _run(self) -> None:
        while (item := self._next()) is not None:
            try:
                self._handle(item)
            except Exception:  # a lane must outlive anything one item does
                log.exception(
                    "sink %s: delivering %s failed unexpectedly", self.name, item.notice.key
                )
                self._later(item, self.outbox.backoff(item.tries + 1))

    def _handle(self, item: _Item) -> None:
        outbox = self.outbox
        if not item.sent:
            with outbox.guard:  # the lease is given back only under the guard
                ours = outbox.owns(item.job)
            if not ours:
                # Not (or no longer) ours: whoever owns the job queues it from the record.
                self.stats.dropped += 1
                self._done(item)
                outbox.forget(item.job)
                return
        if not item.sent:
            wait = self._token()
            if wait > 0:
                # Out of tokens: the lane rests, and the item keeps its place (order kept).
                with self._cond:
                    self._busy = None
                    self._rest_until = max(self._rest_until, outbox.monotonic() + wait)
                    heapq.heappush(self._heap, (item.due, next(self._count), item))
                return
            try:
                outbox.deliver(self.sink, item)
            except Exception as exc:
                self._failed(item, exc)
                return
            self.stats.sent += 1
            self._failures = 0
            item.sent = True
        try:
            outbox.record(self.name, item)
        except Exception as exc:
            # Sent, not recorded: try the record again, never the send.
            log.warning(
                "sink %s: %s delivered, its record not committed (%s); trying again",
                self.name,
                item.notice.key,
                exc,
            )
            item.tries += 1
            self._later(item, outbox.backoff(item.tries))
            return
        self.stats.recorded += 1
        self._done(item, recorded=True)

    def _failed(self, item: _Item, exc: Exception) -> None:
        self.stats.failed += 1
        item.tries += 1
        self._failures += 1
        delay = self.outbox.backoff(item.tries)
        log.warning(
            "sink %s: %s not delivered (try %d): %s; trying again in %.0f s",
            self.name,
            item.notice.key,
            item.tries,
            exc,
            delay,
        )
        if self._failures == FAILURES_BEFORE_COOLDOWN and self.cooldown > 0:
            self._rest_until = self.outbox.monotonic() + self.cooldown
            log.warning(
                "sink %s: %d failures in a row; resting %.0f s before the next try",
                self.name,
                self._failures,
                self.cooldown,
            )
        elif self._failures > FAILURES_BEFORE_COOLDOWN and self.cooldown > 0:
            self._rest_until = self.outbox.monotonic() + self.cooldown
        self._later(item, delay)

    def idle(self) -> bool:
        with self._cond:
            return not self._items and self._busy is None

    def flush_wait(self, timeout: float) -> bool:
        """Wait until this lane is idle, at most ``timeout`` seconds; whether it is."""
        deadline = self.outbox.monotonic() + timeout
        with self._cond:
            while self._items or self._busy is not None:
                left = deadline - self.outbox.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
        return True


class Outbox:
    """Queues what each offered record owes each sink, and delivers it from one thread per
    sink (see the module docstring).

    Args:
        store: where deliveries are recorded.
        sinks: escalation sinks (``deliver``) and notice sinks (``send``); a sink may be both.
        clock: the time deliveries are recorded at, and notices' age is judged by.
        by: the actor recorded on deliveries.
        cluster: the cluster's name, carried by every message.
        sender: who sends (the supervisor's holder id), carried by every message.
        owns: whether this supervisor may send a job's notices now (holds its lease).
        link: the dashboard page of a job, when one is configured.
        draw: randomness in [0, 1) for the jitter.
        monotonic: the clock lanes wait by.
    """

    def __init__(
        self,
        store: Records,
        sinks: Sequence[Any],
        *,
        by: Actor,
        clock: Clock = system_clock,
        cluster: str = "",
        sender: str = "",
        owns: Callable[[str], bool] = always,
        link: Callable[[str], str | None] | None = None,
        draw: Callable[[], float] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        max_age: timedelta = MAX_AGE,
    ) -> None:
        self.store = store
        self.by = by
        self.clock = clock
        self.cluster = cluster
        self.sender = sender
        self.owns = owns
        self.link = link
        self.monotonic = monotonic
        self.max_age = max_age
        self._draw = draw or random.Random(secrets.randbits(64)).random
        #: Held while a lane checks ownership before a send, and while the supervisor gives a
        #: lease back: the two never interleave (see the module docstring).
        self.guard = threading.Lock()
        self._offered: dict[str, int] = {}
        self._lock = threading.Lock()
        self.lanes = [_Lane(self, s) for s in sinks]

    @property
    def sinks(self) -> list[Any]:
        return [lane.sink for lane in self.lanes]

    def backoff(self, tries: int) -> float:
        """How long to wait before try ``tries + 1``: exponential, capped, with jitter."""
        base = min(RETRY_CAP, RETRY_BASE * 2.0 ** max(tries - 1, 0))
        return base * (0.5 + self._draw() / 2)

    def owed(self, view: ev.View) -> list[tuple[Notice, _Lane]]:
        """What ``view`` owes the sinks: each notice a sink wants, fresh enough (escalations
        whatever their age), that the record does not show delivered to it."""
        found = notices(view)
        if not found:
            return []
        done = delivered(view)
        notify = view.header.spec.notify
        now = self.clock()
        out = []
        for notice in found:
            if notice.kind is not NoticeKind.ESCALATED and now - notice.at > self.max_age:
                continue
            for lane in self.lanes:
                if (notice.id, lane.name) not in done and lane.wants(notice, notify):
                    out.append((notice, lane))
        return out

    def owes(self, view: ev.View) -> bool:
        """Whether ``view`` owes any sink anything (the residual sweep's question)."""
        return bool(self.lanes) and bool(self.owed(view))

    def offer(self, view: ev.View) -> None:
        """Queue what ``view`` owes the sinks and they do not hold yet. Cheap when nothing
        changed since the job's last offer (the same revision); never blocks on a sink."""
        if not self.lanes:
            return
        job = view.header.job
        with self._lock:
            before = self._offered.get(job)
            if before == view.revision:
                return
            self._offered.pop(job, None)
            self._offered[job] = view.revision  # last: the oldest offered first when bounded
            if len(self._offered) > OFFERS_KEPT:
                del self._offered[next(iter(self._offered))]
        if before is not None and before < view.revision and says_nothing(view.events[before:]):
            return  # grown by progress evidence alone: it owes what it owed when offered
        for notice, lane in self.owed(view):
            lane.put(job, notice)

    def jobs(self) -> set[str]:
        """The jobs with notices queued: their leases must be kept until these are sent."""
        out: set[str] = set()
        for lane in self.lanes:
            out |= lane.jobs()
        return out

    def in_flight(self, job: str) -> bool:
        """Whether a lane is sending one of ``job``'s notices (its lease must not go now)."""
        return any(lane.sending(job) for lane in self.lanes)

    def forget(self, job: str) -> None:
        """Offer ``job`` anew next time, even at the same revision (a notice was dropped)."""
        with self._lock:
            self._offered.pop(job, None)

    def message(self, notice: Notice) -> NoticeMessage:
        link = self.link(notice.job) if self.link is not None else None
        return NoticeMessage(notice=notice, cluster=self.cluster, link=link, sender=self.sender)

    def deliver(self, sink: Any, item: _Item) -> None:
        """One send: an escalation through the sink's ``deliver`` when it has one (its own
        message, as before notices existed), everything else through ``send``."""
        notice = item.notice
        if notice.kind is NoticeKind.ESCALATED and hasattr(sink, "deliver"):
            sink.deliver(
                EscalationMessage(
                    job=notice.job,
                    name=notice.name,
                    id=notice.id,
                    detail=notice.detail,
                    at=notice.at,
                )
            )
            return
        sink.send(self.message(notice))

    def record(self, sink: str, item: _Item) -> None:
        """Commit the delivery as evidence, past whatever others committed meanwhile; nothing
        when the record holds it already (another supervisor recorded its own send)."""
        notice = item.notice
        event: ev.AnyEvent
        if notice.escalation is not None:
            event = ev.EscalationDelivered(
                at=self.clock(), by=self.by, escalation=notice.escalation, sink=sink
            )
        else:
            event = ev.NoticeDelivered(at=self.clock(), by=self.by, notice=notice.id, sink=sink)
        view = self.store.read(item.job)
        for _ in range(RECORD_TRIES):
            if (notice.id, sink) in delivered(view):
                return
            try:
                self.store.append(item.job, [event], expect_revision=view.revision)
                return
            except Conflict:
                view = self.store.read(item.job)
        msg = f"job {item.job}: the record kept moving"
        raise Conflict(msg)

    def pending(self) -> int:
        """Notices queued or being sent, over every lane."""
        return sum(lane.pending() for lane in self.lanes)

    def stats(self) -> dict[str, LaneStats]:
        return {lane.name: lane.stats for lane in self.lanes}

    def flush(self, timeout: float) -> bool:
        """Wait until every lane is empty, at most ``timeout`` seconds; whether they are."""
        deadline = self.monotonic() + timeout
        return all(lane.flush_wait(deadline - self.monotonic()) for lane in self.lanes)

    def close(self, timeout: float = 5.0) -> None:
        """Give queued notices up to ``timeout`` to go, then stop every lane. What is left is
        still owed by the record: the next supervisor to read it queues it again."""
        self.flush(timeout)
        for lane in self.lanes:
            lane.stop()
        for lane in self.lanes:
            lane.join(1.0)
