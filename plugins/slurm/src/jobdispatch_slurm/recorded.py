"""A transport that answers Slurm's commands from recorded text, for tests and the benchmark.

The outputs are in exactly the formats the adapter asks the real cluster for (the fields of
:data:`~jobdispatch_slurm.parse.SQUEUE_FIELDS` and :data:`~jobdispatch_slurm.parse.SACCT_FIELDS`,
``|``-delimited), and :func:`synthetic` writes them for any number of jobs in the states a
real 22.05.8 cluster showed (docs/specs/0007): gated, running, requeued after a preemption,
ended by a time limit, an exit code or an OOM. Nothing here runs a program.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from jobdispatch_slurm import holds
from jobdispatch_slurm.transport import Result

__all__ = ["RecordedTransport", "synthetic"]

CONFIG = """Configuration data as of 2026-11-29T10:14:48
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = recorded
JobRequeue              = 1
KillWait                = 2 sec
MinJobAge               = 600 sec
PreemptMode             = REQUEUE
PreemptType             = preempt/partition_prio
SlurmctldHost[0]        = recorded(127.0.0.1)
SLURM_VERSION           = 22.05.8
"""
PARTITIONS = (
    "PartitionName=debug Default=YES GraceTime=0 PreemptMode=REQUEUE State=UP\n"
    "PartitionName=high Default=NO GraceTime=0 PreemptMode=OFF State=UP\n"
)


def _t(at: datetime) -> str:
    return holds.slurm_time(at)


def synthetic(jobs: Sequence[str], *, first_id: int = 1000) -> tuple[str, str]:
    """squeue and sacct output for one object of each job, cycling through five situations."""
    base = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    sq: list[str] = []
    sa: list[str] = []
    for i, job in enumerate(jobs):
        jid = str(first_id + i)
        name = f"jd-{job}-1-1"
        start = base + timedelta(seconds=i)
        end = start + timedelta(minutes=5)
        kind = i % 5
        if kind == 0:  # gated: squeue only (sacct has no row yet, 0007 §1)
            sq.append(
                f"{jid}|{name}|debug|PENDING|BeginTime|{_t(holds.GATE)}|NONE||0|0|{_t(start)}|"
            )
        elif kind == 1:  # running
            sq.append(
                f"{jid}|{name}|debug|RUNNING|None|{_t(start)}|{_t(end)}|node1|0|0|{_t(start)}|"
            )
            sa.append(
                f"{jid}|{name}|debug|RUNNING|0:0|0:0|{_t(start)}|{_t(start)}|Unknown|node1|None"
            )
        elif kind == 2:  # preempted, requeued, running again
            again = start + timedelta(seconds=14)
            sq.append(
                f"{jid}|{name}|debug|RUNNING|None|{_t(again)}|{_t(end)}|node[1-2]|1|1|{_t(start)}|"
            )
            sa.append(
                f"{jid}|{name}|debug|PREEMPTED|0:0|0:0|{_t(start)}|{_t(start)}|{_t(start)}|"
                "node[1-2]|None"
            )
            sa.append(
                f"{jid}|{name}|debug|RUNNING|0:0|0:0|{_t(start)}|{_t(again)}|Unknown|node[1-2]|BeginTime"
            )
        elif kind == 3:  # time limit, already forgotten by slurmctld
            sa.append(
                f"{jid}|{name}|debug|TIMEOUT|0:0|0:0|{_t(start)}|{_t(start)}|{_t(end)}|node2|None"
            )
        else:  # exit 3
            sq.append(
                f"{jid}|{name}|debug|FAILED|NonZeroExitCode|{_t(start)}|{_t(end)}|node2|0|0|{_t(start)}|"
            )
            sa.append(
                f"{jid}|{name}|debug|FAILED|3:0|0:0|{_t(start)}|{_t(start)}|{_t(end)}|node2|None"
            )
    return "\n".join(sq) + "\n", "\n".join(sa) + "\n"


class RecordedTransport:
    """Answers from recorded text; ``-j N`` filters rows by job id as Slurm would."""

    where = "recorded"

    def __init__(self, squeue: str, sacct: str, *, user: str = "root") -> None:
        self.squeue = squeue
        self.sacct = sacct
        self.user = user

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        name = os.path.basename(argv[0])
        args = list(argv[1:])
        out = ""
        if name == "squeue":
            out = self._filter(self.squeue, args)
        elif name == "sacct":
            out = "" if "now" in args else self._filter(self.sacct, args)
        elif name == "scontrol" and args[:2] == ["show", "config"]:
            out = CONFIG
        elif name == "scontrol" and "partition" in args:
            out = PARTITIONS
        elif name == "id":
            out = self.user + "\n"
        return Result(tuple(argv), 0, out.encode())

    def _filter(self, text: str, args: list[str]) -> str:
        if "-j" not in args:
            return text
        wanted = set(args[args.index("-j") + 1].split(","))
        lines = [ln for ln in text.splitlines() if ln.split("|", 1)[0].split(".")[0] in wanted]
        return "\n".join(lines) + ("\n" if lines else "")

    def close(self) -> None:
        pass
