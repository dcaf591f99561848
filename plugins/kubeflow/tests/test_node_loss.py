"""A node deleted under a run while nobody looks, on the real control plane: PodGC fails the
pod and the Job controller lets it go, so by the next poll the pod and its DisruptionTarget are
gone and the Job's failure says nothing of why. The placement pinned when the run was first seen
still names the loss (spec 0010 §5). CI once met exactly this: a poll missed the second the dying
pod was there, and the ending read ``unknown``."""

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

        # Nobody polls the backend from here: only the admin looks, until the pod is gone and
        # the TrainJob has failed.
        def failed_and_gone() -> bool:
            tj = driver.admin.get("trainjobs", backend.namespace, name) or {}
            conditions = (tj.get("status") or {}).get("conditions") or ()
            failed = any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)
            pods, _ = driver.admin.list(
                "pods", backend.namespace, label_selector=f"{names.JOBSET_NAME}={name}"
            )
            return failed and not pods

        _until(failed_and_gone, "failed with its pods gone")
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
