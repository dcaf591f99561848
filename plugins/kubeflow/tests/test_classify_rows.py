"""Each row of the Kubeflow classification tables, by name, with evidence that reaches it first.

The tables are data (``STATES``, ``RUN_CAUSES``, ``POD_CAUSES``); spec 0010 §5 shows them as
the code reads them (tests/repo/test_classification_tables.py). Here every row has one example
built from API-shaped objects: the example must be decided by that row (no earlier row takes
it) and yield what the row says it yields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.types import Cause, ObjectState
from jobdispatch_kubeflow import names
from jobdispatch_kubeflow.classify import (
    POD_CAUSES,
    RUN_CAUSES,
    STATES,
    Chain,
    PodEvidence,
    RunEvidence,
    kueue_view,
    read,
)
from objects import cond, job, node, nodes, pod, terminated, trainjob, waiting

FIXTURES = Path(__file__).parent / "fixtures"
FAILED = [cond("Failed", "FailedJobs", "jobset failed")]
DEADLINE = [cond("Failed", "DeadlineExceeded", "Trainjob exceeded its deadline")]
EARLY = "2026-12-01T10:01:00Z"


def _disrupted(reason: str, pod_reason: str | None = None) -> dict[str, Any]:
    return pod(conditions=[cond("DisruptionTarget", reason, "m")], reason=pod_reason)


def _failed_pod(*containers: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return pod(name, phase="Failed", containers=list(containers))


def _pending_pod(**kw: Any) -> dict[str, Any]:
    return pod(phase="Pending", node=None, **kw)


def _unschedulable() -> dict[str, Any]:
    return _pending_pod(
        conditions=[cond("PodScheduled", "Unschedulable", "0/3 nodes are available", "False")]
    )


#: row name → the pod and the nodes (None: not listed)
POD_EXAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "oom-killed": (_failed_pod(terminated(137, "OOMKilled")), None),
    "preempted-by-scheduler": (_disrupted("PreemptionByScheduler"), None),
    "evicted-by-api": (_disrupted("EvictionByEvictionAPI"), None),
    # Exit 3, then the emptied node deleted (kwok-node-1 is not among the nodes).
    "exited-before-node-went": (_failed_pod(terminated(3)), nodes(node("kwok-node-2"))),
    "deleted-with-node": (_disrupted("DeletionByPodGC"), None),
    "kubelet-node-shutdown": (_disrupted("TerminationByKubelet", "NodeShutdown"), None),
    "kubelet-termination": (_disrupted("TerminationByKubelet", "Evicted"), None),
    "node-reason": (pod(phase="Failed", reason="NodeLost"), None),
    "evicted": (pod(phase="Failed", reason="Evicted", message="low on memory"), None),
    "pod-deadline": (pod(phase="Failed", reason="DeadlineExceeded"), None),
    "node-gone": (pod(), nodes(node("kwok-node-2"))),
    "cannot-launch": (pod(phase="Pending", containers=[waiting("ImagePullBackOff")]), None),
    "non-zero-exit": (_failed_pod(terminated(3)), None),
    "none": (pod(), None),
}


def _kind_and_provenance(cause: Cause | None, gives: tuple[str, ...]) -> None:
    """The cause is the one the row names (a row yielding another's cause names its kind)."""
    kind, provenance = gives
    if cause is None:
        assert kind == "none shown"
        return
    assert str(cause.kind) == kind.split(" (")[0]
    if provenance != "that cause's":
        assert str(cause.provenance) == provenance


def test_every_pod_row_has_an_example() -> None:
    assert [row.name for row in POD_CAUSES.rows] == list(POD_EXAMPLES)


@pytest.mark.parametrize("name", list(POD_EXAMPLES))
def test_pod_cause_row(name: str) -> None:
    evidence = PodEvidence.of(*POD_EXAMPLES[name])
    row = POD_CAUSES.match(evidence)
    assert row.name == name
    _kind_and_provenance(POD_CAUSES(evidence), row.gives)


def _failed_run(conditions: list[dict[str, Any]] = FAILED, **kw: Any) -> Chain:
    return Chain(trainjob=trainjob(conditions=conditions), **kw)


def _placed_on(node_name: str) -> dict[str, Any]:
    tj = trainjob(conditions=FAILED)
    tj["metadata"]["annotations"][f"{names.PLACEMENT}-0"] = json.dumps({node_name: "uid-1"})
    return tj


POLICY = (
    "Container node for pod dispatch/p failed with exit code 3 matching FailJob rule at index 0"
)

#: row name → (chain, the run's pods, whether it started)
RUN_EXAMPLES: dict[str, tuple[Chain, list[dict[str, Any]], bool]] = {
    "creation-failed": (_failed_run([cond("Failed", "JobCreationFailed", "x")]), [], True),
    "pod-out-of-memory": (
        _failed_run(),
        [_failed_pod(terminated(1), name="a"), _failed_pod(terminated(137, "OOMKilled"))],
        True,
    ),
    "pod-preempted": (
        _failed_run(),
        [_failed_pod(terminated(1), name="a"), _disrupted("PreemptionByScheduler")],
        True,
    ),
    "pod-node-lost": (_failed_run(), [pod(phase="Failed", reason="NodeLost")], True),
    "deadline-cannot-launch": (
        _failed_run(DEADLINE),
        [_pending_pod(containers=[waiting("ErrImagePull")]), _unschedulable()],
        False,
    ),
    "deadline-unschedulable": (_failed_run(DEADLINE), [_unschedulable()], False),
    "deadline": (_failed_run(DEADLINE), [], True),
    "job-deadline": (
        _failed_run(jobs=[job(conditions=[cond("Failed", "DeadlineExceeded")])]),
        [],
        True,
    ),
    "pod-time-limit": (_failed_run(), [pod(phase="Failed", reason="DeadlineExceeded")], True),
    "pod-launch-failed": (_failed_run(), [_failed_pod(terminated(128, "StartError"))], True),
    "earliest-exit": (
        _failed_run(),
        [_failed_pod(terminated(1), name="a"), _failed_pod(terminated(2, finished=EARLY))],
        True,
    ),
    "job-message": (
        _failed_run(jobs=[job(conditions=[cond("Failed", "PodFailurePolicy", POLICY)])]),
        [],
        True,
    ),
    "placed-node-lost": (Chain(trainjob=_placed_on("kwok-node-1"), nodes={}), [], True),
    "unknown": (_failed_run(), [], True),
}


def test_every_run_row_has_an_example() -> None:
    assert [row.name for row in RUN_CAUSES.rows] == list(RUN_EXAMPLES)


@pytest.mark.parametrize("name", list(RUN_EXAMPLES))
def test_run_cause_row(name: str) -> None:
    chain, pods, ran = RUN_EXAMPLES[name]
    evidence = RunEvidence.of(chain, pods, ran)
    row = RUN_CAUSES.match(evidence)
    assert row.name == name
    cause = RUN_CAUSES(evidence)
    _kind_and_provenance(cause, row.gives)
    if name == "earliest-exit":
        assert cause.exit_code == 2, "the pod that failed first names the exit"
    if name == "job-message":
        assert cause.exit_code == 3


def _kueue(**kw: Any) -> dict[str, Any]:
    tj = trainjob(suspend=True, **kw)
    tj["metadata"]["labels"][names.QUEUE_NAME] = "jobdispatch-gated"
    return tj


def _workload(name: str) -> Any:
    return json.loads((FIXTURES / f"kueue-workload-{name}.json").read_text())


def _rejected_after_eviction() -> Any:
    wl = _workload("preempted-deactivated")
    wl["status"]["admissionChecks"] = [
        {
            "name": "jobdispatch-admission",
            "state": "Rejected",
            "message": "evicted after the admission open o1 allowed: never readmitted",
        }
    ]
    return wl


ADMITTED = _workload("admitted")

#: row name → (chain, the object state it yields)
STATE_EXAMPLES: dict[str, tuple[Chain, ObjectState]] = {
    "complete": (Chain(trainjob=trainjob(conditions=[cond("Complete")])), ObjectState.ENDED),
    "failed": (_failed_run(), ObjectState.ENDED),
    "stopping": (Chain(trainjob=trainjob(deleting=True), pods=[pod()]), ObjectState.RUNNING),
    "deleted": (Chain(trainjob=trainjob(deleting=True)), ObjectState.ENDED),
    "held": (Chain(trainjob=trainjob(suspend=True, gate="closed", hold=4)), ObjectState.HELD),
    "gated": (Chain(trainjob=trainjob(suspend=True, gate="closed")), ObjectState.GATED),
    "kueue-no-workload": (Chain(trainjob=_kueue()), ObjectState.PENDING),
    "kueue-never-readmitted": (
        Chain(trainjob=_kueue(), workload=_rejected_after_eviction()),
        ObjectState.ENDED,
    ),
    "kueue": (Chain(trainjob=_kueue(), workload=ADMITTED), kueue_view(ADMITTED).state),
    "suspended": (Chain(trainjob=trainjob(suspend=True)), ObjectState.HELD),
    "running": (Chain(trainjob=trainjob(), pods=[pod()]), ObjectState.RUNNING),
    "pending": (Chain(trainjob=trainjob(), pods=[_unschedulable()]), ObjectState.PENDING),
}


def test_every_state_row_has_an_example() -> None:
    assert [row.name for row in STATES.rows] == list(STATE_EXAMPLES)


@pytest.mark.parametrize("name", list(STATE_EXAMPLES))
def test_state_row(name: str) -> None:
    chain, state = STATE_EXAMPLES[name]
    reading = read(chain)
    assert STATES.match(reading).name == name
    assert STATES(reading).state is state
