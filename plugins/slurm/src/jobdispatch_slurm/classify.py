"""Why did a Slurm job's run end, and what does the job show now? Pure functions of parsed rows.

The rules are shared/research/classification.md §1 and §4.1 as corrected by what a real Slurm
22.05.8 cluster printed (docs/specs/0007). The table, with the reasons, is in
docs/specs/0008-slurm-adapter.md; the code below is the same table. Where the evidence does not
decide a question the answer is ``unknown``, never a guess.

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
from jobdispatch.spi import ExecutionObs
from jobdispatch.types import Cause, CauseKind, ObjectState, Provenance

from jobdispatch_slurm import holds
from jobdispatch_slurm.parse import SacctRow, SqueueRow
from jobdispatch_slurm.script import EXEC_FAILED_CODES

__all__ = [
    "ENDED_STATES",
    "Accounting",
    "Observation",
    "Record",
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


def cause_of(record: Record, *, reason: str = "", launch_mark: str = "") -> Cause:
    """The cause of an ended record, from its job row, its steps and, when squeue still shows
    the job, squeue's reason (which sacct does not keep for launch failures, 0007 §8).
    ``launch_mark`` is the line the run wrote when a program could not be started (found by
    the backend in its standard error): it tells that from the application's own 126 or 127."""
    job = record.job
    if launch_mark and job.base_state == "FAILED":
        _, _, said = launch_mark.partition(": ")
        return Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, said.strip() or launch_mark)
    state = job.base_state
    exit_ = job.exit
    derived = job.derived
    code = exit_.code if exit_ is not None else None
    if state == "COMPLETED":
        if _oom(record):
            return Cause(
                CauseKind.OUT_OF_MEMORY,
                Provenance.APPLICATION,
                "a step ran out of memory (0:125) though the script exited 0",
            )
        if derived is not None and not derived.clean:
            return Cause(
                CauseKind.NON_ZERO_EXIT,
                Provenance.APPLICATION,
                f"a step failed ({derived}) though the script exited 0",
                exit_code=derived.code or None,
                signal=derived.signal or None,
            )
        return Cause(CauseKind.NONE, Provenance.NONE, exit_code=0)
    if state == "OUT_OF_MEMORY" or (state in ("FAILED", "PREEMPTED") and _oom(record)):
        detail = "out of memory (0:125)"
        if state == "PREEMPTED":
            detail += "; recorded as PREEMPTED: it ended within the preemption grace time"
        return Cause(CauseKind.OUT_OF_MEMORY, Provenance.APPLICATION, detail)
    if state == "FAILED":
        if exit_ is not None and exit_.code > 0:
            signal = derived.signal if derived is not None and derived.signal else None
            # Under srun the job's own status is srun's, which may be what it saw of a rank it
            # terminated after another failed (15:0, 0007 §8); the earliest failed step holds
            # the application's own code, so that is the one reported.
            step = _failed_step(record, launched_only=True)
            shown, detail = exit_, ""
            if (
                step is not None
                and step.exit is not None
                and step.exit.code > 0
                and (step.exit != exit_)
            ):
                shown = step.exit
                detail = f"step {step.step} exited {step.exit}; the job's own status was {exit_}"
            return Cause(
                CauseKind.NON_ZERO_EXIT,
                Provenance.APPLICATION,
                detail,
                exit_code=shown.code,
                signal=signal,
            )
        if exit_ is not None and exit_.signal in KILL_SIGNALS:
            # 0007 §8: a batch shell killed by a signal shows Reason=JobLaunchFailure; the
            # signal is what tells a killed application from a launch that failed.
            return Cause(
                CauseKind.NON_ZERO_EXIT,
                Provenance.APPLICATION,
                f"killed by signal {exit_.signal}",
                signal=exit_.signal,
            )
        if (exit_ is not None and exit_.signal) or reason == "JobLaunchFailure" or not record.ran:
            what = f"exit status {exit_}" if exit_ is not None else "no exit status"
            return Cause(
                CauseKind.LAUNCH_FAILED,
                Provenance.SCHEDULER,
                f"{what}{', ' + reason if reason else ''}: the batch script did not start",
            )
        return Cause(CauseKind.UNKNOWN, Provenance.NONE, f"FAILED with exit status {exit_}")
    if state == "TIMEOUT":
        return Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER)
    if state == "NODE_FAIL":
        if reason == "PartitionDown":
            return Cause(CauseKind.CANCELLED, Provenance.ACTOR, "its partition was removed")
        nodes = ",".join(job.nodes)
        return Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, f"a node of {nodes} failed")
    if state == "PREEMPTED":
        return Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER)
    if state == "CANCELLED":
        who = _by(job.state)
        if who:
            return Cause(CauseKind.CANCELLED, Provenance.ACTOR, f"cancelled by uid {who}")
        return Cause(CauseKind.CANCELLED, Provenance.SCHEDULER, "cancelled by slurmctld")
    if state == "DEADLINE":
        return Cause(CauseKind.NO_CAPACITY, Provenance.SCHEDULER, "could not start by --deadline")
    if state == "BOOT_FAIL":
        return Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, "node boot failed")
    if state == "REVOKED":
        return Cause(CauseKind.DUPLICATE, Provenance.SCHEDULER, "ran on a federation sibling")
    if state == "REQUEUED":
        # 0007 §5: requeueing a finished job rewrites its row to REQUEUED; the run had ended
        # by itself, which its exit status (and its batch step) still tell.
        batch = next((s for s in record.steps if s.step == "batch"), None)
        ended_first = (
            batch is not None
            and batch.end is not None
            and job.end is not None
            and (job.end - batch.end).total_seconds() > 2
        )
        if (exit_ is not None and exit_.code > 0) or ended_first:
            inner = cause_of(
                Record(attrs.evolve(job, state=batch.state if batch else "FAILED"), record.steps)
            )
            return attrs.evolve(
                inner, detail=_join(inner.detail, "ended by itself, then requeued (row rewritten)")
            )
        return Cause(CauseKind.REQUEUED, Provenance.ACTOR, "scontrol requeue")
    if state == "SPECIAL_EXIT":
        return Cause(
            CauseKind.REQUEUED, Provenance.APPLICATION, "RequeueExitHold exit code", exit_code=code
        )
    if state in REQUEUE_STATES:
        return Cause(CauseKind.REQUEUED, Provenance.SCHEDULER, state)
    return Cause(CauseKind.UNKNOWN, Provenance.NONE, f"sacct state {job.state!r}")


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


@attrs.frozen
class Observation:
    """What one job shows: the parts of an :class:`~jobdispatch.spi.ObjectObs` that come from
    the scheduler."""

    job_id: str
    name: str
    state: ObjectState
    executions: tuple[ExecutionObs, ...] = ()
    hold_instance: int | None = None
    requeue_bit: bool | None = None
    detail: str = ""


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


def observe(
    job_id: str,
    squeue: SqueueRow | None,
    sacct: Sequence[SacctRow],
    accounting: Accounting,
    marks: MarkLookup | None = None,
) -> Observation | None:
    """Combine one job's squeue row (``None`` once slurmctld forgot it) and its sacct rows into
    an observation; ``None`` when neither shows the job. ``marks`` is asked only for a run that
    failed with 126 or 127 (:func:`exec_failure_suspect`)."""
    recs = records(sacct)
    if squeue is None and not recs:
        return None
    name = squeue.name if squeue is not None else recs[-1].job.name
    reason = squeue.reason if squeue is not None else ""
    notes: list[str] = []

    # Executions from accounting: every record that ran, and a last record that ended without
    # running for a reason other than a cancel (a launch failure, a deadline).
    executions: list[ExecutionObs] = []
    for i, rec in enumerate(recs):
        last = i == len(recs) - 1
        state = rec.job.base_state
        ended = not last or state in ENDED_STATES or state in REQUEUE_STATES
        if rec.ran or (last and ended and state not in ("CANCELLED",)):
            executions.append(_execution(i, rec, ended, reason if last else "", marks, name))

    if squeue is None:
        # Past MinJobAge: accounting alone. A last record still RUNNING or PENDING is the
        # accounting lag or a controller that lost the job: not evidence of an end.
        last_state = recs[-1].job.base_state
        if last_state in ENDED_STATES:
            state = ObjectState.ENDED
        elif last_state in ("RUNNING",):
            state = ObjectState.RUNNING
        else:
            state = ObjectState.PENDING
            notes.append(f"sacct shows {recs[-1].job.state} and squeue no longer knows the job")
        return Observation(job_id, name, state, tuple(executions), detail="; ".join(notes))

    sq = squeue.state
    begin = holds.decode(squeue.start)
    hold_instance: int | None = None
    current = squeue.restarts if squeue.restarts is not None else len(recs) - 1 if recs else 0
    current = max(current, 0)

    if sq in ENDED_STATES:
        state = ObjectState.ENDED
        if accounting is Accounting.OFF:
            executions = [e for e in executions if e.index != current]
            if squeue.nodes or sq != "CANCELLED":
                executions.append(
                    ExecutionObs(
                        index=current,
                        state=ObjectState.ENDED,
                        cause=squeue_cause(squeue),
                        started_at=squeue.start if squeue.nodes else None,
                        ended_at=squeue.end,
                        nodes=squeue.nodes,
                    )
                )
        else:
            latest = next((e for e in executions if e.index == current), None)
            ran = bool(squeue.nodes) or sq != "CANCELLED"
            if ran and (latest is None or latest.state is not ObjectState.ENDED):
                # Ended in squeue, not yet in sacct (or sacct did not answer): the cause is not
                # known yet, so the object is reported as still ending rather than guessed.
                state = ObjectState.RUNNING
                notes.append(f"squeue shows {sq}; waiting for its accounting record")
                if latest is None and squeue.nodes:
                    executions.append(
                        ExecutionObs(
                            index=current,
                            state=ObjectState.RUNNING,
                            started_at=squeue.start,
                            nodes=squeue.nodes,
                        )
                    )
    elif sq in RUNNING_STATES:
        state = ObjectState.RUNNING
        if sq != "RUNNING":
            notes.append(sq)
        latest = next((e for e in executions if e.index == current), None)
        if sq == "COMPLETING":
            # The run that is ending is the last one accounting shows. A requeue has already
            # raised the restart count here (0007 §4), so ``current`` names a run that has not
            # started: nothing is made up for it, and the object stays live until squeue
            # moves on (processes may still be in their epilog).
            pass
        elif any(e.index < current and e.state is not ObjectState.ENDED for e in executions):
            # squeue runs the next execution while sacct has not closed the previous one yet:
            # its cause is not known, so the observation stays where accounting is (a poll
            # later, both show) rather than show an ended run without its cause.
            notes.append("accounting lags behind a requeue")
        elif latest is None or (latest.state is ObjectState.ENDED and sq == "RUNNING"):
            executions = [e for e in executions if e.index != current]
            executions.append(
                ExecutionObs(
                    index=current,
                    state=ObjectState.RUNNING,
                    started_at=squeue.start,
                    nodes=squeue.nodes,
                )
            )
    elif sq in HELD_STATES or squeue.reason in HELD_REASONS:
        # Someone else's hold (an operator, requeuehold, a launch failure). Our own gate or hold
        # may stand beneath it: a gate keeps the object gated, since nobody opened it.
        state = ObjectState.GATED if begin.kind is holds.BeginKind.GATE else ObjectState.HELD
        notes.append(squeue.reason or sq)
        if begin.kind is holds.BeginKind.HOLD:
            hold_instance = begin.instance
        executions = [e for e in executions if e.state is ObjectState.ENDED]
    elif sq == "PENDING" or sq in REQUEUE_STATES:
        executions = [e for e in executions if e.state is ObjectState.ENDED]
        if begin.kind is holds.BeginKind.GATE:
            state = ObjectState.GATED
        elif begin.kind is holds.BeginKind.HOLD:
            state = ObjectState.HELD
            hold_instance = begin.instance
        else:
            state = ObjectState.PENDING
            if squeue.reason and squeue.reason != "None":
                notes.append(squeue.reason)
    else:
        state = ObjectState.PENDING
        notes.append(f"unrecognised squeue state {sq!r}")

    if accounting is Accounting.MISSING:
        notes.append("sacct did not answer")
    executions.sort(key=lambda e: e.index)
    return Observation(
        job_id,
        name,
        state,
        tuple(executions),
        hold_instance=hold_instance,
        requeue_bit=squeue.requeue,
        detail="; ".join(notes),
    )
