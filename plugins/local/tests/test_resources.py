"""Resources on the local adapter: declared GPUs handed to ranks, memory per node through the
cgroup code, refusals of what one machine cannot give, and the dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobdispatch import JobSpec, Resources, StartRequest, Unsupported, make_plan
from jobdispatch.types import Capability, ObjectState, Tristate
from jobdispatch_local import cgroups
from jobdispatch_local.testing import make_backend, shut_down, wait_for

DUMP = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', 'RANK', 'NODE_RANK')}))"  # noqa: E501


def run_to_end(backend, spec: JobSpec, job: str = "g1") -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended")
    lines = []
    for rank in range(spec.nodes * spec.procs_per_node):
        lines.append(json.loads(backend.output(ref, rank=rank).read()))
    return lines


@pytest.fixture
def state(tmp_path: Path):  # type: ignore[no-untyped-def]
    yield tmp_path / "state"
    assert not shut_down(tmp_path / "state")


def test_declared_gpus_are_split_between_nodes_in_order(state: Path) -> None:
    backend = make_backend(state, gpus=[3, 5, 6, 7])
    spec = JobSpec(
        command=["python3", "-c", DUMP],
        nodes=2,
        procs_per_node=2,
        resources=Resources(gpus_per_node=2),
    )
    seen = run_to_end(backend, spec)
    by_rank = {int(e["RANK"]): e["CUDA_VISIBLE_DEVICES"] for e in seen}
    assert by_rank == {0: "3,5", 1: "3,5", 2: "6,7", 3: "6,7"}


def test_no_gpus_are_given_to_a_job_that_asks_for_none(state: Path) -> None:
    backend = make_backend(state, gpus=[0, 1])
    seen = run_to_end(backend, JobSpec(command=["python3", "-c", DUMP]))
    assert seen[0]["CUDA_VISIBLE_DEVICES"] is None


@pytest.mark.parametrize(
    ("gpus", "config", "says"),
    [
        (Resources(gpus_per_node=1), {}, "declared no GPUs"),
        (Resources(gpus_per_node=2), {"gpus": [0, 1, 2]}, "2 nodes x 2 GPUs is 4"),
        (Resources(gpus_per_node=1, gpu_type="h100"), {"gpus": [0, 1], "gpu_type": "a100"}, "a100"),
        (Resources(queue="gpu"), {}, "resources.queue"),
        (Resources(exclusive=True), {}, "resources.exclusive"),
    ],
)
def test_what_one_machine_cannot_give_is_refused_by_the_plan_and_by_start(
    state: Path, gpus: Resources, config: dict[str, object], says: str
) -> None:
    backend = make_backend(state, **config)
    spec = JobSpec(command=["true"], nodes=2, resources=gpus)
    with pytest.raises(Unsupported, match=says):
        make_plan(backend, None, spec)
    with pytest.raises(Unsupported, match=says):
        backend.start(StartRequest(job="r1", submission=1, attempt=1, spec=spec))
    assert not list((state / "objects").glob("jd-*")) if (state / "objects").exists() else True


_CONTROL, _ = cgroups.probe()


@pytest.mark.skipif(_CONTROL is None, reason="no writable cgroup memory controller here")
def test_a_job_over_its_own_memory_limit_ends_out_of_memory(state: Path) -> None:
    backend = make_backend(state)  # no site limit: the spec's applies
    assert backend.capabilities()[Capability.MEMORY_LIMIT].answer is Tristate.YES
    hog = "b = []\nwhile True: b.append(bytearray(8 << 20))"
    spec = JobSpec(command=["python3", "-c", hog], resources=Resources(memory_per_node_mib=48))
    ref = backend.start(StartRequest(job="m1", submission=1, attempt=1, spec=spec))
    backend.open(ref)
    latest = wait_for(backend, ref, lambda o: o.state is ObjectState.ENDED, "ended").latest
    assert latest is not None and latest.cause is not None
    assert str(latest.cause.kind) == "out-of-memory"


def test_the_dry_run_shows_each_rank_and_creates_nothing(state: Path) -> None:
    backend = make_backend(state, gpus=[0, 1])
    spec = JobSpec(
        command=["train", "--lr", "0.1 x"], nodes=2, resources=Resources(gpus_per_node=1)
    )
    request = StartRequest(job="p1", submission=1, attempt=1, spec=spec)
    shown = backend.preview(request)
    assert not (state / "objects").exists() or not list((state / "objects").iterdir())
    assert "rank 0 on local-0: env CUDA_VISIBLE_DEVICES=0" in shown
    assert "rank 1 on local-1: env CUDA_VISIBLE_DEVICES=1" in shown
    assert "-- train --lr '0.1 x'" in shown
    assert "memory: not limited" in shown


def test_suspect_nodes_are_named_in_the_log_and_ignored(
    state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend(state)
    request = StartRequest(
        job="s1", submission=2, attempt=1, spec=JobSpec(command=("true",)), exclude=("n2",)
    )
    with caplog.at_level("WARNING", logger="jobdispatch_local.backend"):
        ref = backend.start(request)
    assert backend.inspect(ref).state is ObjectState.GATED
    assert any("n2" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    detail = backend.capabilities(request.spec)[Capability.NODE_CONSTRAINTS].detail
    assert "named in the log and ignored" in detail
