"""Resources on Kubernetes: GPUs, CPUs and memory as the TrainJob's ``resourcesPerNode``
(requests equal to limits), what the adapter refuses, and, on the real control plane, that the
API server accepts the TrainJob and its pods carry the resources."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from jobdispatch import JobSpec, Resources, StartRequest, Unsupported, make_plan
from jobdispatch.testing import eventually
from jobdispatch.types import Capability, Tristate
from jobdispatch_kubeflow import manifest


def request(**resources: Any) -> StartRequest:
    spec = JobSpec(
        command=["python", "train.py"],
        nodes=2,
        procs_per_node=4,
        resources=Resources(**resources),
    )
    return StartRequest(job="r" + uuid.uuid4().hex[:8], submission=1, attempt=1, spec=spec)


def test_gpus_cpus_and_memory_become_requests_equal_to_limits() -> None:
    got = manifest.resources_per_node(
        request(gpus_per_node=8, cpus_per_proc=3, memory_per_node_mib=65536)
    )
    amounts = {"nvidia.com/gpu": "8", "cpu": "12", "memory": "65536Mi"}
    assert got == {"requests": amounts, "limits": amounts}


def test_a_spec_without_resources_leaves_the_runtimes_own() -> None:
    assert manifest.resources_per_node(request()) is None


@pytest.mark.kube
@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"gpus_per_node": 1, "gpu_type": "a100"}, "resources.gpus_per_node"),
        ({"queue": "team-a"}, "resources.queue"),
        ({"account": "ml"}, "resources.account"),
        ({"exclusive": True}, "resources.exclusive"),
    ],
)
def test_what_the_adapter_cannot_map_is_refused_by_the_plan(
    kube_cluster: None, resources: dict[str, Any], field: str
) -> None:
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.testing import settings

    backend = KubeflowBackend(settings())
    with pytest.raises(Unsupported, match=field.replace(".", r"\.")):
        make_plan(backend, None, request(**resources).spec)


@pytest.mark.kube
def test_the_api_server_takes_the_resources_and_the_pods_carry_them(kube_cluster: None) -> None:
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.testing import settings

    backend = KubeflowBackend(settings())
    caps = backend.capabilities()
    assert caps[Capability.GPUS].answer is Tristate.YES
    req = request(gpus_per_node=2, cpus_per_proc=1, memory_per_node_mib=512)
    make_plan(backend, None, req.spec)
    ref = backend.start(req)
    try:
        backend.open(ref)
        selector = f"jobset.sigs.k8s.io/jobset-name={ref.id.split('/')[-1]}"
        pods: list[dict[str, Any]] = eventually(
            lambda: backend.api.list("pods", backend.namespace, label_selector=selector)[0],
            f"two pods of {ref}",
            holds=lambda found: len(found) >= 2,
            every=1,
        )
        for pod in pods:
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            assert limits["nvidia.com/gpu"] == "2"
            assert limits["cpu"] == "4"
            assert limits["memory"] == "512Mi"
    finally:
        backend.stop(ref, "test over")
