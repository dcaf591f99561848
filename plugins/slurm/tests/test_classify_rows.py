"""Each row of the Slurm classification tables, by name, with evidence that reaches it first.

The tables are data (``CAUSES``, ``LIVE_STATES``); spec 0008 §4 shows them as the code reads
them (tests/repo/test_classification_tables.py). Here every row has one example: the example
must be decided by that row (no earlier row takes it) and yield what the row says it yields.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from jobdispatch.spi import ExecutionObs
from jobdispatch.types import CauseKind, ObjectState, Provenance
from jobdispatch_slurm import holds
from jobdispatch_slurm.classify import (
    CAUSES,
    LIVE_STATES,
    Accounting,
    Ended,
    Live,
    Record,
    records,
)
from jobdispatch_slurm.parse import SacctRow, SqueueRow, parse_exit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NODES = ("node1",)


def _ran(state: str, exit_: str = "0:0", derived: str = "0:0", *steps: SacctRow) -> Record:
    job = SacctRow(
        "7",
        "x",
        state,
        exit=parse_exit(exit_),
        derived=parse_exit(derived),
        start=T0,
        end=T0 + timedelta(seconds=60),
        nodes=NODES,
    )
    return records([job, *steps])[0]


def _step(step: str, state: str, exit_: str, end: datetime | None = None) -> SacctRow:
    return SacctRow(f"7.{step}", step, state, exit=parse_exit(exit_), start=T0, end=end)


#: row name → (evidence that reaches the row first, the cause's exit code and signal)
CAUSE_EXAMPLES: dict[str, tuple[Ended, int | None, int | None]] = {
    "launch-mark": (
        Ended(_ran("FAILED", "127:0"), launch_mark="jobdispatch: cannot run ./train: no such file"),
        None,
        None,
    ),
    "completed-oom": (Ended(_ran("COMPLETED", "0:0", "0:125")), None, None),
    "completed-step-failed": (Ended(_ran("COMPLETED", "0:0", "5:0")), 5, None),
    "completed": (Ended(_ran("COMPLETED")), 0, None),
    "out-of-memory": (Ended(_ran("PREEMPTED", "0:0", "0:125")), None, None),
    "failed-exit": (Ended(_ran("FAILED", "3:0", "0:9")), 3, 9),
    "failed-killed": (Ended(_ran("FAILED", "0:9"), reason="JobLaunchFailure"), None, 9),
    "failed-launch": (Ended(_ran("FAILED", "0:53")), None, None),
    "failed-unknown": (Ended(_ran("FAILED", "0:0")), None, None),
    "timeout": (Ended(_ran("TIMEOUT", "0:15")), None, None),
    "partition-removed": (Ended(_ran("NODE_FAIL"), reason="PartitionDown"), None, None),
    "node-fail": (Ended(_ran("NODE_FAIL")), None, None),
    "preempted": (Ended(_ran("PREEMPTED", "0:0", "1:0")), None, None),
    "cancelled-by-uid": (Ended(_ran("CANCELLED by 1000")), None, None),
    "cancelled": (Ended(_ran("CANCELLED")), None, None),
    "deadline": (Ended(_ran("DEADLINE")), None, None),
    "boot-fail": (Ended(_ran("BOOT_FAIL")), None, None),
    "revoked": (Ended(_ran("REVOKED")), None, None),
    "requeued-after-end": (
        Ended(_ran("REQUEUED", "2:0", "0:0", _step("batch", "FAILED", "2:0", T0))),
        2,
        None,
    ),
    "requeued": (Ended(_ran("REQUEUED")), None, None),
    "special-exit": (Ended(_ran("SPECIAL_EXIT", "42:0")), 42, None),
    "requeue-state": (Ended(_ran("REQUEUE_HOLD")), None, None),
    "unknown": (Ended(_ran("RESIZING")), None, None),
}


def test_every_cause_row_has_an_example() -> None:
    assert [row.name for row in CAUSES.rows] == list(CAUSE_EXAMPLES)


@pytest.mark.parametrize("name", list(CAUSE_EXAMPLES))
def test_cause_row(name: str) -> None:
    evidence, exit_code, signal = CAUSE_EXAMPLES[name]
    row = CAUSES.match(evidence)
    assert row.name == name
    cause = CAUSES(evidence)
    kind, provenance = row.gives
    if provenance == "as that cause":
        # The inner row decides: the batch step FAILED 2:0 is a non-zero exit.
        assert (cause.kind, cause.provenance) == (CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION)
        assert "ended by itself, then requeued" in cause.detail
    else:
        assert (str(cause.kind), str(cause.provenance)) == (kind.split(" (")[0], provenance)
    assert (cause.exit_code, cause.signal) == (exit_code, signal)


NO_BEGIN = holds.Begin(holds.BeginKind.NONE)


def _live(
    state: str,
    *executions: ExecutionObs,
    reason: str = "",
    begin: holds.Begin = NO_BEGIN,
    accounting: Accounting = Accounting.ANSWERED,
    current: int = 0,
    nodes: tuple[str, ...] = NODES,
) -> Live:
    row = SqueueRow("7", "x", state, reason=reason, start=T0, nodes=nodes)
    return Live(row, executions, accounting, current, begin)


RUNNING0 = ExecutionObs(index=0, state=ObjectState.RUNNING, started_at=T0, nodes=NODES)

#: row name → (evidence that reaches the row first, the object state it yields)
STATE_EXAMPLES: dict[str, tuple[Live, ObjectState]] = {
    "ended": (_live("FAILED", RUNNING0), ObjectState.RUNNING),
    "running": (_live("RUNNING"), ObjectState.RUNNING),
    "held-by-others": (
        _live("PENDING", reason="JobHeldUser", begin=holds.Begin(holds.BeginKind.GATE)),
        ObjectState.GATED,
    ),
    "pending": (_live("PENDING", reason="Priority", nodes=()), ObjectState.PENDING),
    "unrecognised": (_live("SOMETHING_NEW"), ObjectState.PENDING),
}


def test_every_state_row_has_an_example() -> None:
    assert [row.name for row in LIVE_STATES.rows] == list(STATE_EXAMPLES)


@pytest.mark.parametrize("name", list(STATE_EXAMPLES))
def test_live_state_row(name: str) -> None:
    evidence, state = STATE_EXAMPLES[name]
    assert LIVE_STATES.match(evidence).name == name
    assert LIVE_STATES(evidence).state is state
