"""Resources in job files (TOML and YAML), their errors, and ``plan --show-submission``."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobdispatch import Resources
from jobdispatch.sizes import parse_mib
from jobdispatch_cli.jobfile import FileError, parse_job_text

from .conftest import Invoke, add_to_config

TOML = """\
name = "gpu"
command = ["train"]
nodes = 2
[resources]
gpus_per_node = 8
gpu_type = "a100"
cpus_per_proc = 12
memory_per_node = "480G"
queue = "gpu"
account = "ml"
qos = "high"
constraints = ["ib", "nvme"]
exclusive = true
[resources.slurm]
reservation = "maint"
licenses = ["scratch:2"]
"""

YAML = """\
name: gpu
command: [train]
nodes: 2
resources:
  gpus_per_node: 8
  gpu_type: a100
  cpus_per_proc: 12
  memory_per_node: 480G
  queue: gpu
  account: ml
  qos: high
  constraints: [ib, nvme]
  exclusive: true
  slurm:
    reservation: maint
    licenses: ["scratch:2"]
"""

EXPECTED = Resources(
    gpus_per_node=8,
    gpu_type="a100",
    cpus_per_proc=12,
    memory_per_node_mib=480 * 1024,
    queue="gpu",
    account="ml",
    qos="high",
    constraints=("ib", "nvme"),
    exclusive=True,
    adapter={"slurm": {"reservation": "maint", "licenses": ("scratch:2",)}},
)


@pytest.mark.parametrize(("text", "suffix"), [(TOML, ".toml"), (YAML, ".yaml")])
def test_toml_and_yaml_give_the_same_resources(tmp_path: Path, text: str, suffix: str) -> None:
    parsed = parse_job_text(text, file=f"job{suffix}", suffix=suffix, base=tmp_path)
    assert parsed.spec.resources == EXPECTED


def test_resource_errors_name_line_and_field_all_at_once(tmp_path: Path) -> None:
    text = """\
command = ["x"]
[resources]
gpus_per_node = "eight"
memory_per_node = "lots"
queue = "gpu --exclusive"
gpu = 3
constraints = [1]
[resources.slurm]
nice = 1.5
"""
    with pytest.raises(FileError) as caught:
        parse_job_text(text, file="j.toml", suffix=".toml", base=tmp_path)
    found = {(p.field, p.line) for p in caught.value.problems}
    assert ("resources.gpus_per_node", 3) in found
    assert ("resources.memory_per_node", 4) in found
    assert ("resources.queue", 5) in found
    assert ("resources.gpu", 6) in found
    assert ("resources.constraints[0]", 7) in found  # the schema names the element
    assert ("resources.slurm.nice", 9) in found


@pytest.mark.parametrize(
    ("value", "mib"),
    [("512M", 512), ("64G", 65536), ("1.5T", 1572864), ("2GiB", 2048), (100, 100), ("1K", 1)],
)
def test_sizes_are_binary_units_rounded_up(value: str | int, mib: int) -> None:
    assert parse_mib(value) == mib


def test_plan_shows_the_submission_and_creates_nothing(
    invoke: Invoke, tmp_path: Path, home: Path
) -> None:
    add_to_config(home, "gpus = [0, 1, 2, 3]\n")
    path = tmp_path / "gpu.toml"
    path.write_text(
        'command = ["train", "--lr", "0.1"]\nnodes = 2\n[resources]\ngpus_per_node = 2\n'
    )
    ran = invoke("plan", str(path), "--show-submission")
    assert ran.code == 0, ran.err
    assert "What the first submission creates" in ran.out
    assert "rank 1 on local-1: env CUDA_VISIBLE_DEVICES=2,3" in ran.out
    assert "jd-dryrun-1-1" in ran.out
    data = invoke("plan", str(path), "--show-submission", "--json").json()
    assert "CUDA_VISIBLE_DEVICES=0,1" in data["submission"]
    assert invoke("list", "--json").json() == []


def test_plan_refuses_gpus_the_cluster_does_not_have(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "gpu.toml"
    path.write_text('command = ["train"]\n[resources]\ngpus_per_node = 1\n')
    ran = invoke("plan", str(path), "--show-submission")
    assert ran.code == 4  # refused: unsupported by the cluster
    assert "resources.gpus_per_node" in ran.err
    assert "declared no GPUs" in ran.err


@pytest.mark.parametrize(
    "size", ["64Gi", "64G", "64GB", "64GiB", "64gb", "65536", 65536, "0.0625T", "67108864K"]
)
def test_a_size_means_the_same_in_a_job_file_and_in_the_config(size: str | int) -> None:
    """Issue 33, item 5: one parser, binary units, a bare number of MiB, in both places
    ("64Gi" was refused in a job file, and a bare number was bytes in the config)."""
    from jobdispatch_local.config import Settings

    written = f'"{size}"' if isinstance(size, str) else str(size)
    text = f'command = ["true"]\n[resources]\nmemory_per_node = {written}\n'
    spec = parse_job_text(text, file="m.toml", suffix=".toml", base=Path()).spec
    assert spec.resources.memory_per_node_mib == 65536
    assert Settings.from_config({"memory_limit": size}).memory_limit == 65536 << 20


def test_the_kubernetes_spelling_plans_from_a_job_file_and_a_config(
    invoke: Invoke, tmp_path: Path, home: Path
) -> None:
    add_to_config(home, 'memory_limit = "2Gi"\n')
    path = tmp_path / "m.yaml"
    path.write_text('name: m\ncommand: ["true"]\nresources:\n  memory_per_node: 1Gi\n')
    ran = invoke("plan", str(path))
    assert ran.code == 0, ran.err
    refused = tmp_path / "bad.yaml"
    refused.write_text('name: m\ncommand: ["true"]\nresources:\n  memory_per_node: 64Bi\n')
    ran = invoke("plan", str(refused))
    assert ran.code == 2
    assert f"{refused}:4: resources.memory_per_node: not a size: '64Bi' (use" in ran.err
