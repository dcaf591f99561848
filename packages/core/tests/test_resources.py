"""Resources per job: validation, the plan's resource check, the dry run, the record encoding."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch import (
    Capability,
    Inventory,
    JobSpec,
    NodeGroup,
    Resources,
    StartRequest,
    Tristate,
    Unsupported,
    ValidationError,
    make_plan,
    problems,
)
from jobdispatch.codec import converter
from jobdispatch.errors import Problem
from jobdispatch.fit import fit
from jobdispatch.memory import MemoryBackend, Shape

GPU_NODES = NodeGroup(count=2, cpus=8, memory_mib=65536, gpus=4, gpu_type="a100", queues=["gpu"])
CPU_NODES = NodeGroup(count=4, cpus=16, memory_mib=32768, features=["ib"], queues=["cpu"])
SITE = Inventory(groups=(GPU_NODES, CPU_NODES), queues=("gpu", "cpu"), default_queue="cpu")


def spec(nodes: int = 1, procs: int = 1, **resources: Any) -> JobSpec:
    return JobSpec(
        command=["train"], nodes=nodes, procs_per_node=procs, resources=Resources(**resources)
    )


def paths(s: JobSpec) -> list[str]:
    return [p.path for p in problems(s)]


# ---------------------------------------------------------------------------- validation


def test_a_spec_without_resources_is_valid_and_empty() -> None:
    s = JobSpec(command=["x"])
    assert s.resources.empty
    assert problems(s) == []


@pytest.mark.parametrize(
    ("resources", "path"),
    [
        ({"gpus_per_node": -1}, "resources.gpus_per_node"),
        ({"gpus_per_node": True}, "resources.gpus_per_node"),
        ({"cpus_per_proc": 0}, "resources.cpus_per_proc"),
        ({"memory_per_node_mib": 0}, "resources.memory_per_node"),
        ({"queue": "gpu --exclusive"}, "resources.queue"),
        ({"account": "-x"}, "resources.account"),
        ({"qos": ""}, "resources.qos"),
        ({"gpu_type": "a100"}, "resources.gpu_type"),  # a type without a count
        ({"constraints": ["ib", "a b"]}, "resources.constraints[1]"),
        ({"adapter": {"slurm": {"x": 1.5}}}, "resources.slurm.x"),
        ({"adapter": {"slurm": {"x": ["a", 1]}}}, "resources.slurm.x"),
        ({"adapter": {"bad name": {}}}, "resources.bad name"),
    ],
)
def test_validation_names_the_field(resources: dict[str, Any], path: str) -> None:
    assert path in paths(spec(**resources))


def test_every_problem_at_once() -> None:
    found = paths(spec(gpus_per_node=-1, cpus_per_proc=0, queue="a b"))
    assert found == ["resources.gpus_per_node", "resources.cpus_per_proc", "resources.queue"]


# ---------------------------------------------------------------------------- fit


def fields(s: JobSpec, inventory: Inventory = SITE) -> list[str]:
    return [p.path for p in fit(s, inventory)]


def test_a_job_the_gpu_queue_can_hold_fits() -> None:
    s = spec(nodes=2, procs=4, gpus_per_node=4, gpu_type="a100", cpus_per_proc=2, queue="gpu")
    assert fit(s, SITE) == []


def test_a_queue_that_does_not_exist_is_refused_with_the_queues_there_are() -> None:
    (p,) = fit(spec(queue="gpus"), SITE)
    assert p.path == "resources.queue"
    assert "gpu, cpu" in p.message


def test_a_gpu_type_that_does_not_exist_says_which_exist() -> None:
    (p,) = fit(spec(gpus_per_node=1, gpu_type="h100", queue="gpu"), SITE)
    assert p.path == "resources.gpu_type"
    assert "a100" in p.message


def test_more_gpus_than_any_node_has_says_the_most() -> None:
    (p,) = fit(spec(gpus_per_node=8, queue="gpu"), SITE)
    assert p.path == "resources.gpus_per_node"
    assert "4 GPUs" in p.message


def test_gpus_in_a_queue_without_any() -> None:
    (p,) = fit(spec(gpus_per_node=1), SITE)  # the default queue is cpu
    assert p.path == "resources.gpus_per_node"
    assert "'cpu'" in p.message


def test_memory_cpus_and_features_are_checked_per_node() -> None:
    assert fields(spec(memory_per_node_mib=65536)) == ["resources.memory_per_node"]
    assert fields(spec(procs=4, cpus_per_proc=8)) == ["resources.cpus_per_proc"]
    assert fields(spec(constraints=["nvlink"])) == ["resources.constraints"]
    assert fields(spec(constraints=["ib"], memory_per_node_mib=32768)) == []


def test_too_few_matching_nodes_is_a_nodes_problem_that_shows_the_queue() -> None:
    (p,) = fit(spec(nodes=3, gpus_per_node=4, queue="gpu"), SITE)
    assert p.path == "nodes"
    assert "only 2 nodes" in p.message
    assert "2 nodes: 8 CPUs, 64G, 4 GPUs (a100)" in p.message


def test_an_inventory_that_says_nothing_refuses_nothing() -> None:
    assert fit(spec(nodes=10_000, gpus_per_node=1024, queue="any"), Inventory()) == []


_groups = st.lists(
    st.builds(
        NodeGroup,
        count=st.integers(1, 4),
        cpus=st.none() | st.integers(1, 64),
        memory_mib=st.none() | st.integers(1, 1 << 20),
        gpus=st.integers(0, 8),
        gpu_type=st.none() | st.sampled_from(["a100", "h100"]),
        features=st.lists(st.sampled_from(["ib", "nvme"]), max_size=2),
    ),
    max_size=4,
).map(tuple)
_asks = st.fixed_dictionaries(
    {
        "nodes": st.integers(1, 8),
        "gpus_per_node": st.integers(0, 8),
        "memory_per_node_mib": st.none() | st.integers(1, 1 << 20),
        "cpus_per_proc": st.none() | st.integers(1, 64),
    }
)


@given(groups=_groups, ask=_asks)
def test_asking_for_less_never_stops_a_spec_from_fitting(
    groups: tuple[NodeGroup, ...], ask: dict[str, Any]
) -> None:
    """Fit is monotone: a spec that fits still fits with fewer nodes, GPUs, memory or CPUs."""
    inventory = Inventory(groups=groups)
    nodes = ask.pop("nodes")
    assert isinstance(nodes, int)
    big = spec(nodes=nodes, **ask)
    if fit(big, inventory):
        return
    smaller = spec(
        nodes=max(1, nodes - 1),
        gpus_per_node=max(0, (ask["gpus_per_node"] or 0) - 1),
        memory_per_node_mib=ask["memory_per_node_mib"],
        cpus_per_proc=None,
    )
    assert fit(smaller, inventory) == []


# ---------------------------------------------------------------------------- the plan


def backend(**kw: object) -> MemoryBackend:
    return MemoryBackend(shape=Shape.SLURM, inventory=SITE, **kw)  # type: ignore[arg-type]


def test_the_plan_refuses_what_the_cluster_cannot_place_before_anything_exists() -> None:
    b = backend()
    with pytest.raises(Unsupported, match=r"resources\.gpu_type.*a100"):
        make_plan(b, None, spec(gpus_per_node=2, gpu_type="h100", queue="gpu"))
    assert b.env.calls["start"] == 0


def test_the_plan_refuses_a_resource_the_cluster_answers_no_for() -> None:
    b = MemoryBackend(shape=Shape.KUBEFLOW, capabilities={Capability.GPUS: Tristate.NO})
    with pytest.raises(Unsupported, match=r"resources\.gpus_per_node: this cluster does not"):
        make_plan(b, None, spec(gpus_per_node=1))
    with pytest.raises(Unsupported, match=r"resources\.account"):
        make_plan(MemoryBackend(shape=Shape.KUBEFLOW), None, spec(account="ml"))


def test_a_spec_that_fits_is_planned() -> None:
    plan = make_plan(backend(), None, spec(nodes=2, gpus_per_node=4, queue="gpu"))
    assert plan.capabilities[Capability.GPUS].answer is Tristate.YES


def test_start_refuses_a_no_capability_without_a_plan() -> None:
    b = MemoryBackend(shape=Shape.SLURM, capabilities={Capability.EXCLUSIVE_NODES: Tristate.NO})
    request = StartRequest(job="j1", submission=1, attempt=1, spec=spec(exclusive=True))
    with pytest.raises(Unsupported, match=r"resources\.exclusive"):
        b.start(request)


# ---------------------------------------------------------------------------- the dry run


def test_preview_creates_nothing_and_equals_what_start_holds() -> None:
    b = backend()
    request = StartRequest(
        job="j1", submission=1, attempt=1, spec=spec(gpus_per_node=4, queue="gpu")
    )
    shown = b.preview(request)
    assert b.find("j1").objects == ()
    ref = b.start(request)
    assert b.env.describe(ref) == shown
    assert json.loads(shown)["spec"]["resources"] == {"gpus_per_node": 4, "queue": "gpu"}


# ---------------------------------------------------------------------------- the record


def test_a_spec_without_resources_encodes_as_before_resources_existed() -> None:
    encoded = converter.unstructure(JobSpec(command=["x"]))
    assert "resources" not in encoded


@given(
    st.builds(
        Resources,
        gpus_per_node=st.integers(0, 8),
        gpu_type=st.none() | st.just("a100"),
        memory_per_node_mib=st.none() | st.integers(1, 1 << 20),
        queue=st.none() | st.just("gpu"),
        constraints=st.lists(st.sampled_from(["ib", "zone=a"]), max_size=2),
        exclusive=st.booleans(),
        adapter=st.dictionaries(
            st.sampled_from(["slurm", "kubeflow"]),
            st.dictionaries(
                st.sampled_from(["a", "b"]),
                st.text(max_size=3) | st.integers() | st.booleans() | st.lists(st.text(max_size=2)),
                max_size=2,
            ),
            max_size=2,
        ),
    )
)
def test_resources_round_trip_through_the_record_encoding(res: Resources) -> None:
    s = attrs.evolve(JobSpec(command=["x"]), resources=res)
    data = json.loads(json.dumps(converter.unstructure(s)))
    assert converter.structure(data, JobSpec) == s


def test_an_adapter_table_is_checked_against_the_adapters_allow_list() -> None:
    class Tabled(MemoryBackend):
        resource_table = "memory"
        resource_schema = {  # noqa: RUF012
            "type": "object",
            "properties": {"priority": {"type": "integer"}},
        }

    bad = spec(adapter={"memory": {"priority": "high", "nice": 3}, "slurm": {"anything": 1}})
    with pytest.raises(ValidationError) as caught:
        make_plan(Tabled(), None, bad)
    text = str(caught.value)
    assert "priority" in text
    assert "nice" in text
    assert "anything" not in text  # another adapter's table travels unread
    make_plan(Tabled(), None, spec(adapter={"memory": {"priority": 3}}))


def test_an_adapter_checks_what_its_schema_cannot_say_at_plan() -> None:
    class Checked(MemoryBackend):
        def resource_problems(self, spec: JobSpec) -> list[Problem]:
            table = spec.resources.adapter.get("memory", {})
            if table.get("low") == table.get("high"):
                return [Problem("resources.memory.high", "equals low")]
            return []

    with pytest.raises(ValidationError, match=r"resources\.memory\.high: equals low"):
        make_plan(Checked(), None, spec(adapter={"memory": {"low": 1, "high": 1}}))
    make_plan(Checked(), None, spec(adapter={"memory": {"low": 1, "high": 2}}))
