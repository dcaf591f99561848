"""The plan refuses a TrainJob that could never run (issue 35, item 5): more of a resource a node
than any node has, a node selector no node matches, more than the Kueue ClusterQueue could ever
admit; each with the figures. What could fit once capacity frees up is never refused."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from jobdispatch.errors import Unsupported
from jobdispatch.plan import make_plan
from jobdispatch.types import JobSpec, Resources
from jobdispatch_kubeflow import KubeflowBackend, placement, probe
from jobdispatch_kubeflow.config import Kueue, Runtime, Settings
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi
from objects import local_queue, node

Obj = dict[str, Any]


def gpu_node(name: str, gpus: int, *, cpu: str = "32", memory: str = "256Gi", **labels: str) -> Obj:
    obj = node(name)
    obj["metadata"]["labels"].update(labels)
    obj["status"]["allocatable"] = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}
    return obj


def trainjob(asked: dict[str, str], nodes: int = 1, selector: dict[str, str] | None = None) -> Obj:
    body: Obj = {
        "spec": {
            "trainer": {
                "numNodes": nodes,
                "resourcesPerNode": {"requests": dict(asked), "limits": dict(asked)},
            }
        }
    }
    if selector:
        pod = {"spec": {"template": {"spec": {"nodeSelector": selector}}}}
        body["spec"]["runtimePatches"] = [
            {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"template": pod}]}}}}
        ]
    return body


GPU = "nvidia.com/gpu"
EIGHT = [gpu_node(f"n{i}", 8, pool="a100") for i in range(3)]


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("500m", Decimal("0.5")), ("16Gi", 16 * 2**30), ("1k", 1000), ("1e3", 1000)],
)
def test_quantities_read_as_kubernetes_writes_them(text: str, value: Decimal | int) -> None:
    assert placement.quantity(text) == value


def test_quantity_refuses_what_is_not_one() -> None:
    assert placement.quantity("lots") is None


def test_sixteen_gpus_a_node_on_eight_gpu_nodes_never_fit() -> None:
    (problem,) = placement.never_fits(trainjob({GPU: "16"}), EIGHT)
    assert problem.path == "resources.gpus_per_node"
    assert problem.message == (
        "each node asks 16 nvidia.com/gpu, but the most any node has allocatable is 8 (3 nodes)"
    )


def test_memory_is_shown_in_mebibytes() -> None:
    (problem,) = placement.never_fits(trainjob({"memory": "512Gi"}), EIGHT)
    assert problem.path == "resources.memory_per_node"
    assert "asks 524288Mi memory" in problem.message and "is 262144Mi" in problem.message


def test_more_pods_than_the_nodes_hold_together() -> None:
    mixed = [*EIGHT[:2], gpu_node("small", 2)]
    (problem,) = placement.never_fits(trainjob({GPU: "8"}, 3), mixed)
    assert problem.path == "nodes"
    assert problem.message == (
        "3 nodes asked, but the 3 nodes can hold only 2 pods of 8 nvidia.com/gpu each"
    )


def test_pods_that_share_a_node_fit() -> None:
    """Nothing keeps a TrainJob's pods apart: two pods of 2 GPUs fit on one 8-GPU node (as on
    the control plane, where both landed on the one node a selector matched)."""
    assert placement.never_fits(trainjob({GPU: "2"}, 2), [gpu_node("only", 8)]) == []
    (problem,) = placement.never_fits(trainjob({GPU: "4"}, 3), [gpu_node("only", 8)])
    assert problem.message == (
        "3 nodes asked, but the 1 node can hold only 2 pods of 4 nvidia.com/gpu each"
    )


def test_a_selector_matching_no_node_names_the_labels_present() -> None:
    (problem,) = placement.never_fits(trainjob({GPU: "1"}, selector={"pool": "h100"}), EIGHT)
    assert problem.path == "node selector"
    assert problem.message == "pool=h100 matches none of the cluster's 3 nodes (pool=a100)"


def test_a_selector_narrows_the_nodes_the_figures_come_from() -> None:
    cluster = [*EIGHT, gpu_node("big", 16, pool="h100")]
    assert placement.never_fits(trainjob({GPU: "16"}), cluster) == []
    (problem,) = placement.never_fits(trainjob({GPU: "16"}, selector={"pool": "a100"}), cluster)
    assert "the most any node matching pool=a100 has allocatable is 8" in problem.message


def test_what_fits_once_capacity_frees_is_never_refused() -> None:
    """Every node busy is the cluster's state: the check reads allocatable, not what is free."""
    assert placement.never_fits(trainjob({GPU: "8", "cpu": "4"}, 3), EIGHT) == []
    assert placement.never_fits(trainjob({GPU: "16"}), []) == []  # nodes may join


def cluster_queue(gpus: str, *, borrowing: str | None = None, cohort: str | None = None) -> Obj:
    gpu: Obj = {"name": GPU, "nominalQuota": gpus}
    if borrowing is not None:
        gpu["borrowingLimit"] = borrowing
    spec: Obj = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU],
                "flavors": [
                    {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}, gpu]}
                ],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": "cq"}, "spec": spec}


def test_a_cluster_queue_too_small_never_admits_it_with_its_quota_named() -> None:
    (problem,) = placement.never_fits(trainjob({GPU: "8"}, 2), EIGHT, cluster_queue("8"))
    assert problem.path == "resources.gpus_per_node"
    assert problem.message == (
        "the job asks 16 nvidia.com/gpu in all (2 × 8), but Kueue ClusterQueue cq can admit at "
        "most 8 (flavor f: nominal quota 8, and no cohort to borrow from)"
    )
    (limited,) = placement.never_fits(
        trainjob({GPU: "8"}, 2), EIGHT, cluster_queue("4", borrowing="8", cohort="c")
    )
    assert "can admit at most 12 (flavor f: nominal quota 4; borrowing limit 8)" in limited.message


def test_a_cluster_queue_that_may_borrow_without_a_limit_refuses_nothing() -> None:
    queue = cluster_queue("8", cohort="c")
    assert placement.never_fits(trainjob({GPU: "8"}, 2), EIGHT, queue) == []


def test_what_a_cohort_lends_bounds_the_borrowing() -> None:
    """As tools/kube/up's queues: each lends no GPUs (lendingLimit 0), so a queue of 8 can
    never admit 16, however many queues share its cohort; a peer that lends 8 makes it fit."""
    mine = {**cluster_queue("8", cohort="c"), "metadata": {"name": "mine"}}
    stingy = {**cluster_queue("8", cohort="c"), "metadata": {"name": "stingy"}}
    stingy["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["lendingLimit"] = "0"
    (problem,) = placement.never_fits(trainjob({GPU: "8"}, 2), EIGHT, mine, [mine, stingy])
    assert problem.message.endswith(
        "can admit at most 8 (flavor f: nominal quota 8; cohort c's other queues lend at most 0)"
    )
    generous = {**cluster_queue("8", cohort="c"), "metadata": {"name": "generous"}}
    assert placement.never_fits(trainjob({GPU: "8"}, 2), EIGHT, mine, [mine, generous]) == []


def test_a_resource_the_cluster_queue_does_not_cover() -> None:
    (problem,) = placement.never_fits(trainjob({"memory": "1Gi"}), EIGHT, cluster_queue("8"))
    assert problem.message == (
        "Kueue ClusterQueue cq does not cover memory: it can never admit a job asking for it"
    )


def backend(api: FakeApi, **kw: Any) -> KubeflowBackend:
    probe.forget()
    api.put("clustertrainingruntimes", None, TEST_RUNTIME_OBJECT)
    settings = Settings(namespace="dispatch", runtime=Runtime(name="dispatch-torch-test"), **kw)
    return KubeflowBackend(settings, api=api)


def test_the_plan_refuses_with_the_figures_and_submits_nothing() -> None:
    api = FakeApi()
    for n in EIGHT:
        api.put("nodes", None, n)
    made = backend(api)
    spec = JobSpec(command=("true",), resources=Resources(gpus_per_node=16))
    with pytest.raises(Unsupported) as refused:
        make_plan(made, None, spec)
    assert str(refused.value) == (
        "unsupported: this cluster cannot place the job: resources.gpus_per_node: each node "
        "asks 16 nvidia.com/gpu, but the most any node has allocatable is 8 (3 nodes)"
    )
    assert not [k for k in api.objects if k[0] == "trainjobs"]
    make_plan(made, None, JobSpec(command=("true",), resources=Resources(gpus_per_node=8)))


def test_under_kueue_the_plan_reads_the_local_queues_cluster_queue() -> None:
    api = FakeApi()
    for n in EIGHT:
        api.put("nodes", None, n)
    api.put("localqueues", "dispatch", {**local_queue(), "metadata": {"name": "gpus"}})
    api.put("clusterqueues", None, cluster_queue("8"))
    made = backend(api, kueue=Kueue(queue="gpus"))
    spec = JobSpec(command=("true",), nodes=2, resources=Resources(gpus_per_node=8))
    with pytest.raises(Unsupported, match="Kueue ClusterQueue cq can admit at most 8"):
        make_plan(made, None, spec)


def test_without_probing_nothing_is_read_or_refused() -> None:
    api = FakeApi()
    made = backend(api, probe=False)
    assert made.never_fits(JobSpec(command=("true",), resources=Resources(gpus_per_node=99))) == []
    assert not [k for k in api.requests if "nodes" in k]
