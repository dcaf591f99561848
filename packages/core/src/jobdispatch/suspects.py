"""Suspect nodes: the nodes a job keeps off for a while because two of its runs in a row died on
them.

A run that ends ``node-lost`` or ``stalled`` may have been killed by a bad node (a flaky
interconnect, a disk that hangs, a GPU that wedges) as much as by the job. One such run proves
little; two consecutive ones that share nodes make those nodes suspect. With
``[recovery] exclude_suspects_for`` set, every submission authorized while the suspicion lasts
carries the shared nodes in its ``submission-authorized`` event, and each of its attempts asks
the adapter to keep the object off them (Slurm ``--exclude``, a Kubernetes node anti-affinity,
the local adapter names them and ignores them).

Pure: it reads the folded record and ``now``, and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from itertools import pairwise

import attrs

from jobdispatch.job import Job
from jobdispatch.spi import ExecutionObs
from jobdispatch.types import CauseKind, ObjectState

__all__ = [
    "SUSPECT_CAUSES",
    "Run",
    "Suspicion",
    "excluded",
    "runs_of",
    "standing",
    "suspicions",
]

#: The run causes that may be a node's fault.
SUSPECT_CAUSES = frozenset({CauseKind.NODE_LOST, CauseKind.STALLED})


@attrs.frozen
class Run:
    """One ended run of the job, in the order the job ran them: its cause, nodes and end."""

    cause: CauseKind | None
    nodes: tuple[str, ...]
    ended_at: datetime | None


@attrs.frozen
class Suspicion:
    """Nodes two consecutive suspect runs shared, suspect until ``until``."""

    nodes: tuple[str, ...]
    until: datetime


def runs_of(job: Job) -> list[Run]:
    """Every ended run of every canonical object, submission by submission and, within an
    object the backend reran in place, by run index: the order the job ran them."""
    runs: list[Run] = []
    for sub in job.submissions:
        if sub.canonical is None:
            continue
        obj = job.object(sub.canonical)
        if obj is None:
            continue
        for run in sorted(obj.executions(), key=_index):
            if run.state is ObjectState.ENDED:
                cause = job.run_cause(obj, run)
                runs.append(Run(cause.kind if cause else None, run.nodes, run.ended_at))
    return runs


def _index(run: ExecutionObs) -> int:
    return run.index


def suspicions(runs: Sequence[Run], hold_for: timedelta) -> list[Suspicion]:
    """For each pair of consecutive runs that both ended ``node-lost`` or ``stalled`` and share
    nodes, those nodes, suspect for ``hold_for`` from the later run's end. A run whose end time
    the backend did not give starts no suspicion: there is nothing to count from."""
    found: list[Suspicion] = []
    for before, after in pairwise(runs):
        if before.cause not in SUSPECT_CAUSES or after.cause not in SUSPECT_CAUSES:
            continue
        shared = tuple(sorted(set(before.nodes) & set(after.nodes)))
        if shared and after.ended_at is not None:
            found.append(Suspicion(shared, after.ended_at + hold_for))
    return found


def standing(found: Iterable[Suspicion], now: datetime) -> tuple[tuple[str, ...], datetime | None]:
    """The nodes still suspect at ``now`` (sorted, each once) and the latest time one of them
    stops being suspect; ``((), None)`` when none is."""
    live = [s for s in found if s.until > now]
    if not live:
        return (), None
    nodes = sorted({n for s in live for n in s.nodes})
    return tuple(nodes), max(s.until for s in live)


def excluded(job: Job, now: datetime) -> tuple[tuple[str, ...], datetime | None]:
    """The nodes the job's next submission keeps off at ``now``, and until when: none unless
    the job file sets ``[recovery] exclude_suspects_for``."""
    hold_for = job.header.spec.recovery.exclude_suspects_for
    if hold_for is None:
        return (), None
    return standing(suspicions(runs_of(job), hold_for), now)
