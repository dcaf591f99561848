"""The plan refuses what can never fit, on the real control plane (issue 35 item 5): the kwok
nodes of tools/kube/up have 8 GPUs each, and Kueue's ClusterQueue ``jobdispatch`` has 8 GPUs
of its own and may borrow none (its cohort's queues lend no GPUs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jobdispatch.errors import Unsupported
from jobdispatch.plan import make_plan
from jobdispatch.types import JobSpec, Resources

pytestmark = pytest.mark.kube


@pytest.fixture
def backend(kube_cluster: None, request: pytest.FixtureRequest) -> Iterator[Any]:
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import settings

    queue = getattr(request, "param", None)
    made = KubeflowBackend(settings(kueue=Kueue(queue=queue) if queue else None))
    yield made
    made.close()


def gpus(per_node: int, nodes: int = 1) -> JobSpec:
    return JobSpec(command=("true",), nodes=nodes, resources=Resources(gpus_per_node=per_node))


def test_sixteen_gpus_a_node_on_eight_gpu_nodes_is_refused_with_the_figures(
    backend: Any,
) -> None:
    with pytest.raises(Unsupported) as refused:
        make_plan(backend, None, gpus(16))
    assert "resources.gpus_per_node: each node asks 16 nvidia.com/gpu, but the most any node " in (
        str(refused.value)
    )
    assert "has allocatable is 8" in str(refused.value)
    make_plan(backend, None, gpus(8))  # what fits a node is planned


@pytest.mark.parametrize("backend", ["jobdispatch"], indirect=True)
def test_more_than_the_cluster_queue_can_ever_admit_is_refused_with_its_quota(
    backend: Any,
) -> None:
    with pytest.raises(Unsupported) as refused:
        make_plan(backend, None, gpus(8, nodes=2))
    said = str(refused.value)
    assert "the job asks 16 nvidia.com/gpu in all (2 × 8), but Kueue ClusterQueue jobdispatch" in (
        said
    )
    assert "can admit at most 8 (flavor jobdispatch-default: nominal quota 8" in said
    make_plan(backend, None, gpus(8))


def test_a_publish_runtime_nobody_applied_is_refused_at_plan_with_the_operator_step(
    kube_cluster: None,
) -> None:
    """The plane's adapter identity may not create trainingruntimes (spec 0010 §6): with a
    publish image whose derived runtime no operator applied, plan refuses as start would,
    naming the runtime and the step, and creates nothing."""
    from jobdispatch.errors import ValidationError
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.config import Publish
    from jobdispatch_kubeflow.testing import kubectl, settings

    image = "dispatch.local/never-applied:plan-test"
    made = KubeflowBackend(settings(publish=Publish(image=image)))
    try:
        with pytest.raises(ValidationError) as refused:
            make_plan(made, None, gpus(1))
    finally:
        made.close()
    said = str(refused.value)
    assert "the derived runtime jd-rt-" in said and "is not in namespace dispatch" in said
    assert "python -m jobdispatch_kubeflow.derived" in said
    assert image not in kubectl("get", "trainingruntimes", "-n", "dispatch", "-o", "json")
