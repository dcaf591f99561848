"""Why did a Slurm job's run end, and what does the job show now? Pure functions of parsed rows.

The rules are shared/research/classification.md §1 and §4.1 as corrected by what a real Slurm
22.05.8 cluster printed (docs/specs/0007). The decisions are first-match tables of rows
(``jobdispatch.firstmatch``): :data:`CAUSES` for an ended record, :data:`LIVE_STATES` for a job
squeue still shows. docs/specs/0008-slurm-adapter.md §4 carries them as the code reads them (a
repository test compares them), with the reasons. Where the evidence does not decide a question
the answer is ``unknown``, never a guess.

Two sources are combined:

- **squeue** (``-t all``): the live state, the begin time (gate and hold instance), the
  requeue bit and the restart count. It forgets a job ``MinJobAge`` after its end, and it never
  shows why a requeued run ended (0007 §4).
- **sacct -D**: one job record per run (a requeue starts a new record with a new Submit time),
  each with its state and exit codes; with steps when ``-X`` is not given. It lags: a gated job
  has no row for up to 5 s, and a just-ended job's row may still read RUNNING.

The execution index of a record is its position among the job's records, which is also the
restart count Slurm gives that run (``SLURM_RESTART_COUNT``): stable whether or not squeue still
knows the job, and whether or not every record has reached sacct yet.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs
from jobdispatch.firstmatch import Row, Table, always, cause_cells, cause_row
from jobdispatch.spi import ExecutionObs, ObjectObs, ObjectRef
from jobdispatch.types import Cause, CauseKind, ObjectState, Provenance

from jobdispatch_slurm import holds
from jobdispatch_slurm.parse import ExitStatus, SacctRow, SqueueRow
from jobdispatch_slurm.script import EXEC_FAILED_CODES

__all__ = [
    "CAUSES",
    "ENDED_STATES",
    "LIVE_STATES",
    "Accounting",
    "Ended",
    "Live",
    "Record",
    "Seen",
    "cause_of",
    "observe",
    "records",
    "squeue_cause",
]

#: Base states that end a record for good.
ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REVOKED",
    }
)
#: States an earlier record of a requeued job can carry (0007 §4-§6): the run ended, the job
#: did not.
REQUEUE_STATES = frozenset({"REQUEUED", "SPECIAL_EXIT", "REQUEUE_HOLD", "REQUEUE_FED"})
#: Endings Slurm gives only a job that was allocated and launched: a record with one of them
#: ran even when accounting lost its Start (0007 §4).
RUN_ONLY_ENDINGS = frozenset({"PREEMPTED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "COMPLETED"})
#: squeue states in which processes may be running: the object is running (or ending).
RUNNING_STATES = frozenset(
    {"RUNNING", "CONFIGURING", "COMPLETING", "SIGNALING", "RESIZING", "STAGE_OUT", "EXPEDITING"}
)
#: squeue states in which the job is allocated but stopped, or kept from running by a hold.
HELD_STATES = frozenset({"SUSPENDED", "STOPPED", "REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
#: Pending reasons that are holds (classification.md §1.3, 0007 §3, §5).
HELD_REASONS = frozenset(
    {
        "JobHeldUser",
        "JobHeldAdmin",
        "JobHoldMaxRequeue",
        "job requeued in held state",
        "job_requeued_in_held_state",
        "job requeued in special exit state",
        "launch failed requeued held",
        "user env retrieval failed requeued held",
        "launch failure limit exceeded requeued held",
        "ReservationDeleted",
    }
)
#: The OOM marker: Slurm's SIG_OOM (253) printed as a signal, ``0:125`` (classification §1.6).
OOM_SIGNAL = 125
#: Signals a process can die of (POSIX and Linux's 1..31). A FAILED job whose "signal" is none
#: of these (``0:53`` for an output file that cannot be opened, 0007 §8) failed to launch.
KILL_SIGNALS = range(1, 32)


class Accounting(enum.Enum):
    """What sacct said this time."""

    #: sacct answered: absence of a row is evidence (modulo its lag).
    ANSWERED = "answered"
    #: sacct did not answer (slurmdbd down, a timeout): its rows are missing, not absent.
    MISSING = "missing"
    #: The cluster keeps no accounting (``AccountingStorageType=accounting_storage/none``).
    OFF = "off"


@attrs.frozen
class Record:
    """One sacct job record (one run, or one pending stint after a requeue) with its steps."""

    job: SacctRow
    steps: tuple[SacctRow, ...] = ()

    @property
    def started(self) -> datetime | None:
        """When the run started: the record's Start, or, when accounting lost that (0007 §4:
        a run preempted within seconds of its start can read ``Start=None``), its earliest
        step's."""
        if self.job.start is not None:
            return self.job.start
        starts = [s.start for s in self.steps if s.start is not None]
        return min(starts) if starts else None

    @property
    def ran(self) -> bool:
        """Whether the record is a run, so an execution: it got nodes (Slurm names them only
        with an allocation, ``None assigned`` otherwise) and it started, as its Start, a
        step's start or an ending only a run can have tells. The Start alone is not enough:
        slurmdbd can lose it for a run preempted just after it started (0007 §4), and
        dropping that run would renumber nothing but hide its cause."""
        if not self.job.nodes:
            return False
        return self.started is not None or self.job.base_state in RUN_ONLY_ENDINGS


def records(rows: Sequence[SacctRow]) -> list[Record]:
    """Group one job's rows (job rows, each followed by its steps, as ``sacct -D`` prints them)
    into records."""
    out: list[Record] = []
    for row in rows:
        if not row.is_step:
            out.append(Record(row))
        elif out and out[-1].job.base_id == row.base_id:
            out[-1] = attrs.evolve(out[-1], steps=(*out[-1].steps, row))
    return out


def _oom(record: Record) -> bool:
    rows = (record.job, *record.steps)
    if any(r.base_state == "OUT_OF_MEMORY" for r in rows):
        return True
    statuses = [r.exit for r in rows] + [record.job.derived]
    return any(s is not None and s.code == 0 and s.signal == OOM_SIGNAL for s in statuses)


def _failed_step(record: Record, *, launched_only: bool = False) -> SacctRow | None:
    """The earliest-ending step that failed (application truth for masked failures); with
    ``launched_only``, among the steps srun launched (not the batch shell)."""
    skip = ("extern", "batch") if launched_only else ("extern",)
    failed = [
        s for s in record.steps if s.step not in skip and s.exit is not None and not s.exit.clean
    ]
    failed.sort(key=lambda s: (s.end is None, s.end))
    return failed[0] if failed else None


def exec_failure_suspect(record: Record) -> bool:
    """Whether a FAILED record shows a status bash gives when ``exec`` fails (126, 127), as the
    job's exit, its derived exit or a step's: under srun the job's own status may be another
    rank's (``15:0`` for a rank srun terminated) while the step shows the 127. Only such a run
    is worth a look for the job's launch mark (script.LAUNCH_MARK)."""
    if record.job.base_state != "FAILED":
        return False
    statuses = [record.job.exit, record.job.derived, *(s.exit for s in record.steps)]
    return any(s is not None and s.signal == 0 and s.code in EXEC_FAILED_CODES for s in statuses)


def _by(state: str) -> str:
    """``CANCELLED by 1000`` → ``1000``; plain ``CANCELLED`` → ""."""
    _, _, who = state.partition(" by ")
    return who.strip()


@attrs.frozen
class Ended:
    """What the table of causes reads of one ended record: the record (its job row and steps),
    squeue's reason when squeue still shows the job (sacct does not keep it for launch
    failures, 0007 §8), and the launch mark the run wrote, if any."""

    record: Record
    reason: str = ""
    launch_mark: str = ""

    @property
    def state(self) -> str:
        """The job row's base state (``CANCELLED by 0`` → ``CANCELLED``)."""
        return self.record.job.base_state

    @property
    def exit(self) -> ExitStatus | None:
        return self.record.job.exit

    @property
    def derived(self) -> ExitStatus | None:
        return self.record.job.derived

    @property
    def oom(self) -> bool:
        """Whether a row of the record shows the OOM marker or state."""
        return _oom(self.record)


def _state_is(*states: str) -> Callable[[Ended], bool]:
    return lambda e: e.state in states


def _launch_mark(e: Ended) -> str:
    _, _, said = e.launch_mark.partition(": ")
    return said.strip() or e.launch_mark


def _completed_step_failed(e: Ended) -> Cause:
    derived = e.derived
    assert derived is not None
    return Cause(
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        f"a step failed ({derived}) though the script exited 0",
        exit_code=derived.code or None,
        signal=derived.signal or None,
    )


def _out_of_memory(e: Ended) -> str:
    detail = "out of memory (0:125)"
    if e.state == "PREEMPTED":
        detail += "; recorded as PREEMPTED: it ended within the preemption grace time"
    return detail


def _failed_exit(e: Ended) -> Cause:
    exit_, derived = e.exit, e.derived
    assert exit_ is not None
    signal = derived.signal if derived is not None and derived.signal else None
    # Under srun the job's own status is srun's, which may be what it saw of a rank it
    # terminated after another failed (15:0, 0007 §8); the earliest failed step holds the
    # application's own code, so that is the one reported.
    step = _failed_step(e.record, launched_only=True)
    shown, detail = exit_, ""
    if step is not None and step.exit is not None and step.exit.code > 0 and step.exit != exit_:
        shown = step.exit
        detail = f"step {step.step} exited {step.exit}; the job's own status was {exit_}"
    return Cause(
        CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, detail, exit_code=shown.code, signal=signal
    )


def _killed(e: Ended) -> Cause:
    signal = e.exit.signal if e.exit is not None else None
    return Cause(
        CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, f"killed by signal {signal}", signal=signal
    )


def _never_launched(e: Ended) -> bool:
    return (
        (e.exit is not None and bool(e.exit.signal))
        or e.reason == "JobLaunchFailure"
        or not e.record.ran
    )


def _launch_failed(e: Ended) -> str:
    what = f"exit status {e.exit}" if e.exit is not None else "no exit status"
    return f"{what}{', ' + e.reason if e.reason else ''}: the batch script did not start"


def _node_failed(e: Ended) -> str:
    return f"a node of {','.join(e.record.job.nodes)} failed"


def _batch_step(record: Record) -> SacctRow | None:
    return next((s for s in record.steps if s.step == "batch"), None)


def _ended_before_requeue(e: Ended) -> bool:
    """0007 §5: requeueing a finished job rewrites its row to REQUEUED; the run had ended by
    itself, which its exit status (and its batch step ending well before the row) still tell."""
    if e.state != "REQUEUED":
        return False
    job, batch = e.record.job, _batch_step(e.record)
    ended_first = (
        batch is not None
        and batch.end is not None
        and job.end is not None
        and (job.end - batch.end).total_seconds() > 2
    )
    return (e.exit is not None and e.exit.code > 0) or ended_first


def _requeued_after_end(e: Ended) -> Cause:
    job, batch = e.record.job, _batch_step(e.record)
    inner = cause_of(
        Record(attrs.evolve(job, state=batch.state if batch else "FAILED"), e.record.steps)
    )
    return attrs.evolve(
        inner, detail=_join(inner.detail, "ended by itself, then requeued (row rewritten)")
    )


def _special_exit(e: Ended) -> Cause:
    code = e.exit.code if e.exit is not None else None
    return Cause(
        CauseKind.REQUEUED, Provenance.APPLICATION, "RequeueExitHold exit code", exit_code=code
    )


K, P = CauseKind, Provenance


def _state_row(
    name: str,
    state: str,
    kind: CauseKind,
    provenance: Provenance,
    detail: str = "",
    *,
    evidence: str = "",
) -> Row[Ended, Cause]:
    """A row decided by the state alone, with a fixed cause."""
    return cause_row(name, evidence or state, _state_is(state), kind, provenance, detail)


#: The causes of an ended record, first match wins (spec 0008 §4 shows this table, made from
#: these rows by tests/repo/test_classification_tables.py).
CAUSES: Table[Ended, Cause] = Table(
    "slurm-causes",
    ("sacct State / evidence", "cause", "provenance"),
    (
        cause_row(
            "launch-mark",
            "FAILED, and the launch line in the job's stderr (§2; looked for only after a 126 "
            "or 127 in the job's, derived or a step's status)",
            lambda e: bool(e.launch_mark) and e.state == "FAILED",
            K.LAUNCH_FAILED,
            P.SCHEDULER,
            _launch_mark,
            note="the line's words as detail",
        ),
        cause_row(
            "completed-oom",
            "COMPLETED, DerivedExitCode or a step `0:125`, or a step OUT_OF_MEMORY",
            lambda e: e.state == "COMPLETED" and e.oom,
            K.OUT_OF_MEMORY,
            P.APPLICATION,
            "a step ran out of memory (0:125) though the script exited 0",
        ),
        Row(
            "completed-step-failed",
            "COMPLETED, DerivedExitCode ≠ `0:0`",
            lambda e: e.state == "COMPLETED" and e.derived is not None and not e.derived.clean,
            _completed_step_failed,
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, "the step's code or signal"),
        ),
        Row(
            "completed",
            "COMPLETED, no step failure",
            _state_is("COMPLETED"),
            lambda _: Cause(CauseKind.NONE, Provenance.NONE, exit_code=0),
            cause_cells(K.NONE, P.NONE, "exit 0"),
        ),
        cause_row(
            "out-of-memory",
            "OUT_OF_MEMORY; or FAILED or PREEMPTED with `0:125` anywhere (preemption never "
            "causes an OOM)",
            lambda e: e.state == "OUT_OF_MEMORY" or (e.state in ("FAILED", "PREEMPTED") and e.oom),
            K.OUT_OF_MEMORY,
            P.APPLICATION,
            _out_of_memory,
        ),
        Row(
            "failed-exit",
            "FAILED, ExitCode `N:x`, N > 0",
            lambda e: e.state == "FAILED" and e.exit is not None and e.exit.code > 0,
            _failed_exit,
            cause_cells(
                K.NON_ZERO_EXIT,
                P.APPLICATION,
                "exit N, or the earliest failed srun step's; signal from DerivedExitCode",
            ),
        ),
        Row(
            "failed-killed",
            "FAILED, ExitCode `0:S`, S in 1..31",
            lambda e: e.state == "FAILED" and e.exit is not None and e.exit.signal in KILL_SIGNALS,
            _killed,
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, 'signal S, "killed"'),
        ),
        cause_row(
            "failed-launch",
            "FAILED, `0:S` with S not a signal (`0:53`), or squeue `JobLaunchFailure` with "
            "`0:0`, or never got nodes",
            lambda e: e.state == "FAILED" and _never_launched(e),
            K.LAUNCH_FAILED,
            P.SCHEDULER,
            _launch_failed,
        ),
        cause_row(
            "failed-unknown",
            "FAILED `0:0`, none of the above",
            _state_is("FAILED"),
            K.UNKNOWN,
            P.NONE,
            lambda e: f"FAILED with exit status {e.exit}",
        ),
        _state_row(
            "timeout",
            "TIMEOUT",
            K.TIME_LIMIT,
            P.SCHEDULER,
            evidence="TIMEOUT (never its exit code: scontrol and sacct differ)",
        ),
        cause_row(
            "partition-removed",
            "NODE_FAIL, squeue reason PartitionDown",
            lambda e: e.state == "NODE_FAIL" and e.reason == "PartitionDown",
            K.CANCELLED,
            P.ACTOR,
            "its partition was removed",
        ),
        cause_row(
            "node-fail", "NODE_FAIL", _state_is("NODE_FAIL"), K.NODE_LOST, P.SCHEDULER, _node_failed
        ),
        _state_row("preempted", "PREEMPTED", K.PREEMPTED, P.SCHEDULER),
        cause_row(
            "cancelled-by-uid",
            "CANCELLED by *uid*",
            lambda e: e.state == "CANCELLED" and bool(_by(e.record.job.state)),
            K.CANCELLED,
            P.ACTOR,
            lambda e: f"cancelled by uid {_by(e.record.job.state)}",
            note="the detail names the uid",
        ),
        _state_row(
            "cancelled",
            "CANCELLED",
            K.CANCELLED,
            P.SCHEDULER,
            "cancelled by slurmctld",
            evidence='CANCELLED (no "by")',
        ),
        _state_row(
            "deadline", "DEADLINE", K.NO_CAPACITY, P.SCHEDULER, "could not start by --deadline"
        ),
        _state_row("boot-fail", "BOOT_FAIL", K.LAUNCH_FAILED, P.SCHEDULER, "node boot failed"),
        _state_row("revoked", "REVOKED", K.DUPLICATE, P.SCHEDULER, "ran on a federation sibling"),
        Row(
            "requeued-after-end",
            "REQUEUED, ExitCode N > 0 or the batch step ended over 2 s before the row",
            _ended_before_requeue,
            _requeued_after_end,
            (
                "what this table gives the record read with its batch step's state (or FAILED), "
                '"ended by itself, then requeued" added to the detail',
                "as that cause",
            ),
        ),
        _state_row("requeued", "REQUEUED", K.REQUEUED, P.ACTOR, "scontrol requeue"),
        Row(
            "special-exit",
            "SPECIAL_EXIT",
            _state_is("SPECIAL_EXIT"),
            _special_exit,
            cause_cells(K.REQUEUED, P.APPLICATION, "exit code kept"),
        ),
        cause_row(
            "requeue-state",
            "another requeue state (REQUEUE_HOLD, REQUEUE_FED)",
            lambda e: e.state in REQUEUE_STATES,
            K.REQUEUED,
            P.SCHEDULER,
            lambda e: e.state,
            note="the state as detail",
        ),
        cause_row(
            "unknown",
            "anything else",
            always,
            K.UNKNOWN,
            P.NONE,
            lambda e: f"sacct state {e.record.job.state!r}",
        ),
    ),
)


def cause_of(record: Record, *, reason: str = "", launch_mark: str = "") -> Cause:
    """The cause of an ended record: the first row of :data:`CAUSES` its evidence matches.
    ``reason`` is squeue's, when squeue still shows the job; ``launch_mark`` is the line the run
    wrote when a program could not be started (found by the backend in its standard error): it
    tells that from the application's own 126 or 127."""
    return CAUSES(Ended(record, reason, launch_mark))


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def squeue_cause(row: SqueueRow) -> Cause:
    """The cause of an ended job from squeue alone, for clusters that keep no accounting. It
    cannot see DerivedExitCode, steps or exit codes, so what those decide stays unknown."""
    state = row.state
    fixed = {
        "TIMEOUT": Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER),
        "NODE_FAIL": Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER),
        "PREEMPTED": Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER),
        "OUT_OF_MEMORY": Cause(CauseKind.OUT_OF_MEMORY, Provenance.APPLICATION),
        "DEADLINE": Cause(CauseKind.NO_CAPACITY, Provenance.SCHEDULER),
        "BOOT_FAIL": Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER),
        "CANCELLED": Cause(CauseKind.CANCELLED, Provenance.ACTOR, "cancelled (squeue only)"),
    }
    if state in fixed:
        return fixed[state]
    if state == "FAILED" and row.reason == "NonZeroExitCode":
        return Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, "exit code not known")
    return Cause(CauseKind.UNKNOWN, Provenance.NONE, f"squeue {state} {row.reason}, no accounting")


#: Looks up the launch mark of execution ``index`` of the object named ``name`` ("" if none).
MarkLookup = Callable[[str, int], str]


def _execution(
    index: int, record: Record, ended: bool, reason: str, marks: MarkLookup | None, name: str
) -> ExecutionObs:
    job = record.job
    mark = ""
    if ended and marks is not None and exec_failure_suspect(record):
        # The object's name, not the record's: sacct may show a just-ended job's record as
        # "allocation" for a moment.
        mark = marks(name, index)
    return ExecutionObs(
        index=index,
        state=ObjectState.ENDED if ended else ObjectState.RUNNING,
        cause=cause_of(record, reason=reason, launch_mark=mark) if ended else None,
        started_at=record.started if record.ran else None,
        ended_at=(job.end or record.started) if ended else None,
        nodes=job.nodes,
    )


def _accounted(
    recs: Sequence[Record], reason: str, marks: MarkLookup | None, name: str
) -> list[ExecutionObs]:
    """Executions from accounting: every record that ran, and a last record that ended without
    running for a reason other than a cancel (a launch failure, a deadline)."""
    executions: list[ExecutionObs] = []
    for i, rec in enumerate(recs):
        last = i == len(recs) - 1
        state = rec.job.base_state
        ended = not last or state in ENDED_STATES or state in REQUEUE_STATES
        if rec.ran or (last and ended and state not in ("CANCELLED",)):
            executions.append(_execution(i, rec, ended, reason if last else "", marks, name))
    return executions


def _from_accounting(
    job_id: str, name: str, recs: Sequence[Record], executions: Sequence[ExecutionObs]
) -> ObjectObs:
    """Past MinJobAge: accounting alone. A last record still RUNNING or PENDING is the
    accounting lag or a controller that lost the job: not evidence of an end."""
    last = recs[-1].job
    notes = ""
    if last.base_state in ENDED_STATES:
        state = ObjectState.ENDED
    elif last.base_state in ("RUNNING",):
        state = ObjectState.RUNNING
    else:
        state = ObjectState.PENDING
        notes = f"sacct shows {last.state} and squeue no longer knows the job"
    return ObjectObs(
        ref=ObjectRef(job_id), name=name, state=state, executions=tuple(executions), detail=notes
    )


@attrs.frozen
class Live:
    """What the table of live states reads: the job's squeue row, the executions accounting
    shows, whether accounting answered, the execution squeue is at (its restart count) and what
    the begin time says (our gate, our hold, or neither)."""

    squeue: SqueueRow
    executions: tuple[ExecutionObs, ...]
    accounting: Accounting
    current: int
    begin: holds.Begin

    @property
    def latest(self) -> ExecutionObs | None:
        """The execution accounting shows for the run squeue is at, if any."""
        return next((e for e in self.executions if e.index == self.current), None)

    @property
    def ended_runs(self) -> list[ExecutionObs]:
        return [e for e in self.executions if e.state is ObjectState.ENDED]

    def replacing_current(self, execution: ExecutionObs) -> list[ExecutionObs]:
        """The executions with ``execution`` in place of the current one."""
        return [*(e for e in self.executions if e.index != self.current), execution]

    def running_now(self) -> ExecutionObs:
        """The current run as squeue shows it, before accounting has its record."""
        sq = self.squeue
        return ExecutionObs(
            index=self.current, state=ObjectState.RUNNING, started_at=sq.start, nodes=sq.nodes
        )


@attrs.frozen
class Seen:
    """What the table of live states yields: the object's state, its executions, notes for the
    detail and the instance of our hold."""

    state: ObjectState
    executions: Sequence[ExecutionObs]
    notes: tuple[str, ...] = ()
    hold_instance: int | None = None


def _ended_in_squeue(live: Live) -> Seen:
    sq = live.squeue
    ran = bool(sq.nodes) or sq.state != "CANCELLED"
    if live.accounting is Accounting.OFF:
        if not ran:
            return Seen(ObjectState.ENDED, [e for e in live.executions if e.index != live.current])
        return Seen(
            ObjectState.ENDED,
            live.replacing_current(
                ExecutionObs(
                    index=live.current,
                    state=ObjectState.ENDED,
                    cause=squeue_cause(sq),
                    started_at=sq.start if sq.nodes else None,
                    ended_at=sq.end,
                    nodes=sq.nodes,
                )
            ),
        )
    latest = live.latest
    if ran and (latest is None or latest.state is not ObjectState.ENDED):
        # Ended in squeue, not yet in sacct (or sacct did not answer): the cause is not known
        # yet, so the object is reported as still ending rather than guessed.
        executions = list(live.executions)
        if latest is None and sq.nodes:
            executions.append(live.running_now())
        notes = (f"squeue shows {sq.state}; waiting for its accounting record",)
        return Seen(ObjectState.RUNNING, executions, notes)
    return Seen(ObjectState.ENDED, live.executions)


def _running_in_squeue(live: Live) -> Seen:
    sq = live.squeue.state
    notes = (sq,) if sq != "RUNNING" else ()
    latest = live.latest
    if sq == "COMPLETING":
        # The run that is ending is the last one accounting shows. A requeue has already
        # raised the restart count here (0007 §4), so ``current`` names a run that has not
        # started: nothing is made up for it, and the object stays live until squeue moves
        # on (processes may still be in their epilog).
        return Seen(ObjectState.RUNNING, live.executions, notes)
    if any(e.index < live.current and e.state is not ObjectState.ENDED for e in live.executions):
        # squeue runs the next execution while sacct has not closed the previous one yet: its
        # cause is not known, so the observation stays where accounting is (a poll later, both
        # show) rather than show an ended run without its cause.
        return Seen(
            ObjectState.RUNNING, live.executions, (*notes, "accounting lags behind a requeue")
        )
    if latest is None or (latest.state is ObjectState.ENDED and sq == "RUNNING"):
        return Seen(ObjectState.RUNNING, live.replacing_current(live.running_now()), notes)
    return Seen(ObjectState.RUNNING, live.executions, notes)


def _held_by_others(live: Live) -> Seen:
    """Someone else's hold (an operator, requeuehold, a launch failure). Our own gate or hold
    may stand beneath it: a gate keeps the object gated, since nobody opened it."""
    begin = live.begin
    gated = begin.kind is holds.BeginKind.GATE
    return Seen(
        ObjectState.GATED if gated else ObjectState.HELD,
        live.ended_runs,
        (live.squeue.reason or live.squeue.state,),
        begin.instance if begin.kind is holds.BeginKind.HOLD else None,
    )


def _pending(live: Live) -> Seen:
    begin = live.begin
    if begin.kind is holds.BeginKind.GATE:
        return Seen(ObjectState.GATED, live.ended_runs)
    if begin.kind is holds.BeginKind.HOLD:
        return Seen(ObjectState.HELD, live.ended_runs, hold_instance=begin.instance)
    reason = live.squeue.reason
    notes = (reason,) if reason and reason != "None" else ()
    return Seen(ObjectState.PENDING, live.ended_runs, notes)


def _unrecognised(live: Live) -> Seen:
    notes = (f"unrecognised squeue state {live.squeue.state!r}",)
    return Seen(ObjectState.PENDING, live.executions, notes)


#: The object's state while squeue still shows the job, first match wins (spec 0008 §4 shows
#: this table, made from these rows by tests/repo/test_classification_tables.py).
LIVE_STATES: Table[Live, Seen] = Table(
    "slurm-live-states",
    ("squeue State / evidence", "object state"),
    (
        Row(
            "ended",
            "a terminal state (" + ", ".join(sorted(ENDED_STATES)) + ")",
            lambda live: live.squeue.state in ENDED_STATES,
            _ended_in_squeue,
            (
                "**ended** once sacct has the run's terminal record, **running** (\"waiting for "
                "its accounting record\") until then; without accounting, ended with squeue's "
                "cause",
            ),
        ),
        Row(
            "running",
            "a state in which processes may run (" + ", ".join(sorted(RUNNING_STATES)) + ")",
            lambda live: live.squeue.state in RUNNING_STATES,
            _running_in_squeue,
            ("**running**",),
        ),
        Row(
            "held-by-others",
            "a held state (" + ", ".join(sorted(HELD_STATES)) + "), or a hold reason ("
            '`JobHeld*`, "requeued in held state" and the others)',
            lambda live: live.squeue.state in HELD_STATES or live.squeue.reason in HELD_REASONS,
            _held_by_others,
            (
                "**gated** if our gate stands beneath it, else **held** (with our hold's "
                "instance if one of ours is there too)",
            ),
        ),
        Row(
            "pending",
            "PENDING or a requeue state (" + ", ".join(sorted(REQUEUE_STATES)) + ")",
            lambda live: live.squeue.state == "PENDING" or live.squeue.state in REQUEUE_STATES,
            _pending,
            (
                "our gate: **gated**; our hold: **held**, with its instance; else **pending**, "
                "the reason in the detail",
            ),
        ),
        Row(
            "unrecognised",
            "any other state",
            always,
            _unrecognised,
            ("**pending**, the state named in the detail",),
        ),
    ),
)


def observe(
    job_id: str,
    squeue: SqueueRow | None,
    sacct: Sequence[SacctRow],
    accounting: Accounting,
    marks: MarkLookup | None = None,
) -> ObjectObs | None:
    """Combine one job's squeue row (``None`` once slurmctld forgot it) and its sacct rows into
    what the backend shows of the object; ``None`` when neither shows the job. ``marks`` is
    asked only for a run that failed with 126 or 127 (:func:`exec_failure_suspect`)."""
    recs = records(sacct)
    if squeue is None and not recs:
        return None
    name = squeue.name if squeue is not None else recs[-1].job.name
    reason = squeue.reason if squeue is not None else ""
    executions = _accounted(recs, reason, marks, name)
    if squeue is None:
        return _from_accounting(job_id, name, recs, executions)
    current = squeue.restarts if squeue.restarts is not None else len(recs) - 1 if recs else 0
    live = Live(squeue, tuple(executions), accounting, max(current, 0), holds.decode(squeue.start))
    seen = LIVE_STATES(live)
    notes = list(seen.notes)
    if accounting is Accounting.MISSING:
        notes.append("sacct did not answer")
    return ObjectObs(
        ref=ObjectRef(job_id),
        name=name,
        state=seen.state,
        executions=tuple(sorted(seen.executions, key=lambda e: e.index)),
        hold_instance=seen.hold_instance,
        requeue_bit=squeue.requeue,
        detail="; ".join(notes),
    )
