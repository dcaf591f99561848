"""A stop on the real control plane leaves nothing going round (spec 0010 §4).

With foreground deletion the garbage collector deleted the JobSet of a stopped TrainJob while
the TrainJob still existed, the Trainer controller applied a new one, and the two went round for
hours: 223 forgotten TrainJobs were found still held by ``foregroundDeletion``, each JobSet made
again about a thousand times. Stopped with background deletion, the receipt keeps one suspended
JobSet without pods, the same object throughout, and ``forget`` lets both go.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from jobdispatch import JobSpec, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import ObjectState

pytestmark = pytest.mark.kube


def test_a_stopped_trainjob_keeps_one_jobset_and_forget_lets_both_go(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    admin = KubeDriver(backend).admin
    job = "st" + uuid.uuid4().hex[:8]
    spec = JobSpec(command=("sleep", "3600"), nodes=1)
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    _, name = names.split_ref(ref)
    ns = backend.namespace

    def pods() -> list[Any]:
        found, _ = admin.list("pods", ns, label_selector=f"{names.JOBSET_NAME}={name}")
        return found

    try:
        backend.open(ref)
        eventually(lambda: backend.find(job).objects[0].state is ObjectState.RUNNING, "running")
        running = admin.get("jobsets", ns, name)
        assert running is not None
        backend.stop(ref, "test: stop")
        # Under foreground deletion the collector deletes this JobSet at once and the Trainer
        # makes another (a new uid, within a second here): the receipt must keep the one it had.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            jobset = admin.get("jobsets", ns, name)
            assert jobset is not None, "the receipt keeps its JobSet"
            assert jobset["metadata"]["uid"] == running["metadata"]["uid"], "made again"
            assert not jobset["metadata"].get("deletionTimestamp"), "the JobSet is being deleted"
            time.sleep(0.2)
        eventually(lambda: not pods(), "the pods gone")
        assert backend.inspect(ref).state is ObjectState.ENDED
    finally:
        backend.stop(ref, "test over")
        backend.forget(ref)
    eventually(lambda: admin.get("trainjobs", ns, name) is None, "the TrainJob gone")
    eventually(lambda: admin.get("jobsets", ns, name) is None, "the JobSet gone")
    backend.close()
