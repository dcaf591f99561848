"""Resources on the real cluster: a 2-node GPU job with memory and a partition, its allocation
read back from sacct; the plan's refusals, naming what the cluster has; the probed inventory.

tools/slurm/up gives each of its two nodes 2 CPUs, 2048 MiB and 2 GPUs of type ``tesla``
(gres.conf names character devices it makes), and node1 alone the ``nvme`` feature.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from jobdispatch import JobSpec, Resources, Unsupported, make_plan
from jobdispatch.types import Capability, Tristate
from jobdispatch_slurm import SlurmBackend
from jobdispatch_slurm.testing import run_to_end

pytestmark = pytest.mark.slurm


@pytest.fixture
def backend(local: SlurmBackend) -> SlurmBackend:
    return local


def sacct(job_id: str, fields: str) -> str:
    out = subprocess.run(
        ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", fields],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return out.stdout.strip()


def test_a_two_node_gpu_job_gets_its_gpus_memory_and_partition(backend: SlurmBackend) -> None:
    spec = JobSpec(
        command=["bash", "-c", 'echo "$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"'],
        nodes=2,
        resources=Resources(
            gpus_per_node=2, gpu_type="tesla", memory_per_node_mib=512, queue="low"
        ),
    )
    make_plan(backend, None, spec)  # fits: no refusal
    ref, obs = run_to_end(backend, spec, backend.started)  # type: ignore[attr-defined]
    latest = obs.latest
    assert latest is not None and latest.cause is not None
    assert str(latest.cause.kind) == "none", latest.cause
    partition = tres = state = ""
    for _ in range(30):  # accounting lands a moment after the end, one field at a time
        partition, tres, state = sacct(ref.id, "Partition,AllocTRES,State").split("|")
        if partition and "gres/gpu" in tres and state == "COMPLETED":
            break
        time.sleep(1)
    assert (partition, state) == ("low", "COMPLETED")
    alloc = dict(item.split("=", 1) for item in tres.split(","))
    assert alloc["node"] == "2"
    assert alloc["gres/gpu"] == "4"
    assert alloc["gres/gpu:tesla"] == "4"
    assert alloc["mem"] == "1G"  # 512M on each of 2 nodes
    out = b"".join(backend.output(ref).readlines()).decode()
    assert sorted(out.split()) == sorted(["node1", "gpus=0,1", "node2", "gpus=0,1"]), out


def test_the_inventory_is_probed_from_the_nodes(backend: SlurmBackend) -> None:
    inv = backend.inventory()
    assert inv.queues == ("debug", "high", "low")
    assert inv.default_queue == "debug"
    assert inv.groups is not None
    assert sum(g.count for g in inv.groups) == 2
    assert {(g.gpus, g.gpu_type, g.memory_mib, g.cpus) for g in inv.groups} == {
        (2, "tesla", 2048, 2)
    }
    assert {g.features for g in inv.groups} == {("ib", "nvme"), ("ib",)}
    caps = backend.capabilities()
    assert caps[Capability.GPUS].answer is Tristate.YES
    assert "tesla" in caps[Capability.GPUS].detail
    assert caps[Capability.MEMORY_LIMIT].answer is Tristate.YES


@pytest.mark.parametrize(
    ("resources", "nodes", "says"),
    [
        ({"gpus_per_node": 1, "gpu_type": "a100"}, 1, "GPU types present: tesla"),
        ({"gpus_per_node": 4}, 1, "the most any node has is 2 GPUs"),
        ({"queue": "gpu"}, 1, "queues: debug, high, low"),
        ({"memory_per_node_mib": 4096}, 1, "the most any node has is 2G"),
        ({"constraints": ["nvme"]}, 2, "only 1 node"),
    ],
)
def test_the_plan_refuses_what_no_node_has_and_says_what_exists(
    backend: SlurmBackend, resources: dict[str, object], nodes: int, says: str
) -> None:
    spec = JobSpec(command=["true"], nodes=nodes, resources=Resources(**resources))  # type: ignore[arg-type]
    with pytest.raises(Unsupported, match=says):
        make_plan(backend, None, spec)
