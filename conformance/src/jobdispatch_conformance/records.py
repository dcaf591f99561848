"""The record-store conformance suite: what every :class:`~jobdispatch.records.store.Records`
must show, whatever keeps the records.

A store's tests subclass :class:`RecordStoreSuite` under a name pytest collects and provide its
fixtures; the fixtures the suite cannot guess raise ``NotImplementedError`` until then::

    class TestMyStore(RecordStoreSuite):
        @pytest.fixture
        def make_store(self, tmp_path_factory):
            built = []
            def make(clock):
                built.append(MyStore(tmp_path_factory.mktemp("s"), clock=clock))
                return built[-1]
            yield make
            for store in built:
                store.close()

        @pytest.fixture
        def make_concurrent_appenders(self):
            return thread_launcher          # or: lambda store: process_launcher(opener)

Fixtures:

* ``make_store`` (required): ``make_store(clock)`` builds a new, empty store that judges lease
  expiry by ``clock`` (a :class:`~jobdispatch.clock.ManualClock`), and closes it at teardown.
  The property test builds many, so it must be cheap enough to call a few hundred times.
* ``make_concurrent_appenders`` (required): given the store under test, a :class:`Launcher`
  that runs a worker ``n`` times at once against the same records: threads for a store that
  lives in one process (:func:`thread_launcher`), processes for one that several processes
  share (:func:`process_launcher`). The suite's race tests use it.
* ``clock`` and ``store``: a ManualClock and ``make_store(clock)``; override rarely.
* ``reopen`` (optional): ``reopen(store, clock)`` closes the store and opens the same records
  again. Durable stores provide it; the restart tests skip without it.
* ``damage`` (optional): ``damage(store, clock, job, revision)`` makes one stored value of
  ``job`` unreadable (0: the header) as a damaged disk would, and returns the store to use
  from then on (the same one, or the records reopened). The unreadable-record test skips
  without it.

What the fixtures must give, whatever the store (the PostgreSQL store runs the same suite):

* every store from ``make_store`` is empty and independent of the others (the model test
  compares ``list`` against the jobs it created, so no record may leak from one to another);
* lease expiry is judged by the clock passed in, at the moment of each commit, for the single
  forms and the batch forms alike (``append_many``, ``acquire_many``, ``renew_many``,
  ``release_many``): the tests move that clock and expect the store to see it;
* the launcher's workers run the suite's own module-level workers (``race_rounds``,
  ``race_batch_rounds``, ``race_batch_acquire``...) on a store of their own opened on the same
  records; racing batches name their jobs in different orders, so a store that locks per job
  must not deadlock (or must answer, not hang) when two batches take the same jobs in
  opposite orders.

The batch tests check that a batch answers every part as its single form would, in request
order; that one part's refusal (each kind: RevisionMoved, LeaseLost for a missing, stale,
expired or foreign lease, LeaseHeld, NotFound) leaves every other part as it would have been;
that each part is applied whole or not at all; that a malformed batch (a job named twice, a
part that is not an AppendRequest, an event the store cannot record, a bad ttl or holder, one
string where job ids are wanted) is Invalid and changes nothing; that ``release_many`` of a
lease of an unknown job is NotFound and releases nothing; and that tokens keep growing through
batch acquisitions.

Class attributes a subclass may tune: :attr:`RecordStoreSuite.model_examples` (hypothesis
examples of the model test; lower it for a slow store), :attr:`RecordStoreSuite.model_shrink`
(shrink a failure to a minimal sequence), :attr:`RecordStoreSuite.appenders` and
:attr:`RecordStoreSuite.race_rounds` (how hard the races are).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import queue as queue_module
import threading
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from jobdispatch.clock import ManualClock
from jobdispatch.errors import (
    Conflict,
    Invalid,
    LeaseHeld,
    LeaseLost,
    NotFound,
    RevisionMoved,
    Unreadable,
)
from jobdispatch.records.events import (
    AnyEvent,
    AttemptStarted,
    CallAnswered,
    Header,
    HoldRequested,
    Settled,
    View,
)
from jobdispatch.records.store import (
    AppendRequest,
    Created,
    Lease,
    ListFilter,
    Measured,
    Records,
    Revisions,
    Surveyed,
)
from jobdispatch.types import Actor, CheckpointMode, JobSpec, Plan, UnmatchedPolicy

__all__ = [
    "Launcher",
    "RecordStoreSuite",
    "control",
    "create_jobs",
    "decision",
    "evidence",
    "make_header",
    "process_launcher",
    "settle",
    "thread_launcher",
]

T = TypeVar("T")

_HUMAN = Actor.human("conformance")
_SUPERVISOR = Actor.supervisor("conformance")
_EPOCH = datetime.fromisoformat("2026-01-01T00:00:00+00:00")


# ------------------------------------------------------------------------------ record makers


def make_header(job: str, *, at: datetime = _EPOCH, key: str = "", name: str = "") -> Header:
    """A small, valid header for ``job`` (what the store keeps is opaque to it)."""
    spec = JobSpec(command=("train.py", "--epochs", "3"), name=name or job, nodes=2)
    plan = Plan(
        job=job,
        rules=(),
        uncovered=(),
        checkpoint=CheckpointMode.ISOLATED,
        unmatched=UnmatchedPolicy.RESIDUAL,
    )
    return Header(
        job=job, spec=spec, plan=plan, idempotency_key=key, created_by=_HUMAN, created_at=at
    )


def create_jobs(store: Records, *jobs: str) -> tuple[str, ...]:
    """Create a record (:func:`make_header`) for each of ``jobs``; their names, in order."""
    for job in jobs:
        store.create(make_header(job))
    return jobs


def evidence(n: int = 0, *, at: datetime = _EPOCH, detail: str = "") -> CallAnswered:
    """An evidence event, told apart by ``n`` and ``detail``."""
    return CallAnswered(at=at, by=_SUPERVISOR, call=n, ok=True, detail=detail)


def control(*, at: datetime = _EPOCH, reason: str = "") -> HoldRequested:
    """A control event (a person's hold request)."""
    return HoldRequested(at=at, by=_HUMAN, reason=reason)


def decision(n: int = 1, *, at: datetime = _EPOCH) -> AttemptStarted:
    """A decision event: it needs the job's lease."""
    return AttemptStarted(at=at, by=_SUPERVISOR, submission=n, attempt=1)


def settle(*, at: datetime = _EPOCH) -> Settled:
    """The decision that settles a job."""
    return Settled(at=at, by=_SUPERVISOR)


# -------------------------------------------------------------------------------- launchers


class Barrier(Protocol):
    """What a worker needs of a barrier (threading's and multiprocessing's both fit)."""

    def wait(self, timeout: float | None = None) -> Any: ...


class Launcher(Protocol):
    """Runs ``worker(store, barrier, index, *args)`` ``n`` times at once and returns the
    results in index order; raises if any worker failed. Each worker gets a store on the same
    records (the same object for threads, a store opened in the worker's process for
    processes) and one barrier shared by all ``n``."""

    def __call__(self, worker: Callable[..., T], n: int, *args: Any) -> list[T]: ...


_WORKER_TIMEOUT = 300.0


def thread_launcher(store: Records) -> Launcher:
    """A launcher whose workers are threads sharing ``store``."""

    def launch(worker: Callable[..., T], n: int, *args: Any) -> list[T]:
        barrier = threading.Barrier(n)
        results: dict[int, T] = {}
        errors: list[str] = []

        def run(i: int) -> None:
            try:
                results[i] = worker(store, barrier, i, *args)
            except BaseException:
                errors.append(f"worker {i}:\n{traceback.format_exc()}")
                barrier.abort()

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(_WORKER_TIMEOUT)
        if errors:
            raise AssertionError("\n".join(errors))
        if len(results) != n:
            msg = f"only {len(results)} of {n} workers finished"
            raise AssertionError(msg)
        return [results[i] for i in range(n)]

    return launch


def _process_main(
    opener: Callable[[], Records],
    task: tuple[Callable[..., Any], Barrier, int, tuple[Any, ...]],
    out: Any,
) -> None:
    worker, barrier, index, args = task
    try:
        store = opener()
        try:
            result = worker(store, barrier, index, *args)
        finally:
            store.close()
        out.put((index, True, result))
    except BaseException:
        out.put((index, False, traceback.format_exc()))
        # The failure is reported above; breaking the barrier only unblocks the peers.
        with contextlib.suppress(Exception):
            barrier.abort()  # type: ignore[attr-defined]


def _preload_for(opener: Callable[[], Records]) -> list[str]:
    target = getattr(opener, "func", opener)
    module = getattr(target, "__module__", None)
    return [module] if isinstance(module, str) and module != "__main__" else []


def process_launcher(opener: Callable[[], Records]) -> Callable[..., list[Any]]:
    """A launcher whose workers are processes, each opening its own store with ``opener``
    (which must pickle: a module-level function or a ``functools.partial`` of a class and a
    path). Workers are forked from multiprocessing's fork server, a fresh interpreter that
    never opened a store, so nothing the test process holds open (LMDB forbids using an
    environment across ``fork``) reaches them."""

    def launch(worker: Callable[..., T], n: int, *args: Any) -> list[T]:
        ctx = multiprocessing.get_context("forkserver")
        # Workers fork from a server process that imported these once: a launch then costs
        # a fork, not an interpreter start. (Only the first call's list takes effect.)
        ctx.set_forkserver_preload([__name__, *_preload_for(opener)])
        barrier = ctx.Barrier(n)
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_process_main, args=(opener, (worker, barrier, i, args), out))
            for i in range(n)
        ]
        for p in procs:
            p.start()
        results: dict[int, T] = {}
        errors: list[str] = []
        try:
            for _ in range(n):
                try:
                    index, ok, value = out.get(timeout=_WORKER_TIMEOUT)
                except queue_module.Empty:
                    errors.append("a worker process gave no answer in time")
                    break
                if ok:
                    results[index] = value
                else:
                    errors.append(f"worker {index}:\n{value}")
        finally:
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join()
            for p in procs:
                p.close()
            out.close()
            out.join_thread()
        if errors:
            raise AssertionError("\n".join(errors))
        return [results[i] for i in range(n)]

    return launch


# --------------------------------------------------------------------------- race workers


def race_rounds(store: Records, barrier: Barrier, index: int, job: str, rounds: int) -> list[bool]:
    """Each round, every worker appends at the same revision at once; report which it won."""
    won = []
    for r in range(rounds):
        barrier.wait(_WORKER_TIMEOUT)
        try:
            store.append(job, [evidence(r, detail=f"appender-{index}")], expect_revision=r)
            won.append(True)
        except Conflict:
            won.append(False)
    return won


def append_until(store: Records, barrier: Barrier, index: int, job: str, wins: int) -> list[int]:
    """Append ``wins`` events, re-reading after every lost race; report the revisions won."""
    barrier.wait(_WORKER_TIMEOUT)
    won: list[int] = []
    while len(won) < wins:
        revision = store.read(job).revision
        mark = evidence(len(won), detail=f"appender-{index}")
        try:
            won.append(store.append(job, [mark], expect_revision=revision))
        except Conflict:
            continue
    return won


def race_acquire(
    store: Records, barrier: Barrier, index: int, job: str, rounds: int
) -> list[int | None]:
    """Each round every worker tries to acquire the job at once; the winner appends a decision
    with its lease, then releases. Report the token won each round (None when lost)."""
    tokens: list[int | None] = []
    for _ in range(rounds):
        barrier.wait(_WORKER_TIMEOUT)
        lease: Lease | None
        try:
            lease = store.acquire(job, f"holder-{index}", timedelta(minutes=5))
        except Conflict:
            lease = None
        barrier.wait(_WORKER_TIMEOUT)
        if lease is not None:
            revision = store.read(job).revision
            store.append(job, [decision(index)], expect_revision=revision, owner=lease)
            store.release(lease)
        tokens.append(lease.token if lease is not None else None)
        barrier.wait(_WORKER_TIMEOUT)
    return tokens


def _rotated(jobs: Sequence[str], index: int) -> list[str]:
    """The jobs starting at a different one for each worker: racing batches name their jobs
    in different orders, as a store that locks per job must survive without deadlock."""
    k = index % len(jobs)
    return [*jobs[k:], *jobs[:k]]


def race_batch_rounds(
    store: Records, barrier: Barrier, index: int, jobs: Sequence[str], rounds: int
) -> list[list[bool]]:
    """Each round, every worker appends one event to every job at the same revision, all in
    one batch, at once. Report per round which jobs (in ``jobs`` order) it won; a part lost
    must be answered RevisionMoved, never raised."""
    won: list[list[bool]] = []
    for r in range(rounds):
        order = _rotated(jobs, index + r)
        requests = [
            AppendRequest(
                job=job, events=(evidence(r, detail=f"appender-{index}"),), expect_revision=r
            )
            for job in order
        ]
        barrier.wait(_WORKER_TIMEOUT)
        answers = dict(zip(order, store.append_many(requests), strict=True))
        for job, answer in answers.items():
            assert answer == r + 1 or isinstance(answer, RevisionMoved), (job, answer)
        won.append([answers[job] == r + 1 for job in jobs])
    return won


def batch_append_until(
    store: Records, barrier: Barrier, index: int, jobs: Sequence[str], wins: int
) -> dict[str, list[int]]:
    """Append ``wins`` events to every job in batches, each time to the jobs still short of
    them, at the revision just read; report the revisions won per job."""
    barrier.wait(_WORKER_TIMEOUT)
    won: dict[str, list[int]] = {job: [] for job in jobs}
    while pending := [job for job in _rotated(jobs, index) if len(won[job]) < wins]:
        requests = [
            AppendRequest(
                job=job,
                events=(evidence(len(won[job]), detail=f"appender-{index}"),),
                expect_revision=store.read(job).revision,
            )
            for job in pending
        ]
        for job, answer in zip(pending, store.append_many(requests), strict=True):
            if isinstance(answer, int):
                won[job].append(answer)
            else:
                assert isinstance(answer, RevisionMoved), (job, answer)
    return won


def race_batch_acquire(
    store: Records, barrier: Barrier, index: int, jobs: Sequence[str], rounds: int
) -> list[dict[str, int]]:
    """Each round every worker acquires every job in one batch at once; for the jobs it won
    it renews the leases in a batch, appends a decision to each in a batch, then releases
    them in a batch. Report the token won per job each round."""
    holder = f"holder-{index}"
    tokens: list[dict[str, int]] = []
    for r in range(rounds):
        order = _rotated(jobs, index + r)
        barrier.wait(_WORKER_TIMEOUT)
        answers = store.acquire_many(order, holder, timedelta(minutes=5))
        leases = [a for a in answers if isinstance(a, Lease)]
        for answer in answers:
            assert isinstance(answer, (Lease, LeaseHeld)), answer
        barrier.wait(_WORKER_TIMEOUT)
        renewed = store.renew_many(leases, timedelta(minutes=5))
        mine = [lease for lease in renewed if isinstance(lease, Lease)]
        assert len(mine) == len(leases), renewed
        requests = [
            AppendRequest(
                job=lease.job,
                events=(decision(index),),
                expect_revision=store.read(lease.job).revision,
                owner=lease,
            )
            for lease in mine
        ]
        applied = store.append_many(requests)
        assert all(isinstance(a, int) for a in applied), applied
        store.release_many(mine)
        tokens.append({lease.job: lease.token for lease in mine})
        barrier.wait(_WORKER_TIMEOUT)
    return tokens


# ------------------------------------------------------------------------------------ model


@attrs.define
class _ModelJob:
    kinds: list[tuple[str, int | None]]  # (event kind, token) per revision
    settled: bool = False
    lease: Lease | None = None
    token: int = 0


_JOBS = ("job-a", "job-b", "job-c")
_KEYS = ("", "key-1", "key-2", "key-3")
_HOLDERS = ("h1", "h2", "h3")
_KINDS = ("evidence", "control", "decision", "settle")

_deltas = st.sampled_from((0, 0, 0, 0, -1, 1))
# "owner": whoever holds the job's lease in the model, so that decisions get through.
_holders = st.sampled_from((None, "owner", "owner", "owner", *_HOLDERS))
_append_op = st.tuples(
    st.just("append"),
    st.sampled_from(_JOBS),
    st.lists(st.sampled_from(_KINDS), min_size=1, max_size=3),
    _deltas,
    _holders,
)


def _batch_of(item: st.SearchStrategy[T], job: Callable[[T], str]) -> st.SearchStrategy[list[T]]:
    """Batches of up to four items: mostly of distinct jobs, sometimes naming a job twice
    (the batch is then Invalid, and changes nothing)."""
    distinct = st.lists(item, max_size=4, unique_by=job)
    return st.one_of(distinct, distinct, distinct, st.lists(item, min_size=2, max_size=4))


# A part may be empty: it checks the revision only.
_append_many_op = st.tuples(
    st.just("append_many"),
    _batch_of(
        st.tuples(
            st.sampled_from(_JOBS), st.lists(st.sampled_from(_KINDS), max_size=3), _deltas, _holders
        ),
        lambda part: part[0],
    ),
)
_held = _batch_of(st.tuples(st.sampled_from(_JOBS), st.sampled_from(_HOLDERS)), lambda p: p[0])
_ops = st.one_of(
    st.tuples(
        st.just("create"),
        st.sampled_from(_JOBS),
        st.sampled_from(_KEYS),
        st.lists(st.sampled_from(_KINDS), max_size=3),
    ),
    _append_op,
    _append_op,  # twice: appends are what the store is for
    _append_many_op,
    _append_many_op,
    st.tuples(
        st.just("acquire"), st.sampled_from(_JOBS), st.sampled_from(_HOLDERS), st.integers(1, 10)
    ),
    st.tuples(
        st.just("acquire_many"),
        _batch_of(st.sampled_from(_JOBS), str),
        st.sampled_from(_HOLDERS),
        st.integers(1, 10),
    ),
    st.tuples(
        st.just("renew"), st.sampled_from(_JOBS), st.sampled_from(_HOLDERS), st.integers(1, 10)
    ),
    st.tuples(st.just("renew_many"), _held, st.integers(1, 10)),
    st.tuples(st.just("release"), st.sampled_from(_JOBS), st.sampled_from(_HOLDERS)),
    st.tuples(st.just("release_many"), _held),
    st.tuples(st.just("advance"), st.integers(0, 12)),
)


def _event(kind: str, at: datetime) -> AnyEvent:
    if kind == "evidence":
        return evidence(at=at)
    if kind == "control":
        return control(at=at)
    if kind == "decision":
        return decision(at=at)
    return settle(at=at)


#: What the model says one call (or one job's part of a batch) answers: a value, or the type of
#: the refusal; and what it changes when it applies.
_Outcome = tuple[Any, Callable[[], None]]


def _nothing() -> None:
    """The change a refused call makes."""


def _answers_match(answer: Any, expected: Any) -> bool:
    if isinstance(expected, type):
        return isinstance(answer, expected)
    return bool(answer == expected)


class _Model:
    """The store's promises stated as plain Python, to compare a real store against. Each kind
    of write is stated once (``_append``, ``_acquire``, ``_renew``, ``_release``: the answer
    and the change for one job), and both its single form and its batch form are checked
    against that statement: a batch answers every part as its own single call would, in
    order, and is Invalid, changing nothing, when it names a job twice."""

    def __init__(self, store: Records, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.jobs: dict[str, _ModelJob] = {}
        self.keys: dict[str, str] = {}
        self.held: dict[tuple[str, str], Lease] = {}  # (holder, job) -> the lease it last got

    def expect(self, what: type[Exception] | None, call: Callable[[], T]) -> T | None:
        if what is None:
            return call()
        with pytest.raises(what):
            call()
        return None

    def live(self, job: _ModelJob) -> bool:
        return job.lease is not None and self.clock() < job.lease.expires

    def current(self, job: _ModelJob, lease: Lease | None) -> bool:
        return (
            lease is not None
            and job.lease is not None
            and self.live(job)
            and (job.lease.holder, job.lease.token) == (lease.holder, lease.token)
        )

    # ------------------------------------------------------------------ one job's outcome

    def _append(
        self, job: str, kinds: list[str], delta: int, holder: str | None, now: datetime
    ) -> tuple[AppendRequest, _Outcome]:
        model = self.jobs.get(job)
        if holder == "owner":
            owner = model.lease if model is not None else None
            holder = owner.holder if owner is not None else None
        lease = self.held.get((holder, job)) if holder else None
        decides = any(k in ("decision", "settle") for k in kinds)
        revision = len(model.kinds) if model else 0
        expect = max(revision + delta, 0)
        request = AppendRequest(
            job=job,
            events=tuple(_event(k, now) for k in kinds),
            expect_revision=expect,
            owner=lease,
        )
        if decides and lease is None:
            return request, (LeaseLost, _nothing)
        if model is None:
            return request, (NotFound, _nothing)
        if expect != revision:
            return request, (RevisionMoved, _nothing)
        if decides and not self.current(model, lease):
            return request, (LeaseLost, _nothing)

        def apply() -> None:
            assert model is not None
            token = lease.token if lease is not None else None
            for k in kinds:
                model.kinds.append((k, token if k in ("decision", "settle") else None))
            model.settled = model.settled or "settle" in kinds

        return request, (revision + len(kinds), apply)

    def _acquire(self, job: str, holder: str, ttl: int, now: datetime) -> _Outcome:
        model = self.jobs.get(job)
        if model is None:
            return NotFound, _nothing
        if self.live(model) and model.lease is not None and model.lease.holder != holder:
            return LeaseHeld, _nothing
        if self.live(model) and model.lease is not None:
            token = model.lease.token
        else:
            token = model.token + 1
        lease = Lease(job, holder, token, now + timedelta(seconds=ttl))

        def apply() -> None:
            assert model is not None
            model.token = max(model.token, token)
            model.lease = lease
            self.held[(holder, job)] = lease

        return lease, apply

    def _renew(self, lease: Lease, ttl: int, now: datetime) -> _Outcome:
        model = self.jobs[lease.job]
        if not self.current(model, lease):
            return LeaseLost, _nothing
        renewed = Lease(lease.job, lease.holder, lease.token, now + timedelta(seconds=ttl))

        def apply() -> None:
            model.lease = renewed
            self.held[(lease.holder, lease.job)] = renewed

        return renewed, apply

    def _release(self, lease: Lease) -> Callable[[], None]:
        model = self.jobs[lease.job]

        def apply() -> None:
            if model.lease is not None and (model.lease.holder, model.lease.token) == (
                lease.holder,
                lease.token,
            ):
                model.lease = None

        return apply

    def _single(self, outcome: _Outcome, call: Callable[[], Any]) -> None:
        expected, apply = outcome
        if isinstance(expected, type):
            self.expect(expected, call)
            return
        assert call() == expected
        apply()

    def _batch(self, jobs: list[str], outcomes: list[_Outcome], call: Callable[[], Any]) -> None:
        if len(set(jobs)) < len(jobs):
            self.expect(Invalid, call)  # a job named twice: nothing is applied
            return
        answers = call()
        assert isinstance(answers, tuple), answers
        assert len(answers) == len(outcomes)
        for i, (answer, (expected, apply)) in enumerate(zip(answers, outcomes, strict=True)):
            assert _answers_match(answer, expected), (i, answer, expected)
            if not isinstance(expected, type):
                apply()

    # ---------------------------------------------------------------------------- a step

    def step(self, op: tuple[Any, ...]) -> None:
        """Apply one generated operation to the store and to the model, checking the store's
        answer against the model's (see the ``_step_*`` method of each operation)."""
        now = self.clock()
        name = op[0]
        if name == "create":
            self._step_create(op, now)
        elif name == "append":
            self._step_append(op, now)
        elif name == "append_many":
            self._step_append_many(op, now)
        elif name == "acquire":
            self._step_acquire(op, now)
        elif name == "acquire_many":
            self._step_acquire_many(op, now)
        elif name == "renew":
            self._step_renew(op, now)
        elif name == "renew_many":
            self._step_renew_many(op, now)
        elif name == "release":
            self._step_release(op)
        elif name == "release_many":
            self._step_release_many(op)
        elif name == "advance":
            self.clock.advance(op[1])

    def _step_create(self, op: tuple[Any, ...], now: datetime) -> None:
        """A create answers the job an idempotency key already made, refuses a job that
        exists, or makes it with its events."""
        _, job, key, kinds = op
        events = [_event(k, now) for k in kinds]
        call_c = functools.partial(
            self.store.create, make_header(job, at=now), events, idempotency_key=key
        )
        if key and key in self.keys:
            assert call_c() == Created(job=self.keys[key], created=False)
        elif job in self.jobs:
            self.expect(Conflict, call_c)
        else:
            assert call_c() == Created(job=job, created=True)
            tokens = [(k, 0 if k in ("decision", "settle") else None) for k in kinds]
            self.jobs[job] = _ModelJob(tokens, settled="settle" in kinds)
            if key:
                self.keys[key] = job

    def _step_append(self, op: tuple[Any, ...], now: datetime) -> None:
        _, job, kinds, delta, holder = op
        request, outcome = self._append(job, kinds, delta, holder, now)
        call = functools.partial(
            self.store.append,
            job,
            list(request.events),
            expect_revision=request.expect_revision,
            owner=request.owner,
        )
        self._single(outcome, call)

    def _step_append_many(self, op: tuple[Any, ...], now: datetime) -> None:
        parts = [self._append(job, kinds, d, h, now) for job, kinds, d, h in op[1]]
        requests = [request for request, _ in parts]
        self._batch(
            [r.job for r in requests],
            [outcome for _, outcome in parts],
            functools.partial(self.store.append_many, requests),
        )

    def _step_acquire(self, op: tuple[Any, ...], now: datetime) -> None:
        _, job, holder, ttl = op
        outcome = self._acquire(job, holder, ttl, now)
        self._single(
            outcome,
            functools.partial(self.store.acquire, job, holder, timedelta(seconds=ttl)),
        )

    def _step_acquire_many(self, op: tuple[Any, ...], now: datetime) -> None:
        _, jobs, holder, ttl = op
        self._batch(
            jobs,
            [self._acquire(job, holder, ttl, now) for job in jobs],
            functools.partial(self.store.acquire_many, jobs, holder, timedelta(seconds=ttl)),
        )

    def _step_renew(self, op: tuple[Any, ...], now: datetime) -> None:
        """Renew a lease the holder has (a holder without one has nothing to renew)."""
        _, job, holder, ttl = op
        lease = self.held.get((holder, job))
        if lease is None:
            return
        self._single(
            self._renew(lease, ttl, now),
            functools.partial(self.store.renew, lease, timedelta(seconds=ttl)),
        )

    def _step_renew_many(self, op: tuple[Any, ...], now: datetime) -> None:
        _, pairs, ttl = op
        leases = [self.held[(h, j)] for j, h in pairs if (h, j) in self.held]
        self._batch(
            [lease.job for lease in leases],
            [self._renew(lease, ttl, now) for lease in leases],
            functools.partial(self.store.renew_many, leases, timedelta(seconds=ttl)),
        )

    def _step_release(self, op: tuple[Any, ...]) -> None:
        """Release a lease the holder has; releasing answers nothing, so only the model's
        later reads judge it."""
        _, job, holder = op
        lease = self.held.get((holder, job))
        if lease is None:
            return
        self.store.release(lease)
        self._release(lease)()

    def _step_release_many(self, op: tuple[Any, ...]) -> None:
        """Release several leases at once; a job named twice is refused whole."""
        leases = [self.held[(h, j)] for j, h in op[1] if (h, j) in self.held]
        if len({lease.job for lease in leases}) < len(leases):
            self.expect(Invalid, functools.partial(self.store.release_many, leases))
            return
        self.store.release_many(leases)
        for lease in leases:
            self._release(lease)()

    def check(self) -> None:
        order = list(self.jobs)
        # Every record at once first (what a supervisor's poll reads, after the steps since
        # the last check changed some), then one by one: both as the model says.
        unknown, *many = self.store.read_many(["no-such-job", *order])
        assert isinstance(unknown, NotFound)
        for job, answer in zip(order, many, strict=True):
            assert isinstance(answer, View), (job, answer)
            assert [(_kind(e), e.token) for e in answer.events] == self.jobs[job].kinds, job
        for job, model in self.jobs.items():
            view = self.store.read(job)
            assert view.revision == len(model.kinds), job
            got = [(_kind(e), e.token) for e in view.events]
            assert got == model.kinds, job
        assert list(self.store.list()) == order
        assert list(self.store.list(ListFilter(settled=True))) == [
            j for j in order if self.jobs[j].settled
        ]
        assert list(self.store.list(ListFilter(settled=False))) == [
            j for j in order if not self.jobs[j].settled
        ]


def _kind(event: AnyEvent) -> str:
    return {
        CallAnswered: "evidence",
        HoldRequested: "control",
        AttemptStarted: "decision",
        Settled: "settle",
    }[type(event)]


# ------------------------------------------------------------------------------------ suite


def _ttl(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


_KINDS_OF_REFUSAL = (RevisionMoved, LeaseLost, LeaseHeld, NotFound)


def _assert_refusal(answer: object, kind: type[Exception]) -> None:
    """``answer`` is the refusal ``kind`` and no other: callers tell them apart by type."""
    assert isinstance(answer, kind), f"expected {kind.__name__}, got {answer!r}"
    others = [k for k in _KINDS_OF_REFUSAL if k is not kind and isinstance(answer, k)]
    assert not others, f"{answer!r} is also a {others[0].__name__}"


class RecordStoreSuite:
    """Every store's promises (see the module docstring for the fixtures to provide)."""

    #: Hypothesis examples for the model test; each builds a new store.
    model_examples: ClassVar[int] = 100
    #: Shrink a failing sequence to a minimal one (clearer, but can take a minute or more).
    model_shrink: ClassVar[bool] = True
    #: How many workers race in the concurrency tests.
    appenders: ClassVar[int] = 4
    #: Rounds of the lock-step race (every worker appends at the same revision at once).
    race_rounds: ClassVar[int] = 25

    # ------------------------------------------------------------------------------ fixtures

    @pytest.fixture
    def make_store(self) -> Callable[[ManualClock], Records]:
        msg = "the store's suite must provide make_store: clock -> a new, empty store"
        raise NotImplementedError(msg)

    @pytest.fixture
    def make_concurrent_appenders(self) -> Callable[[Records], Launcher]:
        msg = (
            "the store's suite must provide make_concurrent_appenders: store -> a launcher "
            "(thread_launcher for an in-process store, process_launcher for a shared one)"
        )
        raise NotImplementedError(msg)

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def store(self, make_store: Callable[[ManualClock], Records], clock: ManualClock) -> Records:
        return make_store(clock)

    @pytest.fixture
    def reopen(self) -> Callable[[Records, ManualClock], Records]:
        pytest.skip("the store is not durable: it provides no reopen fixture")

    @pytest.fixture
    def damage(self) -> Callable[[Records, ManualClock, str, int], Records]:
        pytest.skip("the store provides no damage fixture: it cannot show an unreadable record")

    # ------------------------------------------------------------------------------- create

    def test_is_a_record_store(self, store: Records) -> None:
        assert isinstance(store, Records)

    def test_create_then_read(self, store: Records, clock: ManualClock) -> None:
        header = make_header("job-1", at=clock())
        assert store.create(header) == Created(job="job-1", created=True)
        view = store.read("job-1")
        assert view == View(header, ())
        assert view.revision == 0

    def test_create_is_idempotent_on_its_key(self, store: Records) -> None:
        first = store.create(make_header("job-1"), [evidence(1)], idempotency_key="submit-42")
        again = store.create(make_header("job-1"), [evidence(2)], idempotency_key="submit-42")
        other = store.create(make_header("job-2"), idempotency_key="submit-42")
        assert first == Created(job="job-1", created=True)
        assert again == other == Created(job="job-1", created=False)
        assert list(store.list()) == ["job-1"]
        assert store.read("job-1").events == (evidence(1),)
        with pytest.raises(NotFound):
            store.read("job-2")

    def test_create_records_the_key_in_the_header(self, store: Records) -> None:
        store.create(make_header("job-1"), idempotency_key="k")
        assert store.read("job-1").header.idempotency_key == "k"
        store.create(make_header("job-2", key="from-header"))
        assert store.create(make_header("job-3", key="from-header")) == Created(
            job="job-2", created=False
        )

    def test_create_with_two_different_keys_is_invalid(self, store: Records) -> None:
        with pytest.raises(Invalid):
            store.create(make_header("job-1", key="a"), idempotency_key="b")
        assert list(store.list()) == []

    def test_create_existing_job_under_another_key_conflicts(self, store: Records) -> None:
        store.create(make_header("job-1"), [evidence(1)], idempotency_key="a")
        with pytest.raises(Conflict) as got:
            store.create(make_header("job-1"), idempotency_key="b")
        # A taken job id is neither a moved revision nor a lease problem.
        assert not isinstance(got.value, (RevisionMoved, LeaseLost, LeaseHeld)), got.value
        with pytest.raises(Conflict):
            store.create(make_header("job-1"))
        store.create(make_header("job-2"))
        with pytest.raises(Conflict):
            store.create(make_header("job-2"))
        assert store.read("job-1").events == (evidence(1),)
        assert list(store.list()) == ["job-1", "job-2"]

    def test_create_with_events(self, store: Records) -> None:
        events: list[AnyEvent] = [evidence(1), control(), decision(1), evidence(2, detail="x")]
        store.create(make_header("job-1"), events)
        view = store.read("job-1")
        assert view.revision == 4
        # Nobody can own a job before it exists: decisions written by create carry token 0.
        assert [e.token for e in view.events] == [None, None, 0, None]
        assert view.events == (events[0], events[1], attrs.evolve(events[2], token=0), events[3])

    def test_create_refuses_what_it_cannot_record(self, store: Records) -> None:
        naive = datetime(2026, 1, 1)
        with pytest.raises(Invalid):
            store.create(make_header("job-1"), [evidence(1), evidence(2, at=naive)])
        with pytest.raises(Invalid):
            store.create(make_header("job-2", at=naive))
        with pytest.raises(Invalid):
            store.create(make_header(""))
        assert list(store.list()) == []

    # --------------------------------------------------------------------------------- read

    def test_read_unknown_job_is_not_found(self, store: Records) -> None:
        with pytest.raises(NotFound):
            store.read("nobody")

    # ------------------------------------------------------------------------------- append

    def test_append_is_conditional_on_the_revision(self, store: Records) -> None:
        store.create(make_header("job-1"))
        assert store.append("job-1", [evidence(1)], expect_revision=0) == 1
        assert store.append("job-1", [evidence(2), control()], expect_revision=1) == 3
        for stale in (0, 1, 2, 4, 100):
            with pytest.raises(RevisionMoved):
                store.append("job-1", [evidence(9)], expect_revision=stale)
        assert store.read("job-1").events == (evidence(1), evidence(2), control())

    def test_append_to_unknown_job_is_not_found(self, store: Records) -> None:
        with pytest.raises(NotFound):
            store.append("nobody", [evidence(1)], expect_revision=0)

    def test_append_nothing_checks_the_revision_only(self, store: Records) -> None:
        store.create(make_header("job-1"), [evidence(1)])
        assert store.append("job-1", [], expect_revision=1) == 1
        with pytest.raises(RevisionMoved):
            store.append("job-1", [], expect_revision=0)

    def test_append_is_all_or_nothing(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        naive = datetime(2026, 1, 1)
        with pytest.raises(Invalid):
            store.append("job-1", [evidence(1), evidence(2, at=naive)], expect_revision=0)
        with pytest.raises(LeaseLost):
            store.append("job-1", [evidence(1), decision(1)], expect_revision=0)
        with pytest.raises(Invalid):
            store.append("job-1", [evidence(1), "not an event"], expect_revision=0)  # type: ignore[list-item]
        assert store.read("job-1").revision == 0
        lease = store.acquire("job-1", "sup", _ttl(10))
        clock.advance(10)
        with pytest.raises(LeaseLost):
            store.append("job-1", [evidence(1), decision(1)], expect_revision=0, owner=lease)
        assert store.read("job-1").revision == 0

    def test_controls_and_evidence_need_no_lease(self, store: Records) -> None:
        store.create(make_header("job-1"))
        store.acquire("job-1", "someone-else", _ttl(60))
        revision = store.append("job-1", [evidence(1), control()], expect_revision=0)
        # A token handed in on a control or evidence is not stored: only decisions carry one.
        forged = attrs.evolve(evidence(2), token=99)
        assert store.append("job-1", [forged], expect_revision=revision) == 3
        assert [e.token for e in store.read("job-1").events] == [None, None, None]

    def test_evidence_with_a_stale_lease_is_still_recorded(
        self, store: Records, clock: ManualClock
    ) -> None:
        store.create(make_header("job-1"))
        old = store.acquire("job-1", "a", _ttl(5))
        clock.advance(6)
        store.acquire("job-1", "b", _ttl(5))
        assert store.append("job-1", [evidence(1)], expect_revision=0, owner=old) == 1

    def test_decisions_need_the_lease_and_carry_its_token(self, store: Records) -> None:
        store.create(make_header("job-1"))
        with pytest.raises(LeaseLost):
            store.append("job-1", [decision(1)], expect_revision=0)
        lease = store.acquire("job-1", "sup", _ttl(30))
        forged = attrs.evolve(decision(1), token=lease.token + 7)
        assert store.append("job-1", [forged, evidence(1)], expect_revision=0, owner=lease) == 2
        assert [e.token for e in store.read("job-1").events] == [lease.token, None]

    def test_fencing_after_the_lease_was_taken(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        old = store.acquire("job-1", "a", _ttl(10))
        store.append("job-1", [decision(1)], expect_revision=0, owner=old)
        clock.advance(11)
        new = store.acquire("job-1", "b", _ttl(10))
        assert new.token > old.token
        # The revision is right, the lease is not: refused, and nothing is written.
        with pytest.raises(LeaseLost):
            store.append("job-1", [decision(2)], expect_revision=1, owner=old)
        assert store.append("job-1", [decision(2)], expect_revision=1, owner=new) == 2
        assert [e.token for e in store.read("job-1").events] == [old.token, new.token]

    def test_fencing_after_expiry_alone(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", _ttl(10))
        clock.advance(9.999)
        assert store.append("job-1", [decision(1)], expect_revision=0, owner=lease) == 1
        clock.advance(0.001)  # exactly at expiry: no longer current
        with pytest.raises(LeaseLost):
            store.append("job-1", [decision(2)], expect_revision=1, owner=lease)
        assert store.read("job-1").revision == 1

    def test_fencing_after_release(self, store: Records) -> None:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", _ttl(10))
        store.release(lease)
        with pytest.raises(LeaseLost):
            store.append("job-1", [decision(1)], expect_revision=0, owner=lease)

    def test_a_forged_or_foreign_lease_is_refused(self, store: Records) -> None:
        store.create(make_header("job-1"))
        store.create(make_header("job-2"))
        lease = store.acquire("job-1", "a", _ttl(10))
        other = store.acquire("job-2", "a", _ttl(10))
        for bad in (
            attrs.evolve(lease, token=lease.token + 1),
            attrs.evolve(lease, holder="b"),
            other,
        ):
            with pytest.raises(LeaseLost):
                store.append("job-1", [decision(1)], expect_revision=0, owner=bad)
        assert store.read("job-1").revision == 0

    # ------------------------------------------------------------------------------- leases

    def test_acquire_unknown_job_is_not_found(self, store: Records) -> None:
        with pytest.raises(NotFound):
            store.acquire("nobody", "a", _ttl(10))

    def test_a_live_lease_excludes_others(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", _ttl(10))
        assert lease == Lease("job-1", "a", lease.token, clock() + _ttl(10))
        with pytest.raises(LeaseHeld):
            store.acquire("job-1", "b", _ttl(10))
        clock.advance(10)
        taken = store.acquire("job-1", "b", _ttl(10))
        assert taken.holder == "b"
        assert taken.token > lease.token

    def test_reacquire_while_live_renews_under_the_same_token(
        self, store: Records, clock: ManualClock
    ) -> None:
        store.create(make_header("job-1"))
        first = store.acquire("job-1", "a", _ttl(10))
        clock.advance(5)
        again = store.acquire("job-1", "a", _ttl(10))
        assert again == Lease("job-1", "a", first.token, clock() + _ttl(10))
        # Both name the same ownership: decisions under either are accepted.
        store.append("job-1", [decision(1)], expect_revision=0, owner=first)

    def test_reacquire_after_expiry_gets_a_new_token(
        self, store: Records, clock: ManualClock
    ) -> None:
        store.create(make_header("job-1"))
        first = store.acquire("job-1", "a", _ttl(10))
        clock.advance(10)
        again = store.acquire("job-1", "a", _ttl(10))
        assert again.token > first.token
        with pytest.raises(LeaseLost):
            store.append("job-1", [decision(1)], expect_revision=0, owner=first)

    def test_tokens_only_grow(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        store.create(make_header("job-2"))
        tokens = []
        for i in range(12):
            holder = ("a", "b", "a", "c")[i % 4]
            lease = store.acquire("job-1", holder, _ttl(10))
            tokens.append(lease.token)
            if i % 3 == 0:
                store.release(lease)
            elif i % 3 == 1:
                clock.advance(10)
            else:
                store.release(lease)
                store.release(lease)  # twice: the second is ignored
        assert tokens == sorted(set(tokens)), tokens
        # Tokens are per job: another job's history does not matter.
        assert store.acquire("job-2", "a", _ttl(10)).token >= 1

    def test_renew(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", _ttl(10))
        clock.advance(8)
        renewed = store.renew(lease, _ttl(10))
        assert renewed == Lease("job-1", "a", lease.token, clock() + _ttl(10))
        clock.advance(8)  # past the first expiry, within the renewed one
        store.append("job-1", [decision(1)], expect_revision=0, owner=renewed)
        store.append("job-1", [decision(2)], expect_revision=1, owner=lease)  # same ownership

    def test_renew_after_expiry_or_takeover_conflicts(
        self, store: Records, clock: ManualClock
    ) -> None:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", _ttl(10))
        clock.advance(10)
        with pytest.raises(LeaseLost):
            store.renew(lease, _ttl(10))
        taken = store.acquire("job-1", "b", _ttl(10))
        with pytest.raises(LeaseLost):
            store.renew(lease, _ttl(10))
        store.release(taken)
        with pytest.raises(LeaseLost):
            store.renew(taken, _ttl(10))

    def test_release_lets_anyone_acquire(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        a = store.acquire("job-1", "a", _ttl(60))
        store.release(a)
        b = store.acquire("job-1", "b", _ttl(60))
        assert b.token > a.token
        store.release(a)  # no longer current: ignored, b keeps the job
        with pytest.raises(LeaseHeld):
            store.acquire("job-1", "c", _ttl(60))
        store.append("job-1", [decision(1)], expect_revision=0, owner=b)

    def test_ttl_must_be_positive(self, store: Records) -> None:
        store.create(make_header("job-1"))
        for ttl in (timedelta(0), timedelta(seconds=-1)):
            with pytest.raises(Invalid):
                store.acquire("job-1", "a", ttl)

    # --------------------------------------------------------------------------------- list

    def test_list_filters_in_creation_order(self, store: Records) -> None:
        assert list(store.list()) == []
        names = [f"job-{i:02}" for i in (5, 3, 9, 1, 7)]
        for i, job in enumerate(names):
            store.create(make_header(job), [settle()] if i % 2 else [evidence(1)])
        lease = store.acquire("job-05", "sup", _ttl(60))
        store.append("job-05", [settle()], expect_revision=1, owner=lease)
        assert list(store.list()) == names
        assert list(store.list(ListFilter())) == names
        assert list(store.list(ListFilter(settled=True))) == ["job-05", "job-03", "job-01"]
        assert list(store.list(ListFilter(settled=False))) == ["job-09", "job-07"]

    def test_a_survey_tells_revisions_members_and_unexpired_leases(
        self, store: Records, clock: ManualClock
    ) -> None:
        """``survey()`` is optional (spec 0002 D4): a store that offers it answers every job's
        revision in creation order, every member not yet pruned with its expiry, and the
        unexpired leases per holder, by the store's clock."""
        if not isinstance(store, Surveyed):
            pytest.skip("the store does not offer survey() (optional)")
        for job in ("sv-b", "sv-a", "sv-c"):
            store.create(make_header(job, at=clock()))
        store.append("sv-a", [evidence(1)], expect_revision=0)
        store.announce("m1", _ttl(10))
        store.acquire("sv-b", "m1", _ttl(10))
        store.acquire("sv-c", "m1", _ttl(30))
        survey = store.survey()
        assert list(survey.revisions.items()) == [("sv-b", 0), ("sv-a", 1), ("sv-c", 0)]
        assert list(survey.members) == ["m1"] and survey.members["m1"] > survey.now
        assert dict(survey.leases) == {"m1": 2}
        clock.advance(11)
        later = store.survey()
        assert dict(later.leases) == {"m1": 1}  # sv-b's lease lapsed, sv-c's has not
        assert later.members["m1"] <= later.now  # lapsed, and nobody announced to prune it

    def test_revisions_tells_each_records_revision_without_reading_it(
        self, store: Records, clock: ManualClock
    ) -> None:
        """``revisions()`` is optional: a store that offers it answers, per job in request
        order, the revision a read would give now (after create, after each append, after
        settlement), and None for a job it has no record of; a reader that keeps figures
        derived from records trusts them only at the revision they came from."""
        if not isinstance(store, Revisions):
            pytest.skip("the store does not offer revisions() (optional)")
        assert store.revisions([]) == ()
        store.create(make_header("rv-a", at=clock()))
        store.create(make_header("rv-b", at=clock()), [evidence(1), evidence(2)])
        assert store.revisions(["rv-a", "rv-b", "rv-none"]) == (0, 2, None)
        store.append("rv-a", [evidence(3)], expect_revision=0)
        lease = store.acquire("rv-b", "m1", _ttl(10))
        store.append("rv-b", [settle()], expect_revision=2, owner=lease)
        assert store.revisions(["rv-b", "rv-a", "rv-b"]) == (3, 1, 3)
        store.append("rv-b", [evidence(4)], expect_revision=3)  # a settled record still grows
        got = store.revisions(["rv-a", "rv-b"])
        assert got == (1, 4)
        assert got == tuple(len(store.read(job).events) for job in ("rv-a", "rv-b"))
        with pytest.raises(Invalid):
            store.revisions("rv-a")  # one string where job ids are wanted

    def test_a_survey_tells_what_each_member_measured_absent_when_unmeasured(
        self, store: Records, clock: ManualClock
    ) -> None:
        """What a member publishes with its announcement (``Measured``, issue 28) is what a
        survey answers for it, replaced by its next announcement, absent when it published
        nothing or has withdrawn; never a zero for something not measured."""
        if not isinstance(store, Surveyed):
            pytest.skip("the store does not offer survey() (optional)")
        store.announce("m-a", _ttl(30), Measured(poll_seconds=0.125, commit_seconds=0.5))
        store.announce("m-b", _ttl(30), Measured(poll_seconds=2.0))
        store.announce("m-c", _ttl(30))
        survey = store.survey()
        assert dict(survey.measured) == {
            "m-a": Measured(poll_seconds=0.125, commit_seconds=0.5),
            "m-b": Measured(poll_seconds=2.0),
        }
        store.announce("m-a", _ttl(30), Measured(commit_seconds=0.25))
        store.announce("m-b", _ttl(30))
        store.withdraw("m-c")
        assert dict(store.survey().measured) == {"m-a": Measured(commit_seconds=0.25)}
        store.withdraw("m-a")
        assert dict(store.survey().measured) == {}

    def test_a_measurement_that_is_not_seconds_is_refused(self) -> None:
        for bad in (-1.0, float("nan"), float("inf"), True):
            with pytest.raises(Invalid, match="seconds"):
                Measured(poll_seconds=bad)

    def test_list_never_misses_a_job(self, store: Records) -> None:
        created = []
        for i in range(600):
            job = f"j{(i * 7919) % 1000:04}"
            store.create(make_header(job), [settle()] if i % 3 == 0 else [])
            created.append(job)
        assert list(store.list()) == created
        settled = list(store.list(ListFilter(settled=True)))
        unsettled = list(store.list(ListFilter(settled=False)))
        assert settled == created[::3]
        assert sorted(settled + unsettled) == sorted(created)
        # Jobs created while a listing is under way: every one created before it began is
        # streamed, whatever happens meanwhile.
        seen = []
        for i, job in enumerate(store.list()):
            seen.append(job)
            if i % 100 == 0:
                store.create(make_header(f"late-{i}"))
        assert seen[: len(created)] == created

    # ------------------------------------------------------------------------------- large

    def test_a_large_record_reads_back_intact(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("big"))
        lease = store.acquire("big", "sup", timedelta(hours=1))
        events: list[AnyEvent] = []
        revision = 0
        for batch in (5000, 1000, 1000, 1000, 1000, 999, 1):
            chunk: list[AnyEvent] = [
                decision(revision + i) if i % 10 == 0 else evidence(revision + i, detail="x" * 40)
                for i in range(batch)
            ]
            revision = store.append("big", chunk, expect_revision=revision, owner=lease)
            events.extend(attrs.evolve(e, token=lease.token) if e.decision else e for e in chunk)
        assert revision == 10_000
        view = store.read("big")
        assert view.revision == 10_000
        assert view.events == tuple(events)

    # ------------------------------------------------------------------------- concurrency

    def test_racing_appenders_one_wins_each_revision(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        store.create(make_header("race"))
        launch = make_concurrent_appenders(store)
        n, rounds = self.appenders, self.race_rounds
        results = launch(race_rounds, n, "race", rounds)
        for r in range(rounds):
            winners = [i for i in range(n) if results[i][r]]
            assert len(winners) == 1, f"round {r}: winners {winners}"
        view = store.read("race")
        assert view.revision == rounds
        for r, event in enumerate(view.events):
            winner = next(i for i in range(n) if results[i][r])
            assert event == evidence(r, detail=f"appender-{winner}")

    def test_appenders_retrying_leave_no_gap_and_no_duplicate(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        store.create(make_header("race"))
        launch = make_concurrent_appenders(store)
        n, wins = self.appenders, self.race_rounds
        results = launch(append_until, n, "race", wins)
        every = sorted(r for won in results for r in won)
        assert every == list(range(1, n * wins + 1))
        view = store.read("race")
        assert view.revision == n * wins
        for i, won in enumerate(results):
            for k, revision in enumerate(won):
                assert view.events[revision - 1] == evidence(k, detail=f"appender-{i}")

    def test_racing_acquirers_one_owner_at_a_time(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        store.create(make_header("owned"))
        launch = make_concurrent_appenders(store)
        n, rounds = self.appenders, max(3, self.race_rounds // 3)
        results = launch(race_acquire, n, "owned", rounds)
        tokens: list[int] = []
        for r in range(rounds):
            won = [t for i in range(n) if (t := results[i][r]) is not None]
            assert len(won) == 1, f"round {r}: tokens {won}"
            tokens.extend(won)
        assert tokens == sorted(set(tokens))
        view = store.read("owned")
        assert [e.token for e in view.events] == tokens

    def test_racing_batches_one_wins_each_job_each_revision(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        jobs = create_jobs(store, "race-1", "race-2", "race-3")
        launch = make_concurrent_appenders(store)
        n, rounds = self.appenders, self.race_rounds
        results = launch(race_batch_rounds, n, jobs, rounds)
        for k, job in enumerate(jobs):
            view = store.read(job)
            assert view.revision == rounds, job
            for r in range(rounds):
                winners = [i for i in range(n) if results[i][r][k]]
                assert len(winners) == 1, f"{job} round {r}: winners {winners}"
                assert view.events[r] == evidence(r, detail=f"appender-{winners[0]}")

    def test_batches_retrying_leave_no_gap_and_no_duplicate(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        jobs = create_jobs(store, "race-1", "race-2", "race-3")
        launch = make_concurrent_appenders(store)
        n, wins = self.appenders, max(3, self.race_rounds // 3)
        results = launch(batch_append_until, n, jobs, wins)
        for job in jobs:
            every = sorted(r for won in results for r in won[job])
            assert every == list(range(1, n * wins + 1)), job
            view = store.read(job)
            for i, won in enumerate(results):
                for k, revision in enumerate(won[job]):
                    assert view.events[revision - 1] == evidence(k, detail=f"appender-{i}")

    def test_racing_batch_acquirers_one_owner_per_job_at_a_time(
        self, store: Records, make_concurrent_appenders: Callable[[Records], Launcher]
    ) -> None:
        jobs = create_jobs(store, "owned-1", "owned-2", "owned-3")
        launch = make_concurrent_appenders(store)
        n, rounds = self.appenders, max(3, self.race_rounds // 3)
        results = launch(race_batch_acquire, n, jobs, rounds)
        for job in jobs:
            tokens: list[int] = []
            for r in range(rounds):
                won = [results[i][r][job] for i in range(n) if job in results[i][r]]
                assert len(won) == 1, f"{job} round {r}: tokens {won}"
                tokens.extend(won)
            assert tokens == sorted(set(tokens)), (job, tokens)
            assert [e.token for e in store.read(job).events] == tokens

    # ---------------------------------------------------------------------- unreadable records

    @pytest.mark.parametrize("revision", [0, 2], ids=["header", "event"])
    def test_an_unreadable_record_hides_no_other(
        self,
        store: Records,
        clock: ManualClock,
        damage: Callable[[Records, ManualClock, str, int], Records],
        revision: int,
    ) -> None:
        for job in ("job-1", "job-2", "job-3"):
            store.create(make_header(job), [evidence(1), evidence(2, detail=job)])
        store.append(
            "job-3", [settle()], expect_revision=2, owner=store.acquire("job-3", "h", _ttl(60))
        )
        good = {job: store.read(job) for job in ("job-1", "job-3")}
        store = damage(store, clock, "job-2", revision)
        # Reading the damaged record is the typed error, naming the job and the value ...
        with pytest.raises(Unreadable) as info:
            store.read("job-2")
        assert (info.value.job, info.value.revision) == ("job-2", revision)
        assert "job-2" in str(info.value)
        # ... every other record reads as before, and list still streams every job: it never
        # decodes a record, so one it cannot read hides nothing.
        assert {job: store.read(job) for job in good} == good
        assert list(store.list()) == ["job-1", "job-2", "job-3"]
        assert list(store.list(ListFilter(settled=False))) == ["job-1", "job-2"]
        assert list(store.list(ListFilter(settled=True))) == ["job-3"]
        # Refusing to read changed nothing: it is still refused.
        with pytest.raises(Unreadable):
            store.read("job-2")
        # Read together, the damaged record is its own answer and the others read as before.
        first, damaged, third = store.read_many(["job-1", "job-2", "job-3"])
        assert isinstance(damaged, Unreadable)
        assert (damaged.job, damaged.revision) == ("job-2", revision)
        assert (first, third) == (good["job-1"], good["job-3"])

    # ------------------------------------------------------------------------------ batches

    def test_batch_read_answers_every_job_in_order(self, store: Records) -> None:
        for job in ("job-1", "job-2", "job-3"):
            store.create(make_header(job), [evidence(1, detail=job)])
        store.append("job-2", [evidence(2)], expect_revision=1)
        answers = store.read_many(["job-3", "unknown", "job-1", "job-3", "job-2"])
        assert len(answers) == 5
        assert isinstance(answers[1], NotFound)
        assert "unknown" in str(answers[1])
        read = ["job-3", "job-1", "job-3", "job-2"]
        for job, answer in zip(read, answers[:1] + answers[2:], strict=True):
            assert answer == store.read(job), job
        assert isinstance(answers[4], View)
        assert answers[4].revision == 2
        assert store.read_many([]) == ()

    def test_batch_read_sees_every_commit_before_it(self, store: Records) -> None:
        store.create(make_header("job-1"), [evidence(1)])
        store.create(make_header("job-2"), [evidence(1)])
        before = store.read_many(["job-1", "job-2"])
        store.append("job-1", [evidence(2), control()], expect_revision=1)
        after = store.read_many(["job-1", "job-2"])
        assert [a.revision for a in after if isinstance(a, View)] == [3, 1]
        assert after[1] == before[1]
        assert isinstance(after[0], View)
        assert after[0].events == (evidence(1), evidence(2), control())

    @pytest.mark.parametrize("jobs", [[1], ["job-1", None], "job-1", [b"job-1"]])
    def test_a_malformed_batch_read_is_invalid(self, store: Records, jobs: Any) -> None:
        store.create(make_header("job-1"))
        with pytest.raises(Invalid):
            store.read_many(jobs)

    def test_batch_append_answers_every_job_in_request_order(self, store: Records) -> None:
        for job in ("job-1", "job-2", "job-3"):
            store.create(make_header(job), [evidence(1)])
        # Two leases with different tokens: each part's decisions carry its own.
        store.release(store.acquire("job-2", "sup", _ttl(60)))
        second = store.acquire("job-2", "sup", _ttl(60))
        first = store.acquire("job-3", "sup", _ttl(60))
        assert second.token != first.token or second.job != first.job
        answers = store.append_many(
            [
                AppendRequest(job="job-3", events=(decision(1),), expect_revision=1, owner=first),
                AppendRequest(job="job-1", events=(evidence(2), control()), expect_revision=1),
                AppendRequest(
                    job="job-2", events=(decision(1), evidence(2)), expect_revision=1, owner=second
                ),
            ]
        )
        assert answers == (2, 3, 3)
        assert store.read("job-1").events == (evidence(1), evidence(2), control())
        assert [e.token for e in store.read("job-2").events] == [None, second.token, None]
        assert [e.token for e in store.read("job-3").events] == [None, first.token]

    def test_batch_append_one_refusal_never_affects_another(
        self, store: Records, clock: ManualClock
    ) -> None:
        jobs = ("ok-1", "moved", "no-lease", "fenced", "expired", "foreign", "ok-2", "ok-3")
        for job in jobs:
            store.create(make_header(job), [evidence(1)])
        ok = store.acquire("ok-1", "sup", _ttl(60))
        stale = store.acquire("fenced", "sup", _ttl(5))
        expiring = store.acquire("expired", "sup", _ttl(5))
        other_job = store.acquire("ok-2", "sup", _ttl(60))
        clock.advance(5)  # "fenced" and "expired" lapse; the others are still live
        taken = store.acquire("fenced", "thief", _ttl(60))
        assert taken.token > stale.token
        ok = store.renew(ok, _ttl(60))

        def part(job: str, owner: Lease | None = None, revision: int = 1) -> AppendRequest:
            # Evidence first, then a decision: a refused part must leave neither behind.
            events = (evidence(2, detail=job), decision(2))
            return AppendRequest(job=job, events=events, expect_revision=revision, owner=owner)

        requests = [
            part("ok-1", ok),
            AppendRequest(job="moved", events=(evidence(2),), expect_revision=0),
            part("no-lease"),  # LeaseLost: decisions without a lease
            part("fenced", stale),  # LeaseLost: the right revision, a stale token
            part("expired", expiring),  # LeaseLost: expired, nobody took it
            part("foreign", other_job),  # LeaseLost: another job's lease
            AppendRequest(job="nobody", events=(evidence(2),), expect_revision=1),
            part("ok-2", other_job),
            AppendRequest(job="ok-3", events=(evidence(2, detail="ok-3"),), expect_revision=1),
        ]
        answers = store.append_many(requests)
        assert len(answers) == len(requests)
        assert answers[0] == 3
        _assert_refusal(answers[1], RevisionMoved)
        for i in (2, 3, 4, 5):
            _assert_refusal(answers[i], LeaseLost)
        _assert_refusal(answers[6], NotFound)
        assert answers[7:] == (3, 2)
        for job in ("moved", "no-lease", "fenced", "expired", "foreign"):
            assert store.read(job).events == (evidence(1),), job
        assert [e.token for e in store.read("ok-1").events] == [None, None, ok.token]
        assert [e.token for e in store.read("ok-2").events] == [None, None, other_job.token]
        assert store.read("ok-3").events == (evidence(1), evidence(2, detail="ok-3"))
        # The refusals are the ones the single form raises for the same part.
        for request, answer in zip(requests[1:7], answers[1:7], strict=True):
            assert isinstance(answer, (Conflict, NotFound))
            with pytest.raises(type(answer)):
                store.append(
                    request.job,
                    request.events,
                    expect_revision=request.expect_revision,
                    owner=request.owner,
                )

    def test_batch_append_applies_each_part_whole(self, store: Records) -> None:
        store.create(make_header("job-1"))
        store.create(make_header("job-2"))
        lease = store.acquire("job-2", "sup", _ttl(60))
        answers = store.append_many(
            [
                AppendRequest(job="job-1", events=(evidence(1), control()), expect_revision=0),
                AppendRequest(
                    job="job-2",
                    events=(evidence(1), decision(1), settle()),
                    expect_revision=0,
                    owner=lease,
                ),
            ]
        )
        assert answers == (2, 3)
        assert list(store.list(ListFilter(settled=True))) == ["job-2"]
        assert list(store.list(ListFilter(settled=False))) == ["job-1"]
        assert [_kind(e) for e in store.read("job-2").events] == ["evidence", "decision", "settle"]
        # A part that checks the revision only, and one given its events as an iterator.
        again = store.append_many(
            [
                AppendRequest(job="job-1", events=(), expect_revision=2),
                AppendRequest(job="job-2", events=(e for e in [evidence(2)]), expect_revision=3),
            ]
        )
        assert again == (2, 4)
        assert store.read("job-2").events[-1] == evidence(2)
        moved = store.append_many([AppendRequest(job="job-1", events=(), expect_revision=1)])
        _assert_refusal(moved[0], RevisionMoved)

    def test_an_empty_batch_answers_nothing(self, store: Records) -> None:
        store.create(make_header("job-1"))
        assert store.append_many([]) == ()
        assert store.acquire_many([], "sup", _ttl(10)) == ()
        assert store.renew_many([], _ttl(10)) == ()
        store.release_many([])
        assert store.read("job-1").revision == 0

    def test_an_invalid_batch_changes_nothing(self, store: Records, clock: ManualClock) -> None:
        store.create(make_header("job-1"))
        store.create(make_header("job-2"))
        held = store.acquire("job-2", "sup", _ttl(60))
        naive = datetime(2026, 1, 1)
        good = AppendRequest(job="job-1", events=(evidence(1),), expect_revision=0)
        bad_appends: list[Any] = [
            [good, AppendRequest(job="job-1", events=(evidence(2),), expect_revision=0)],
            [good, AppendRequest(job="job-2", events=("no event",), expect_revision=0)],  # type: ignore[arg-type]
            [good, AppendRequest(job="job-2", events=(evidence(1, at=naive),), expect_revision=0)],
            # Malformed is Invalid even where the part would be refused for its lease.
            [good, AppendRequest(job="job-2", events=(decision(1, at=naive),), expect_revision=0)],
            [good, ("job-2", [evidence(1)], 0)],
            [good, AppendRequest(job="", events=(evidence(1),), expect_revision=0)],
            good,
        ]
        for bad in bad_appends:
            with pytest.raises(Invalid):
                store.append_many(bad)
        free = "job-1"
        bad_leases: list[Callable[[], Any]] = [
            lambda: store.acquire_many([free, free], "sup", _ttl(10)),
            lambda: store.acquire_many([free], "sup", _ttl(0)),
            lambda: store.acquire_many([free], "", _ttl(10)),
            lambda: store.acquire_many(free, "sup", _ttl(10)),
            lambda: store.acquire_many([free, ""], "sup", _ttl(10)),
            lambda: store.renew_many([held, held], _ttl(10)),
            lambda: store.renew_many([held], timedelta(seconds=-1)),
            lambda: store.renew_many([held, "job-1"], _ttl(10)),  # type: ignore[list-item]
            lambda: store.release_many([held, held]),
            lambda: store.release_many([held, "job-1"]),  # type: ignore[list-item]
        ]
        for call in bad_leases:
            with pytest.raises(Invalid):
                call()
        # Nothing was written: no event, no lease taken, none renewed or released.
        assert store.read("job-1").revision == store.read("job-2").revision == 0
        clock.advance(30)
        other = store.acquire("job-1", "other", _ttl(10))
        assert other.token == 1  # job-1's first lease: no token was handed out before
        with pytest.raises(LeaseHeld):
            store.acquire("job-2", "other", _ttl(10))
        clock.advance(30)  # held's own expiry: it was not renewed by the refused batches
        assert store.acquire("job-2", "other", _ttl(10)).token > held.token

    def test_batch_acquire_answers_every_job(self, store: Records, clock: ManualClock) -> None:
        jobs = create_jobs(store, "free", "held", "mine", "lapsed", "released")
        theirs = store.acquire("held", "other", _ttl(60))
        mine = store.acquire("mine", "sup", _ttl(60))
        lapsed = store.acquire("lapsed", "other", _ttl(5))
        store.release(store.acquire("released", "other", _ttl(60)))
        clock.advance(5)
        answers = store.acquire_many([*jobs, "nobody"], "sup", _ttl(30))
        assert answers[0] == Lease("free", "sup", 1, clock() + _ttl(30))
        _assert_refusal(answers[1], LeaseHeld)
        # One's own live lease: renewed under the same token.
        assert answers[2] == Lease("mine", "sup", mine.token, clock() + _ttl(30))
        assert answers[3] == Lease("lapsed", "sup", lapsed.token + 1, clock() + _ttl(30))
        assert isinstance(answers[4], Lease)
        assert answers[4].token == 2
        _assert_refusal(answers[5], NotFound)
        # What was acquired is owned: anyone else is refused; "held" is still theirs.
        for job in ("free", "mine", "lapsed", "released"):
            with pytest.raises(LeaseHeld):
                store.acquire(job, "third", _ttl(10))
        assert store.acquire("held", "other", _ttl(60)).token == theirs.token

    def test_batch_renew_answers_every_lease(self, store: Records, clock: ManualClock) -> None:
        create_jobs(store, "live", "lapsed", "taken", "released")
        live = store.acquire("live", "sup", _ttl(10))
        lapsed = store.acquire("lapsed", "sup", _ttl(5))
        taken = store.acquire("taken", "sup", _ttl(5))
        released = store.acquire("released", "sup", _ttl(60))
        store.release(released)
        clock.advance(5)
        store.acquire("taken", "thief", _ttl(60))
        ghost = Lease("nobody", "sup", 1, clock() + _ttl(60))
        answers = store.renew_many([live, lapsed, taken, released, ghost], _ttl(20))
        assert answers[0] == Lease("live", "sup", live.token, clock() + _ttl(20))
        for i in (1, 2, 3):
            _assert_refusal(answers[i], LeaseLost)
        _assert_refusal(answers[4], NotFound)
        clock.advance(15)  # past the first expiry, within the renewed one
        assert store.append("live", [decision(1)], expect_revision=0, owner=live) == 1
        # An expired lease is never revived: its holder must acquire again, with a new token.
        with pytest.raises(LeaseLost):
            store.append("lapsed", [decision(1)], expect_revision=0, owner=lapsed)

    def test_batch_release(self, store: Records, clock: ManualClock) -> None:
        create_jobs(store, "job-1", "job-2", "job-3")
        one = store.acquire("job-1", "sup", _ttl(60))
        old = store.acquire("job-2", "sup", _ttl(5))
        clock.advance(5)
        new = store.acquire("job-2", "next", _ttl(60))
        three = store.acquire("job-3", "sup", _ttl(60))
        # A lease of a job the store never had cannot be one of its own: NotFound, and
        # nothing of the batch is released.
        with pytest.raises(NotFound):
            store.release_many([one, three, Lease("nobody", "sup", 1, clock() + _ttl(60))])
        for job in ("job-1", "job-3"):
            with pytest.raises(LeaseHeld):
                store.acquire(job, "other", _ttl(10))
        store.release_many([one, old, three])  # old is stale: ignored
        assert store.acquire("job-1", "other", _ttl(10)).token > one.token
        assert store.acquire("job-3", "other", _ttl(10)).token > three.token
        with pytest.raises(LeaseHeld):
            store.acquire("job-2", "other", _ttl(10))
        assert store.append("job-2", [decision(1)], expect_revision=0, owner=new) == 1

    # ------------------------------------------------------------------------------ members

    def test_announce_answers_the_live_members(self, store: Records, clock: ManualClock) -> None:
        assert store.announce("sup-b", _ttl(10)) == ("sup-b",)
        clock.advance(4)
        assert store.announce("sup-a", _ttl(10)) == ("sup-a", "sup-b")
        clock.advance(4)
        # Announcing again extends the member's ttl from now.
        assert store.announce("sup-b", _ttl(10)) == ("sup-a", "sup-b")
        clock.advance(6)  # sup-a's announcement (until 14) has run out; sup-b's (until 18) not
        assert store.announce("sup-c", _ttl(10)) == ("sup-b", "sup-c")
        clock.advance(20)
        assert store.announce("sup-a", _ttl(10)) == ("sup-a",)

    def test_members_are_not_jobs(self, store: Records) -> None:
        store.create(make_header("job-1"))
        store.announce("sup-a", _ttl(60))
        assert list(store.list()) == ["job-1"]
        with pytest.raises(NotFound):
            store.read("sup-a")

    def test_withdraw_drops_a_member_at_once(self, store: Records) -> None:
        store.announce("sup-a", _ttl(60))
        store.announce("sup-b", _ttl(60))
        store.withdraw("sup-a")
        store.withdraw("never-announced")  # ignored
        assert store.announce("sup-b", _ttl(60)) == ("sup-b",)

    def test_members_outlive_a_reopen(
        self,
        store: Records,
        clock: ManualClock,
        reopen: Callable[[Records, ManualClock], Records],
    ) -> None:
        # A supervisor that restarts its store connection is still counted by the others.
        store.announce("sup-a", _ttl(60))
        again = reopen(store, clock)
        assert again.announce("sup-b", _ttl(60)) == ("sup-a", "sup-b")

    def test_announce_refuses_a_nameless_member_or_a_bad_ttl(self, store: Records) -> None:
        for member, ttl in (("", _ttl(10)), ("sup", _ttl(0)), ("sup", _ttl(-1))):
            with pytest.raises(Invalid):
                store.announce(member, ttl)
        with pytest.raises(Invalid):
            store.withdraw("")
        assert store.announce("sup", _ttl(10)) == ("sup",)

    def test_tokens_only_grow_through_batches(self, store: Records, clock: ManualClock) -> None:
        jobs = create_jobs(store, "job-1", "job-2", "job-3")
        tokens: dict[str, list[int]] = {job: [] for job in jobs}
        for i in range(12):
            holder = ("a", "b", "a", "c")[i % 4]
            if i % 4 == 3:
                got: list[Lease | Conflict | NotFound] = [
                    store.acquire(job, holder, _ttl(10)) for job in jobs
                ]
            else:
                got = list(store.acquire_many(jobs[i % 3 :] + jobs[: i % 3], holder, _ttl(10)))
            leases = [lease for lease in got if isinstance(lease, Lease)]
            assert len(leases) == len(jobs), got
            for lease in leases:
                tokens[lease.job].append(lease.token)
            if i % 3 == 0:
                store.release_many(leases)
            elif i % 3 == 1:
                clock.advance(10)
            else:
                store.release_many(leases[:1])
                store.release(leases[1])
                store.release_many(leases)  # the first two a second time: ignored
        for job, seen in tokens.items():
            assert seen == sorted(set(seen)), (job, seen)

    # ------------------------------------------------------------------------------- model

    def test_against_a_model(self, make_store: Callable[[ManualClock], Records]) -> None:
        """Random sequences of create, append, acquire, renew, release and time passing give
        the answers a plain model of the promises gives, and the store reads back as the
        model says after every step."""

        class Machine(RuleBasedStateMachine):
            def __init__(self) -> None:
                super().__init__()
                self.clock = ManualClock()
                self.store = make_store(self.clock)
                self.model = _Model(self.store, self.clock)

            @rule(op=_ops)
            def step(self, op: tuple[Any, ...]) -> None:
                self.model.step(op)

            @invariant()
            def reads_as_modelled(self) -> None:
                self.model.check()

            def teardown(self) -> None:
                self.store.close()

        run_state_machine_as_test(
            Machine,
            settings=settings(
                max_examples=self.model_examples,
                stateful_step_count=40,
                # One failure, shrunk: a broken store fails many ways, and shrinking each
                # separately takes minutes.
                report_multiple_bugs=False,
                # Without the "explain" phase, whose line tracing slows the shrinker tenfold.
                phases=[Phase.explicit, Phase.reuse, Phase.generate]
                + ([Phase.shrink] if self.model_shrink else []),
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )

    # ------------------------------------------------------------------------------ durable

    def test_reopened_store_keeps_records_leases_and_tokens(
        self,
        store: Records,
        clock: ManualClock,
        reopen: Callable[[Records, ManualClock], Records],
    ) -> None:
        store.create(make_header("job-1"), [evidence(1)], idempotency_key="k")
        store.create(make_header("job-2"), [settle()])
        lease = store.acquire("job-1", "a", _ttl(60))
        store.append("job-1", [decision(1)], expect_revision=1, owner=lease)
        before = store.read("job-1")
        again = reopen(store, clock)
        assert again.read("job-1") == before
        assert list(again.list()) == ["job-1", "job-2"]
        assert list(again.list(ListFilter(settled=True))) == ["job-2"]
        assert again.create(make_header("job-3"), idempotency_key="k") == Created(
            job="job-1", created=False
        )
        # The lease is still held, and its token still fences.
        with pytest.raises(LeaseHeld):
            again.acquire("job-1", "b", _ttl(60))
        again.append("job-1", [decision(2)], expect_revision=2, owner=lease)
        again.release(lease)
        third = reopen(again, clock)
        assert third.acquire("job-1", "b", _ttl(60)).token > lease.token
