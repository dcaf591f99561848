"""Classification over the raw outputs a real Slurm 22.05.8 cluster printed (fixtures/), and the
invariants that hold for any rows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.spi import ObjectObs
from jobdispatch.types import CauseKind, ObjectState, Provenance
from jobdispatch_slurm import holds
from jobdispatch_slurm.classify import Accounting, cause_of, observe, records
from jobdispatch_slurm.parse import (
    SacctRow,
    SqueueRow,
    parse_exit,
    parse_sacct,
    parse_squeue,
)

A, S, N = Provenance.APPLICATION, Provenance.SCHEDULER, Provenance.NONE

# fixture → [(index, kind, provenance, exit code, signal)] for every execution sacct -D shows
CASES = {
    "begin-time-opened": [(0, CauseKind.NONE, N, 0, None)],
    "cancelled-running": [(0, CauseKind.CANCELLED, Provenance.ACTOR, None, None)],
    "completed-oom-in-srun-step": [(0, CauseKind.OUT_OF_MEMORY, A, None, None)],
    "completed-step-failed": [(0, CauseKind.NON_ZERO_EXIT, A, 5, None)],
    "failed-exit-2": [(0, CauseKind.NON_ZERO_EXIT, A, 2, None)],
    "failed-killed-sigkill": [(0, CauseKind.NON_ZERO_EXIT, A, None, 9)],
    "failed-killed-sigterm": [(0, CauseKind.NON_ZERO_EXIT, A, None, 15)],
    "failed-oom-in-srun-step": [(0, CauseKind.OUT_OF_MEMORY, A, None, None)],
    "failed-step-exit-5": [(0, CauseKind.NON_ZERO_EXIT, A, 5, None)],
    "failed-step-segv": [(0, CauseKind.NON_ZERO_EXIT, A, 11, 11)],
    "launch-failed-bad-output": [(0, CauseKind.LAUNCH_FAILED, S, None, None)],
    "node-fail-no-requeue": [(0, CauseKind.NODE_LOST, S, None, None)],
    "node-fail-requeued": [
        (0, CauseKind.NODE_LOST, S, None, None),
        (1, CauseKind.CANCELLED, Provenance.ACTOR, None, None),
    ],
    # the second record was cancelled while pending: it never ran, so it is no execution
    "node-fail-two-nodes": [(0, CauseKind.NODE_LOST, S, None, None)],
    "out-of-memory-batch": [(0, CauseKind.OUT_OF_MEMORY, A, None, None)],
    "preempted-no-requeue": [(0, CauseKind.PREEMPTED, S, None, None)],
    "preempted-requeued": [
        (0, CauseKind.PREEMPTED, S, None, None),
        (1, CauseKind.CANCELLED, Provenance.ACTOR, None, None),
    ],
    # 0007 §4: the preempted run's record has no Start; it is an execution all the same
    "preempted-start-lost": [
        (0, CauseKind.PREEMPTED, S, None, None),
        (1, CauseKind.CANCELLED, Provenance.ACTOR, None, None),
    ],
    # 0007 §5: the FAILED row was rewritten to REQUEUED; the exit status still tells
    "requeued-after-failed": [(0, CauseKind.NON_ZERO_EXIT, A, 3, None)],
    "requeued-by-scontrol": [
        (0, CauseKind.REQUEUED, Provenance.ACTOR, None, None),
        (1, CauseKind.REQUEUED, Provenance.ACTOR, None, None),
    ],
    "timeout": [(0, CauseKind.TIME_LIMIT, S, None, None)],
    "timeout-with-signal-trap": [(0, CauseKind.TIME_LIMIT, S, None, None)],
}


@pytest.mark.parametrize("scenario", sorted(CASES))
def test_sacct_history_gives_each_execution_its_cause(
    fixture_text: Callable[[str], str], scenario: str
) -> None:
    rows = parse_sacct(fixture_text(f"sacct-D-{scenario}.txt"))
    obs = observed(rows[0].base_id, None, rows, Accounting.ANSWERED)
    assert obs is not None
    got = [
        (e.index, e.cause.kind, e.cause.provenance, e.cause.exit_code, e.cause.signal)
        for e in obs.executions
        if e.cause is not None
    ]
    assert got == CASES[scenario]
    assert all(e.state is ObjectState.ENDED and e.ended_at is not None for e in obs.executions)
    assert obs.state is ObjectState.ENDED


def test_execution_index_is_the_record_position(fixture_text: Callable[[str], str]) -> None:
    """The index is the restart count of that run, so it survives records that never ran."""
    rows = parse_sacct(fixture_text("sacct-D-requeued-by-scontrol.txt"))
    assert [r.job.state for r in records(rows)] == ["REQUEUED", "REQUEUED", "CANCELLED by 0"]
    obs = observed("35", None, rows, Accounting.ANSWERED)
    assert [e.index for e in obs.executions] == [0, 1]


def test_launch_failure_needs_a_non_signal_status() -> None:
    """0007 §8: kill -9 of the batch shell has Reason JobLaunchFailure too; only 0:53-like
    statuses (no signal a process dies of) are launch failures."""
    row = SacctRow(
        "8", "x", "FAILED", exit=parse_exit("0:9"), start=datetime.now(UTC), nodes=("node1",)
    )
    assert cause_of(records([row])[0], reason="JobLaunchFailure").kind is CauseKind.NON_ZERO_EXIT
    row = attrs_evolve(row, exit=parse_exit("0:53"))
    assert cause_of(records([row])[0]).kind is CauseKind.LAUNCH_FAILED
    row = attrs_evolve(row, exit=parse_exit("0:0"))
    assert cause_of(records([row])[0]).kind is CauseKind.UNKNOWN
    assert cause_of(records([row])[0], reason="JobLaunchFailure").kind is CauseKind.LAUNCH_FAILED


def observed(*args: Any) -> ObjectObs:
    """What ``observe`` makes of rows that show the job (None is for a job no row shows)."""
    obs = observe(*args)
    assert obs is not None, f"nothing observed of {args[0]}"
    return obs


def attrs_evolve(row: SacctRow, **kw: Any) -> SacctRow:
    import attrs

    return attrs.evolve(row, **kw)


def test_preemption_grace_does_not_hide_an_oom() -> None:
    rows = [
        SacctRow("9", "x", "PREEMPTED", exit=parse_exit("0:0"), derived=parse_exit("0:125")),
    ]
    assert cause_of(records(rows)[0]).kind is CauseKind.OUT_OF_MEMORY
    rows = [SacctRow("9", "x", "PREEMPTED", exit=parse_exit("0:0"), derived=parse_exit("1:0"))]
    assert cause_of(records(rows)[0]).kind is CauseKind.PREEMPTED


SQ_O = ("JobID", "Name", "Partition", "State", "Reason", "StartTime", "EndTime", "NodeList")


def test_live_states_from_squeue(fixture_text: Callable[[str], str]) -> None:
    rows = {r.name: r for r in parse_squeue(fixture_text("squeue-live-states.txt"), SQ_O)}
    seen = {name: observed(r.job_id, r, [], Accounting.ANSWERED) for name, r in rows.items()}
    assert seen["jd-live-running"].state is ObjectState.RUNNING
    assert seen["jd-live-running"].executions[0].state is ObjectState.RUNNING
    # Slurm's own requeue delay is a begin time too, but not ours: pending
    assert seen["jd-live-requeued"].state is ObjectState.PENDING
    assert seen["jd-live-requeued"].hold_instance is None
    # 2090-01-01T00:01:40 is our hold base + 100 s
    assert seen["jd-live-gated"].state is ObjectState.HELD
    assert seen["jd-live-gated"].hold_instance == 100
    # an operator's hold on top of our hold: held, and our instance still shows
    assert seen["jd-live-held-admin"].state is ObjectState.HELD
    assert seen["jd-live-held-admin"].hold_instance == 3
    assert seen["jd-live-requeuehold"].state is ObjectState.HELD
    assert seen["jd-live-held-user"].state is ObjectState.HELD


def test_hold_fixtures_read_back_exactly(fixture_text: Callable[[str], str]) -> None:
    rows = {r.name: r for r in parse_squeue(fixture_text("squeue-all-states.txt"), SQ_O)}
    assert holds.decode(rows["jd-hold-59"].start) == holds.Begin(holds.BeginKind.HOLD, 59)
    assert holds.decode(rows["jd-hold-86399"].start).instance == 86399
    # written with TZ=America/New_York: five hours off, and read as another instance
    assert holds.decode(rows["jd-hold-tz"].start).instance == 5 * 3600 + 5
    assert holds.decode(rows["jd-hold-3000"].start).kind is holds.BeginKind.OTHER


def test_ended_in_squeue_but_not_in_sacct_is_still_ending() -> None:
    """Never conclude from squeue alone while accounting is on (0007: poll sacct)."""
    now = datetime.now(UTC)
    sq = SqueueRow("5", "jd-a-1-1", "FAILED", "NonZeroExitCode", start=now, nodes=("node1",))
    obs = observed("5", sq, [], Accounting.ANSWERED)
    assert obs.state is ObjectState.RUNNING
    assert all(e.cause is None for e in obs.executions)
    obs = observed("5", sq, [], Accounting.MISSING)
    assert obs.state is ObjectState.RUNNING
    assert "sacct did not answer" in obs.detail
    obs = observed("5", sq, [], Accounting.OFF)
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[-1].cause
    assert cause is not None and cause.kind is CauseKind.NON_ZERO_EXIT


def test_gated_and_cancelled_has_no_execution() -> None:
    sq = SqueueRow("5", "jd-a-1-1", "CANCELLED", "BeginTime", start=holds.GATE)
    obs = observed("5", sq, [], Accounting.ANSWERED)
    assert obs.state is ObjectState.ENDED
    assert obs.executions == ()


def test_requeued_and_pending_shows_the_ended_run(fixture_text: Callable[[str], str]) -> None:
    rows = parse_sacct(fixture_text("sacct-D-preempted-requeued.txt"))[:2]
    rows.append(SacctRow("28", "jd-victim", "PENDING", start=None))
    delay = datetime(2026, 11, 29, 9, 58, 38, tzinfo=UTC)
    sq = SqueueRow("28", "jd-victim", "PENDING", "BeginTime", start=delay, restarts=1, requeue=True)
    obs = observed("28", sq, rows, Accounting.ANSWERED)
    assert obs.state is ObjectState.PENDING
    assert [(e.index, e.cause and e.cause.kind) for e in obs.executions] == [
        (0, CauseKind.PREEMPTED)
    ]
    assert obs.requeue_bit is True


def test_running_after_requeue_ahead_of_sacct() -> None:
    """squeue runs the second execution before sacct has its record: index from RestartCnt."""
    now = datetime.now(UTC)
    sq = SqueueRow("28", "n", "RUNNING", "None", start=now, nodes=("node1",), restarts=1)
    first = SacctRow("28", "n", "PREEMPTED", start=now, end=now, nodes=("node1",))
    obs = observed("28", sq, [first], Accounting.ANSWERED)
    assert [(e.index, e.state) for e in obs.executions] == [
        (0, ObjectState.ENDED),
        (1, ObjectState.RUNNING),
    ]


@pytest.mark.parametrize("with_steps", [True, False], ids=["inspect", "find_many"])
def test_a_run_whose_start_accounting_lost_keeps_its_execution(
    fixture_text: Callable[[str], str], with_steps: bool
) -> None:
    """The conformance check that went flaky in CI: slurmdbd kept no Start for a run preempted
    two seconds after it started (0007 §4). That run was dropped, so the object showed only
    its rerun, #1, and the preemption was never seen. It must stay execution #0, ended
    preempted, beside the running #1, whether the rows come with their steps (inspect) or
    without (find_many's ``-X``)."""
    rows = parse_sacct(fixture_text("sacct-D-preempted-start-lost.txt"))
    first, first_batch, second, _ = rows
    assert first.start is None and first.nodes == ("node1",)
    # While the rerun ran, its record read RUNNING with no end.
    running = attrs.evolve(second, state="RUNNING", end=None)
    history = [first, first_batch, running] if with_steps else [first, running]
    sq = SqueueRow(
        "639", first.name, "RUNNING", "None", start=running.start, nodes=("node1",), restarts=1
    )
    obs = observed("639", sq, history, Accounting.ANSWERED)
    assert obs is not None and obs.state is ObjectState.RUNNING
    assert [(e.index, e.state) for e in obs.executions] == [
        (0, ObjectState.ENDED),
        (1, ObjectState.RUNNING),
    ]
    ended = obs.executions[0]
    assert ended.cause is not None and ended.cause.kind is CauseKind.PREEMPTED
    assert ended.nodes == ("node1",) and ended.ended_at == first.end
    assert ended.started_at == (first_batch.start if with_steps else None)


def test_a_pending_stint_is_no_execution_whatever_its_state() -> None:
    """Nodes are what makes a record a run: a record cancelled while pending (``None
    assigned``) is none, even with the lost-Start rule in place."""
    now = datetime.now(UTC)
    ran = SacctRow("9", "n", "PREEMPTED", start=None, end=now, nodes=("node1",))
    pending = SacctRow("9", "n", "CANCELLED by 0", start=None, end=now, nodes=())
    obs = observed("9", None, [ran, pending], Accounting.ANSWERED)
    assert obs is not None
    assert [(e.index, e.cause.kind if e.cause else None) for e in obs.executions] == [
        (0, CauseKind.PREEMPTED)
    ]


# --------------------------------------------------------------------------- invariants

STATES = [
    "PENDING",
    "RUNNING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "CANCELLED by 0",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "REQUEUED",
    "DEADLINE",
    "BOOT_FAIL",
    "WEIRD",
]
statuses = st.builds(lambda c, s: parse_exit(f"{c}:{s}"), st.integers(0, 255), st.integers(0, 130))
times = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
job_rows = st.builds(
    lambda st_, ex, dv, start, nodes: SacctRow(
        "7", "jd-x-1-1", st_, exit=ex, derived=dv, start=start, end=start, nodes=nodes
    ),
    st.sampled_from(STATES),
    st.none() | statuses,
    st.none() | statuses,
    st.none() | times,
    st.sampled_from([(), ("node1",), ("node1", "node2")]),
)


@given(st.lists(job_rows, max_size=6), st.sampled_from(list(Accounting)))
def test_any_history_gives_ordered_executions_with_causes(
    rows: list[SacctRow], accounting: Accounting
) -> None:
    obs = observe("7", None, rows, accounting)
    if not rows:
        assert obs is None
        return
    assert obs is not None
    indices = [e.index for e in obs.executions]
    assert indices == sorted(set(indices))
    assert all(0 <= i < len(rows) for i in indices)
    for e in obs.executions:
        assert (e.state is ObjectState.ENDED) == (e.cause is not None)
    assert all(e.state is ObjectState.ENDED for e in obs.executions[:-1])


@given(st.integers(0, holds.MAX_INSTANCE - 1), st.booleans())
def test_hold_instances_read_back_exactly(instance: int, gated: bool) -> None:
    at = holds.hold_time(instance, gated=gated)
    assert holds.decode(at) == holds.Begin(holds.BeginKind.HOLD, instance, gated)
    assert holds.slurm_time(at).count(":") == 2


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2089, 12, 31)))
def test_no_ordinary_begin_time_reads_as_ours(at: datetime) -> None:
    """Slurm's requeue delay (now + cred_expire) and user begin times are never a gate or hold."""
    assert holds.decode(at.replace(tzinfo=UTC, microsecond=0)).kind is holds.BeginKind.OTHER


def test_instances_beyond_the_range_are_refused() -> None:
    from jobdispatch.errors import Invalid

    with pytest.raises(Invalid):
        holds.hold_time(holds.MAX_INSTANCE, gated=False)
    with pytest.raises(Invalid):
        holds.hold_time(-1, gated=True)
    assert holds.hold_time(holds.MAX_INSTANCE - 1, gated=True) < holds.GATE
    assert holds.hold_time(holds.MAX_INSTANCE - 1, gated=False) < holds.HOLD_GATED_BASE
    assert holds.GATE - timedelta(days=1) > holds.HOLD_GATED_BASE


def test_running_again_before_sacct_closed_the_previous_run() -> None:
    """sacct still shows run 0 running while squeue runs run 1: stay with accounting."""
    now = datetime.now(UTC)
    sq = SqueueRow("28", "n", "RUNNING", "None", start=now, nodes=("node1",), restarts=1)
    first = SacctRow("28", "n", "RUNNING", start=now, nodes=("node1",))
    obs = observed("28", sq, [first], Accounting.ANSWERED)
    assert [(e.index, e.state) for e in obs.executions] == [(0, ObjectState.RUNNING)]
    assert "lags" in obs.detail


def test_completing_after_a_requeue_shows_no_new_run() -> None:
    """While a requeued job is COMPLETING its restart count is already raised (0007 §4)."""
    now = datetime.now(UTC)
    sq = SqueueRow("28", "n", "COMPLETING", "None", start=now, nodes=("node1",), restarts=1)
    first = SacctRow("28", "n", "PREEMPTED", start=now, end=now, nodes=("node1",))
    obs = observed("28", sq, [first], Accounting.ANSWERED)
    assert obs.state is ObjectState.RUNNING
    assert [(e.index, e.state) for e in obs.executions] == [(0, ObjectState.ENDED)]


def _failed_run(job_exit: str, step_exit: str | None = None) -> list[SacctRow]:
    """A FAILED run as the real cluster recorded it (issue 14.6): with one task the job's own
    status; under srun (``step_exit``) the step's, while the job may show another rank's."""
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

    def row(job_id: str, name: str, status: str) -> SacctRow:
        exit_ = parse_exit(status)
        return SacctRow(job_id, name, "FAILED", exit=exit_, start=at, end=at, nodes=("node1",))

    rows = [row("5", "jd-j-1-1", job_exit), row("5.batch", "batch", job_exit)]
    if step_exit is not None:
        rows.append(row("5.0", "bash", step_exit))
    return rows


MARK = "jobdispatch-launch-failed jd-j-1-1 0: rank 1 on node2 cannot start /no/prog (exit 127)"


@pytest.mark.parametrize(
    ("job_exit", "step_exit"), [("127:0", None), ("126:0", None), ("15:0", "127:0")]
)
def test_a_failed_exec_is_launch_failed_only_with_its_mark(
    job_exit: str, step_exit: str | None
) -> None:
    asked: list[tuple[str, int]] = []

    def marks(name: str, index: int) -> str:
        asked.append((name, index))
        return MARK

    obs = observed("5", None, _failed_run(job_exit, step_exit), Accounting.ANSWERED, marks)
    assert obs is not None and asked == [("jd-j-1-1", 0)]
    cause = obs.executions[0].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, S)
    assert cause.detail == "rank 1 on node2 cannot start /no/prog (exit 127)"
    # No mark: the application's own 126 or 127 stays non-zero-exit, with the code the failed
    # step shows where there is one (the job's own 15:0 is srun's, not the application's).
    obs = observed(
        "5", None, _failed_run(job_exit, step_exit), Accounting.ANSWERED, lambda n, i: ""
    )
    cause = obs.executions[0].cause
    assert cause is not None
    code = int((step_exit or job_exit).split(":")[0])
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, code)


@pytest.mark.parametrize("job_exit", ["1:0", "2:0", "0:9", "128:0"])
def test_other_failures_never_ask_for_a_mark(job_exit: str) -> None:
    def marks(name: str, index: int) -> str:
        raise AssertionError("only a 126 or 127 is worth a search")

    obs = observed("5", None, _failed_run(job_exit), Accounting.ANSWERED, marks)
    cause = obs.executions[0].cause
    assert cause is not None and cause.kind is not CauseKind.LAUNCH_FAILED
