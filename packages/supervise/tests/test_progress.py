"""The supervisor reads progress and acts on stalls through the rules (spec 0004, "Progress"):
on the memory adapter, with the in-memory progress source playing the jobs' helper."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta

import attrs
import pytest
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule, State, Status
from jobdispatch.errors import Unreachable
from jobdispatch.memory.progress import MemoryProgress
from jobdispatch.memory.shape import Shape
from jobdispatch.progress import Blind, JobProgress
from jobdispatch.records import events as ev
from jobdispatch.records.store import AppendRequest, ReadAnswer, Refusal
from jobdispatch.spi import Discovery, Growth, ObjectRef
from jobdispatch.testing import SUPERVISOR, T0, execution, job_of, observation, plan_for
from jobdispatch.triggers import Blind as BlindEscalation
from jobdispatch.types import (
    Charge,
    Enforcer,
    ObjectState,
    ProgressSource,
    StallAssignment,
    StallMode,
    StallRule,
)
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.progress import ProgressPoll

from .conftest import Scenario

ROOT = "s3://ckpt/team"
AFTER = timedelta(minutes=2)


def spec(*rules: Rule, mode: StallMode = StallMode.ENFORCE, root: str = ROOT) -> JobSpec:
    return JobSpec(
        command=["train"],
        name="s",
        recovery=RecoveryPolicy(rules=rules),
        progress=ProgressSource(root=root, record_every=timedelta(minutes=1)),
        stall=StallRule(after=AFTER, startup_grace=AFTER, mode=mode),
    )


def _supervisor(
    sc: Scenario, tick: Callable[[float], None], progress: MemoryProgress
) -> Supervisor:
    """The scenario's supervisor, sleeping through ``tick`` (which plays the job's helper)."""
    return Supervisor(
        sc.backend,
        sc.store,
        clock=sc.clock,
        sleep=tick,
        poll=1.0,
        sinks=sc.sinks,
        progress=progress,
    )


def _ticking(sc: Scenario, act: Callable[[Status, int], None]) -> Callable[[float], None]:
    """The scenario's tick, then ``act(status, n)`` while the latest submission ``n``'s latest
    execution runs: the job's helper marking progress (or the scheduler ending the run)."""

    def tick(seconds: float) -> None:
        Scenario.tick(sc, seconds)
        status = sc.status()
        n = len(status.submissions)
        sub = status.submissions[-1] if n else None
        if sub is None or not sub.executions or sub.executions[-1].state.value != "running":
            return
        act(status, n)

    return tick


def test_a_hung_run_is_named_stalled_stopped_and_resubmitted() -> None:
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    sc.submit(spec(Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1), root=ROOT))
    hung = {"step": 0}

    def act(status: Status, n: int) -> None:
        if n == 1 and hung["step"] < 5:  # five steps, then a hang
            hung["step"] += 1
            progress.publish(ROOT, sc.job, hung["step"], sc.clock(), 1, "0")
        elif n == 2:
            progress.resume(ROOT, sc.job, 2, "0", sc.clock())
            sc.backend.env.complete(sc.canonical(status, 2))

    _supervisor(sc, _ticking(sc, act), progress).run(sc.job)
    status = sc.status()
    assert (status.state, status.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    first = status.submissions[0].executions[-1]
    assert first.cause is not None and first.cause.kind is CauseKind.STALLED
    assert "step 5" in first.cause.detail
    assert status.history[0].cause.kind is CauseKind.STALLED
    view = sc.store.read(sc.job)
    kinds = [e.kind for e in view.events]
    # The verdict and the stop were committed together, before the stop call.
    declared = kinds.index("stall-declared")
    assert kinds[declared + 1] == "stop-decided"
    assert "resumed-from" in kinds
    assert status.progress is not None and status.progress.resumed == ((2, "0", 5),)
    # Bounded evidence: far fewer progress events than steps published.
    assert 1 <= kinds.count("progress-seen") <= 5


def test_observe_mode_records_the_verdict_and_stops_nothing() -> None:
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    sc.submit(spec(mode=StallMode.OBSERVE))

    def tick(seconds: float) -> None:
        Scenario.tick(sc, seconds)
        status = sc.status()
        if status.progress is not None and status.progress.stalls:
            sc.backend.env.complete(sc.canonical(status, 1))

    _supervisor(sc, tick, progress).run(sc.job)
    status = sc.status()
    assert status.state is State.SUCCEEDED
    assert status.progress is not None and not status.progress.stalls[0].enforced
    assert "stop-decided" not in [e.kind for e in sc.store.read(sc.job).events]


def test_a_blind_source_never_stalls_and_escalates_past_its_bound() -> None:
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    progress.blind(ROOT)
    sc.submit(spec(Rule(on=[CauseKind.STALLED], action=Action.RESUBMIT, budget=1)))

    def tick(seconds: float) -> None:
        Scenario.tick(sc, seconds)
        status = sc.status()
        if any(isinstance(e.id, BlindEscalation) for e in status.escalations):
            sc.backend.env.complete(sc.canonical(status, 1))

    _supervisor(sc, tick, progress).run(sc.job)
    status = sc.status()
    events = sc.store.read(sc.job).events
    assert status.state is State.SUCCEEDED and len(status.submissions) == 1
    assert not any(isinstance(e, ev.StallDeclared) for e in events)
    assert sum(isinstance(e, ev.ProgressBlind) for e in events) == 1
    assert status.progress is not None and status.progress.blind_since is not None


def test_a_supervisor_without_a_progress_source_is_blind_never_stalls() -> None:
    sc = Scenario(shape=Shape.SLURM)
    sc.submit(spec())
    sc.on(
        lambda s: s.progress is not None and s.progress.blind_since is not None,
        lambda s: sc.backend.env.complete(sc.canonical(s, 1)),
    )
    status = sc.run()
    assert status.state is State.SUCCEEDED
    assert "no progress source" in status.progress.blind_detail  # type: ignore[union-attr]


def test_serve_lists_each_root_once_per_poll_whatever_the_number_of_jobs() -> None:
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    jobs = [job_of(sc.submit(spec(root=root))) for root in ("r/a", "r/a", "r/a", "r/b", "r/b")]
    polls = {"n": 0}
    sup: Supervisor | None = None

    def tick(seconds: float) -> None:
        polls["n"] += 1
        Scenario.tick(sc, seconds)
        for i, job in enumerate(jobs):
            progress.mark("r/a" if i < 3 else "r/b", job, polls["n"], sc.clock(), 1)
        if polls["n"] >= 6:
            assert sup is not None
            sup.stop()

    sup = _supervisor(sc, tick, progress)
    sup.serve()
    assert polls["n"] == 6
    assert progress.listings == {"r/a": 6, "r/b": 6}


def test_a_poll_that_records_progress_reads_each_record_once() -> None:
    # A job's progress-seen is committed in one round; the next round computes that job's
    # next step from the record that commit left (Pass.view), never reading it again. The jobs
    # record in windows of their own (phased by their ids), so the polls run until each has
    # recorded at least once.
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    jobs = [job_of(sc.submit(spec(root=root))) for root in ("r/a", "r/a", "r/b")]
    reads: list[list[str]] = []  # the jobs each read_many asked for, this poll
    per_poll: list[list[list[str]]] = []
    recorded: list[int] = []  # per poll, how many progress-seen events it committed
    read_many, append_many = sc.store.read_many, sc.store.append_many

    def reading(jobs: Sequence[str]) -> tuple[ReadAnswer, ...]:
        reads.append(list(jobs))
        return read_many(jobs)

    def appending(requests: Sequence[AppendRequest]) -> tuple[int | Refusal, ...]:
        recorded[-1] += sum(isinstance(e, ev.ProgressSeen) for r in requests for e in r.events)
        return append_many(requests)

    sc.store.read_many = reading  # type: ignore[method-assign]
    sc.store.append_many = appending  # type: ignore[method-assign]
    sup: Supervisor | None = None

    def tick(seconds: float) -> None:
        per_poll.append(list(reads))
        reads.clear()
        Scenario.tick(sc, seconds)
        for i, job in enumerate(jobs):
            progress.mark("r/a" if i < 2 else "r/b", job, len(per_poll), sc.clock(), 1)
        if sum(recorded) >= 2 * len(jobs) or len(per_poll) >= 200:
            assert sup is not None
            sup.stop()
        recorded.append(0)

    recorded.append(0)
    sup = _supervisor(sc, tick, progress)
    sup.serve()
    assert sum(recorded) >= 2 * len(jobs), recorded
    marking = [n for n, count in enumerate(recorded[: len(per_poll)]) if count]
    for n in marking:
        asked = [job for call in per_poll[n] for job in call]
        assert sorted(asked) == sorted(jobs), per_poll[n]
    assert all(sc.cluster.observer.get(job).state is State.RUNNING for job in jobs)


def test_no_advance_spares_the_budget_of_a_job_that_advances() -> None:
    sc = Scenario(shape=Shape.SLURM)
    progress = MemoryProgress()
    rule = Rule(
        on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1, charge=Charge.NO_ADVANCE
    )
    sc.submit(
        JobSpec(
            command=["train"],
            name="s",
            recovery=RecoveryPolicy(rules=[rule]),
            progress=ProgressSource(root=ROOT),
        )
    )
    state = {"step": 0}

    def act(status: Status, n: int) -> None:
        state["step"] += 10
        progress.publish(ROOT, sc.job, state["step"], sc.clock(), n, "0")
        if n <= 5:
            sc.backend.env.preempt(sc.canonical(status, n))  # advanced, then preempted
        else:
            sc.backend.env.complete(sc.canonical(status, n))

    _supervisor(sc, _ticking(sc, act), progress).run(sc.job)
    status = sc.status()
    assert status.state is State.SUCCEEDED and len(status.submissions) == 6
    assert [f.charged for f in status.firings] == [False] * 5
    assert status.plan is not None
    assert (status.plan.rules[0].firings, status.plan.rules[0].charged) == (5, 0)


def test_an_unreadable_root_is_logged_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    """Every poll of an outage is blind, but the log says so once, and once when it ends."""
    from jobdispatch_supervise.progress import ProgressPoll

    class Flaky:
        def __init__(self) -> None:
            self.fail = True

        def read(self, root: str, jobs: Collection[str]) -> Mapping[str, JobProgress]:
            if self.fail:
                raise OSError("mount gone")
            return {}

    source = Flaky()
    remembered: set[str] = set()
    caplog.set_level("WARNING", logger="jobdispatch.supervise")
    for _ in range(3):
        assert isinstance(ProgressPoll(source, "s", remembered)._list("/r", {"j"}), Blind)
    source.fail = False
    assert ProgressPoll(source, "s", remembered)._list("/r", {"j"}) == {}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "unreadable (1 job blind" in said[0] and "reads again" in said[1]


class _CountingGrowth:
    """An OutputGrowthReader for the test (a fake: the real ones are the local and Slurm
    adapters, held to it by the conformance suite): counts its calls."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[ObjectRef]] = []
        self.fail = fail

    def output_growth(self, refs: Sequence[ObjectRef]) -> Mapping[ObjectRef, Growth]:
        self.calls.append(list(refs))
        if self.fail:
            raise Unreachable("the output directory cannot be listed")
        return {r: Growth(size=len(r.id), at=T0) for r in refs}


def _watched(job: str) -> ev.Header:
    s = JobSpec(command=["train"], stall=StallRule(after=AFTER))
    assert s.stall is not None
    watch = StallAssignment(rule=s.stall, enforcer=Enforcer.SUPERVISOR, output_growth=True)
    plan = attrs.evolve(plan_for(s), stall=watch)
    return ev.Header(job=job, spec=s, plan=plan, created_by=SUPERVISOR, created_at=T0)


def _found(job: str) -> Discovery:
    return Discovery(
        job=job,
        objects=(
            observation(job, 1, 1, f"{job}-run", ObjectState.RUNNING, execution(0)),
            observation(job, 1, 2, f"{job}-gone", ObjectState.ENDED),
        ),
    )


def test_output_growth_is_looked_at_once_per_poll_for_every_job_at_once() -> None:
    reader = _CountingGrowth()
    poll = ProgressPoll(None, growth=reader)
    jobs = [f"job{i}" for i in range(50)]
    headers = {j: _watched(j) for j in jobs}
    first = poll.readings(headers, {j: _found(j) for j in jobs})
    again = poll.readings(headers, {j: _found(j) for j in jobs})  # a later round of the poll
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 50  # running objects only
    assert first == again
    reading = first["job7"]
    assert isinstance(reading, JobProgress)
    assert reading.output == {"job7-run": Growth(size=len("job7-run"), at=T0)}
    # A job not found yet this pass has no reading: it is judged once it is looked at.
    later = ProgressPoll(None, growth=reader)
    assert later.readings({"job1": _watched("job1")}, {"job1": None}) == {}


def test_output_growth_that_cannot_be_seen_is_blind_never_a_stall() -> None:
    headers = {"job1": _watched("job1")}
    failing = ProgressPoll(None, growth=_CountingGrowth(fail=True))
    reading = failing.readings(headers, {"job1": _found("job1")})["job1"]
    assert isinstance(reading, Blind) and "cannot be listed" in reading.detail
    unable = ProgressPoll(None, growth=None).readings(headers, {"job1": _found("job1")})["job1"]
    assert isinstance(unable, Blind) and "output-growth" in unable.detail


def test_a_stall_after_shorter_than_this_supervisors_poll_is_an_error_naming_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The plan checked stall.after (2 minutes) against the memory adapter's poll interval; this
    # supervisor polls every 5 minutes (a site's setting), so it says so, naming the job and
    # the field, once however many polls serve the job, and serves it all the same (it marks
    # no progress, so it is named stalled, one poll late).
    sc = Scenario(shape=Shape.SLURM)
    sc.submit(spec())
    polls = {"n": 0}
    sup: Supervisor | None = None

    def tick(seconds: float) -> None:
        polls["n"] += 1
        Scenario.tick(sc, seconds)
        if polls["n"] >= 3:
            assert sup is not None
            sup.stop()

    sup = Supervisor(
        sc.backend, sc.store, clock=sc.clock, sleep=tick, poll=300.0, progress=MemoryProgress()
    )
    with caplog.at_level("ERROR", logger="jobdispatch.supervise"):
        sup.serve()
    said = [r.getMessage() for r in caplog.records if "stall.after" in r.getMessage()]
    assert said == [
        f"job {sc.job}: stall.after must be at least the poll interval of this supervisor "
        "(0:05:00), got 0:02:00: progress is read once per poll; it is judged up to one poll "
        "late here (lower this supervisor's poll, or raise stall.after)"
    ]
    assert sc.status().cause.kind is CauseKind.STALLED
