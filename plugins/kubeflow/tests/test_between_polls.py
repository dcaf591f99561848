"""Endings between two polls, on the real control plane: the pods are deleted with their
evidence before the next poll, and the cause must still be read.

- A node deleted under a run: PodGC fails the pod and the Job controller lets it go, and the
  Job's failure says nothing of why. The placement pinned when the run was first seen still names
  the loss (spec 0010 §5). CI once met exactly this: a poll missed the second the dying pod was
  there, and the ending read ``unknown``.
- A pod evicted (a drain): gone within about a second. A supervisor watches the job, and the
  backend's pod sentinel pins the eviction as the API server reports it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from jobdispatch import JobSpec, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import CauseKind, ObjectState, Provenance

pytestmark = pytest.mark.kube


@attrs.frozen
class Run:
    """One single-node TrainJob, opened, with the backend and the admin's driver."""

    backend: Any
    driver: Any
    job: str
    ref: Any
    name: str


@pytest.fixture
def run(kube_cluster: None) -> Iterator[Run]:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    driver = KubeDriver(backend)
    job = "bp" + uuid.uuid4().hex[:8]
    spec = JobSpec(command=("sleep", "3600"), nodes=1)
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    try:
        backend.open(ref)
        yield Run(backend, driver, job, ref, names.split_ref(ref)[1])
    finally:
        driver.cleanup()
        backend.stop(ref, "test over")
        backend.forget(ref)
        backend.close()


def _failed_and_gone(run: Run) -> bool:
    """Whether the TrainJob has failed and none of its pods is left, read by the admin alone."""
    from jobdispatch_kubeflow import names

    admin, namespace = run.driver.admin, run.backend.namespace
    tj = admin.get("trainjobs", namespace, run.name) or {}
    conditions = (tj.get("status") or {}).get("conditions") or ()
    failed = any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
    pods, _ = admin.list("pods", namespace, label_selector=f"{names.JOBSET_NAME}={run.name}")
    return failed and not pods


def _first_cause(run: Run) -> Any:
    """Once only the admin has looked until the run failed with its pods gone: the cause a
    poll now reads for execution 0."""
    eventually(lambda: _failed_and_gone(run), "failed with its pods gone", within=180, every=1)
    (obs,) = run.backend.find(run.job).objects
    assert obs.state is ObjectState.ENDED, obs
    cause = obs.executions[0].cause
    assert cause is not None, obs
    return cause


def test_a_node_lost_between_two_polls_is_node_lost(run: Run) -> None:
    from jobdispatch_kubeflow import names

    running = ObjectState.RUNNING
    eventually(
        lambda: run.backend.find(run.job).objects[0].state is running,
        "running",
        within=180,
        every=1,
    )
    trainjob = run.driver.admin.get("trainjobs", run.backend.namespace, run.name)
    assert trainjob is not None
    assert f"{names.PLACEMENT}-0" in trainjob["metadata"]["annotations"]
    run.driver.lose_node(run.ref)
    cause = _first_cause(run)
    assert (cause.kind, cause.provenance) == (CauseKind.NODE_LOST, Provenance.SCHEDULER), cause
    assert "was deleted" in cause.detail, cause


def test_an_eviction_between_two_polls_is_preempted_by_an_actor(run: Run) -> None:
    eventually(lambda: run.driver._pods(run.ref, timeout=1), "running", within=180, every=1)
    for _ in run.backend.watch(run.job):  # as a supervisor following the job: the sentinel starts
        break
    time.sleep(2)  # the sentinel's LIST and WATCH are up
    run.driver.evict(run.ref)
    cause = _first_cause(run)
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR), cause
    assert "pinned from pod" in cause.detail, cause
