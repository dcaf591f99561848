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
from collections.abc import Callable
from typing import Any

import pytest
from jobdispatch import JobSpec, StartRequest
from jobdispatch.types import CauseKind, ObjectState, Provenance

pytestmark = pytest.mark.kube


def _until(ok: Callable[[], Any], what: str, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := ok()):
        assert time.monotonic() < deadline, f"not {what} within {timeout:.0f} s"
        time.sleep(1)
    return got


def _failed_and_gone(driver: Any, namespace: str, name: str) -> Callable[[], bool]:
    """Whether the TrainJob has failed and none of its pods is left, read by the admin alone."""
    from jobdispatch_kubeflow import names

    def check() -> bool:
        tj = driver.admin.get("trainjobs", namespace, name) or {}
        conditions = (tj.get("status") or {}).get("conditions") or ()
        failed = any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
        pods, _ = driver.admin.list("pods", namespace, label_selector=f"{names.JOBSET_NAME}={name}")
        return failed and not pods

    return check


def test_a_node_lost_between_two_polls_is_node_lost(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    driver = KubeDriver(backend)
    job = "nl" + uuid.uuid4().hex[:8]
    spec = JobSpec(command=("sleep", "3600"), nodes=1)
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    _, name = names.split_ref(ref)
    try:
        backend.open(ref)
        _until(lambda: backend.find(job).objects[0].state is ObjectState.RUNNING, "running")
        trainjob = driver.admin.get("trainjobs", backend.namespace, name)
        assert trainjob is not None
        assert f"{names.PLACEMENT}-0" in trainjob["metadata"]["annotations"]
        driver.lose_node(ref)

        # Nobody polls the backend from here: only the admin looks.
        _until(_failed_and_gone(driver, backend.namespace, name), "failed with its pods gone")
        (obs,) = backend.find(job).objects
        assert obs.state is ObjectState.ENDED, obs
        cause = obs.executions[0].cause
        assert cause is not None, obs
        assert (cause.kind, cause.provenance) == (CauseKind.NODE_LOST, Provenance.SCHEDULER), cause
        assert "was deleted" in cause.detail, cause
    finally:
        driver.cleanup()
        backend.stop(ref, "test over")
        backend.forget(ref)
        backend.close()


def test_an_eviction_between_two_polls_is_preempted_by_an_actor(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    driver = KubeDriver(backend)
    job = "ev" + uuid.uuid4().hex[:8]
    spec = JobSpec(command=("sleep", "3600"), nodes=1)
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    _, name = names.split_ref(ref)
    try:
        backend.open(ref)
        _until(lambda: driver._pods(ref, timeout=1), "running")
        for _ in backend.watch(job):  # as a supervisor following the job: the sentinel starts
            break
        time.sleep(2)  # the sentinel's LIST and WATCH are up
        driver.evict(ref)
        # Nobody polls the backend from here: only the admin looks.
        _until(_failed_and_gone(driver, backend.namespace, name), "failed with its pods gone")
        (obs,) = backend.find(job).objects
        cause = obs.executions[0].cause
        assert cause is not None, obs
        assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR), cause
        assert "pinned from pod" in cause.detail, cause
    finally:
        backend.stop(ref, "test over")
        backend.forget(ref)
        backend.close()
