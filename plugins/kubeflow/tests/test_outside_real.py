"""What happens to a TrainJob outside dispatch, on the real control plane (issue 35).

- A person's ``kubectl delete trainjob`` (the SDK's ``delete_job``): the receipt finalizer keeps
  the TrainJob and a background delete waits for it, so its pods ran on for more than 21
  minutes. The next look of a backend that follows the cluster suspends it: the pods go, and
  the run ends cancelled by an actor outside dispatch. A later stop (``jobdispatch cancel``)
  of a TrainJob being deleted stops it too.
- A run that exited 3 on a node deleted afterwards (an autoscaler removing the emptied node):
  until PodGC removes the pod it read node-lost; the exit is its ending.

Each test uses names of its own (a job id, and for the node, a kwok node made for it and
deleted by it), so the other users of the plane are not disturbed.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from jobdispatch import JobSpec, StartRequest
from jobdispatch.spi import ObjectRef
from jobdispatch.testing import eventually
from jobdispatch.types import CauseKind, ObjectState, Provenance

pytestmark = pytest.mark.kube


def _pods(admin: Any, ns: str, name: str) -> list[Any]:
    from jobdispatch_kubeflow import names

    found: list[Any] = admin.list("pods", ns, label_selector=f"{names.JOBSET_NAME}={name}")[0]
    return found


def _trainjob(admin: Any, ns: str, name: str) -> dict[str, Any]:
    """The TrainJob as the API server has it now (empty once it is gone)."""
    found: dict[str, Any] = admin.get("trainjobs", ns, name) or {}
    return found


def _running(backend: Any, job: str) -> bool:
    objs = backend.find(job).objects
    return bool(objs) and objs[0].state is ObjectState.RUNNING


def test_a_trainjob_someone_else_deletes_is_stopped_by_the_next_poll(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, classify, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    backend.watch_window = 1.0
    admin = KubeDriver(backend).admin
    job, ref = _start_sleeper(backend, "od")
    ns, name = names.split_ref(ref)
    try:
        for _ in backend.watch(job):  # a supervisor follows the cluster: the caches answer
            pass
        backend.open(ref)
        eventually(lambda: _running(backend, job), "running")
        eventually(lambda: _pods(admin, ns, name), "a pod")
        # kubectl -n NS delete trainjob NAME: background, the finalizer keeps it.
        admin.delete("trainjobs", ns, name, propagation="Background")
        eventually(
            lambda: (admin.get("trainjobs", ns, name) or {})["metadata"].get("deletionTimestamp"),
            "the delete seen",
            within=30,
        )
        # One poll: it sees the deletion (from its caches, within the watch's latency) and
        # suspends the TrainJob.
        eventually(
            lambda: (backend.find(job), _trainjob(admin, ns, name))[1]["spec"].get("suspend"),
            "suspended by the poll",
            within=15,
        )
        eventually(lambda: not _pods(admin, ns, name), "the pods gone", within=60)
        obs = eventually(
            lambda: next(
                (o for o in backend.find(job).objects if o.state is ObjectState.ENDED), None
            ),
            "ended",
            within=30,
        )
        cause = obs.executions[-1].cause
        assert cause is not None
        assert (cause.kind, cause.provenance) == (CauseKind.CANCELLED, Provenance.ACTOR)
        assert cause.actor == classify.OUTSIDE
        assert "clean-up clear" in obs.detail
    finally:
        _remove(backend, admin, ref)


def test_a_cancel_of_a_trainjob_being_deleted_stops_it(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(settings())
    admin = KubeDriver(backend).admin
    job, ref = _start_sleeper(backend, "oc")
    ns, name = names.split_ref(ref)
    try:
        backend.open(ref)
        eventually(lambda: _running(backend, job), "running")
        eventually(lambda: _pods(admin, ns, name), "a pod")
        admin.delete("trainjobs", ns, name, propagation="Background")
        # No look in between: the cancel's stop finds it being deleted, and suspends it.
        backend.stop(ref, "jobdispatch cancel")
        assert (admin.get("trainjobs", ns, name) or {})["spec"]["suspend"] is True
        eventually(lambda: not _pods(admin, ns, name), "the pods gone", within=60)
    finally:
        _remove(backend, admin, ref)


def test_an_exit_before_its_node_is_deleted_stays_the_exit(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.testing import KubeDriver, own_node, place_on_own_node, settings

    backend = KubeflowBackend(settings())
    driver = KubeDriver(backend)
    admin = driver.admin
    tag = uuid.uuid4().hex[:8]
    node_name = f"kwok-node-x{tag}"
    own_node(admin, node_name, "dispatch.test/x", tag)
    job, ref = _start_sleeper(backend, "ox")
    ns, name = names.split_ref(ref)
    try:
        # Placed on the node of this test's own (the Trainer's runtime patch of a manager of
        # the test's), so that deleting it disturbs no one else's pods.
        place_on_own_node(admin, ns, name, "dispatch.test/x", tag)
        backend.open(ref)
        eventually(lambda: _running(backend, job), "running")
        (pod,) = eventually(lambda: _pods(admin, ns, name), "a pod")
        assert pod["spec"]["nodeName"] == node_name
        driver.fail(ref, 3)
        obs = eventually(
            lambda: next(
                (o for o in backend.find(job).objects if o.state is ObjectState.ENDED), None
            ),
            "ended on exit 3",
        )
        cause = obs.executions[-1].cause
        assert cause is not None and (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)
        admin.delete("nodes", None, node_name, propagation="Background")
        eventually(lambda: admin.get("nodes", None, node_name) is None, "the node gone", within=30)
        # Until PodGC removes the pod (about a minute), it stands on a node that is gone.
        assert _pods(admin, ns, name), "the pod outlives its node for a while"
        for _ in range(3):
            (obs,) = backend.find(job).objects
            cause = obs.executions[-1].cause
            assert cause is not None
            assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3), cause
            assert obs.lost_nodes == ()
            time.sleep(1)
    finally:
        admin.delete("nodes", None, node_name, propagation="Background")
        _remove(backend, admin, ref)


def _remove(backend: Any, admin: Any, ref: ObjectRef) -> None:
    """A test's teardown: stop its TrainJob, remove the receipt that kept it, close the backend,
    and wait until the TrainJob is gone, so the plane's other users are left as they were."""
    from jobdispatch_kubeflow import names

    try:
        backend.stop(ref, "test over")
        backend.forget(ref)
    finally:
        backend.close()
    ns, name = names.split_ref(ref)
    eventually(lambda: admin.get("trainjobs", ns, name) is None, "the TrainJob gone")


def _start_sleeper(backend: Any, prefix: str) -> tuple[str, ObjectRef]:
    """A TrainJob that sleeps for an hour, started gated under a fresh job id beginning with
    ``prefix``: the job id and the ref."""
    job = prefix + uuid.uuid4().hex[:8]
    spec = JobSpec(command=("sleep", "3600"), nodes=1)
    return job, backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
