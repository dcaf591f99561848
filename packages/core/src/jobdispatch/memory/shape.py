"""The two shapes the memory backend can take, and what each one answers.

A shape is a table, not a subclass: what each scheduler supports, which causes its own policy
can rerun an object for, and which recovery actions it can carry out when a supervisor asks.
Keeping it as data lets a site's declarations override single answers, exactly as a real
cluster's probed or declared answers would.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from jobdispatch.types import Action, Capability, CauseKind, Tristate

__all__ = ["NATIVE", "PERFORM", "Shape", "answers"]


class Shape(enum.StrEnum):
    """Which scheduler the memory backend imitates."""

    SLURM = "slurm"
    KUBEFLOW = "kubeflow"

    def __str__(self) -> str:
        return self.value


_Y, _N, _U = Tristate.YES, Tristate.NO, Tristate.UNKNOWN
C = Capability

_ANSWERS: Mapping[Shape, Mapping[Capability, Tristate]] = {
    Shape.SLURM: {
        C.CONTAINER_IMAGE: _N,
        C.NATIVE_REQUEUE: _Y,
        C.NATIVE_RESTART: _N,
        C.HOLD: _Y,
        C.PRE_TERMINATION_SIGNAL: _Y,
        C.ACCOUNTING_HISTORY: _Y,
        C.ATTEMPT_INJECTION: _Y,
        C.READMISSION_GATE: _N,
        C.WORKING_DIRECTORY: _Y,
        C.PROCS_PER_NODE: _Y,
        C.OUTPUT_PATH: _Y,
        C.OUTPUT_READ: _Y,
        C.OUTPUT_FOLLOW: _Y,
        C.OUTPUT_RETAINED: _Y,
        C.OUTPUT_GROWTH: _N,  # the memory backend keeps no output files to watch grow
        C.GPUS: _Y,
        C.MEMORY_LIMIT: _Y,
        C.CPUS_PER_PROC: _Y,
        C.QUEUES: _Y,  # partitions
        C.ACCOUNTS: _Y,
        C.NODE_CONSTRAINTS: _Y,  # node features
        C.EXCLUSIVE_NODES: _Y,
    },
    Shape.KUBEFLOW: {
        C.CONTAINER_IMAGE: _Y,
        C.NATIVE_REQUEUE: _N,
        C.NATIVE_RESTART: _Y,
        C.HOLD: _Y,  # a suspended TrainJob
        C.PRE_TERMINATION_SIGNAL: _Y,  # SIGTERM and the pod's grace period
        C.ACCOUNTING_HISTORY: _N,
        C.ATTEMPT_INJECTION: _Y,  # environment variables in the pod template
        C.READMISSION_GATE: _Y,
        C.WORKING_DIRECTORY: _Y,
        C.PROCS_PER_NODE: _Y,
        C.OUTPUT_PATH: _N,  # logs are read from the API, not written to a path
        C.OUTPUT_READ: _Y,
        C.OUTPUT_FOLLOW: _Y,
        C.OUTPUT_RETAINED: _U,  # depends on the cluster's log retention
        C.OUTPUT_GROWTH: _N,  # a pod log's growth is not watched
        C.GPUS: _Y,  # extended resources such as nvidia.com/gpu
        C.MEMORY_LIMIT: _Y,
        C.CPUS_PER_PROC: _Y,
        C.QUEUES: _U,  # Kueue LocalQueues, where Kueue is installed
        C.ACCOUNTS: _N,
        C.NODE_CONSTRAINTS: _Y,  # node selectors
        C.EXCLUSIVE_NODES: _U,  # JobSet's exclusive placement, where the site allows it
    },
}


def answers(shape: Shape) -> dict[Capability, Tristate]:
    """The shape's own answer for every capability, before site declarations."""
    return dict(_ANSWERS[shape])


#: For each shape: the action its scheduler carries out by itself, the capability that says it
#: can, and the causes it can do it for.
NATIVE: Mapping[Shape, tuple[Action, Capability, frozenset[CauseKind]]] = {
    Shape.SLURM: (
        Action.REQUEUE,
        C.NATIVE_REQUEUE,
        frozenset({CauseKind.PREEMPTED, CauseKind.NODE_LOST}),
    ),
    Shape.KUBEFLOW: (
        Action.RESTART,
        C.NATIVE_RESTART,
        frozenset(
            {
                CauseKind.PREEMPTED,
                CauseKind.NODE_LOST,
                CauseKind.OUT_OF_MEMORY,
                CauseKind.NON_ZERO_EXIT,
                CauseKind.UNKNOWN,
            }
        ),
    ),
}

#: For each shape: whether a supervisor can have it perform each action. Hold also depends on
#: the ``hold`` capability, which a site may turn off.
PERFORM: Mapping[Shape, Mapping[Action, Tristate]] = {
    Shape.SLURM: {
        Action.RESUBMIT: _Y,
        Action.HOLD: _Y,
        Action.ESCALATE: _Y,
        Action.REQUEUE: _Y,
        Action.RESTART: _N,
    },
    Shape.KUBEFLOW: {
        Action.RESUBMIT: _Y,
        Action.HOLD: _Y,
        Action.ESCALATE: _Y,
        Action.REQUEUE: _N,
        Action.RESTART: _N,
    },
}
