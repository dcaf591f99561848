"""``jobdispatch plan`` of a job file with ``[resources.kubeflow]``, on a cluster entry that is
not probed (nothing to reach): an unknown key or a bad value refused with its name and exit 2,
and ``--show-submission`` printing the TrainJob ``submit`` would create, with every field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from jobdispatch_cli.main import main

JOB = """\
name = "fields"
command = ["python3", "train.py"]
nodes = 2

[resources]
gpus_per_node = 8
constraints = ["pool=h100"]

[resources.kubeflow]
tolerations = ["gpu=true:NoSchedule"]
labels = ["team=vision"]
volumes = ["datasets:/data:ro"]
shm_size = "16Gi"
secret_env = ["HF_TOKEN=hf:token"]
gpu_resource = "amd.com/gpu"
{extra}"""


def plan(tmp_path: Path, extra: str, *args: str) -> tuple[int, str, str]:
    config = tmp_path / "config" / "jobdispatch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[clusters.k]\nadapter = "kubeflow"\nkubeconfig = "{tmp_path}/none"\nprobe = false\n'
    )
    job = tmp_path / "job.toml"
    job.write_text(JOB.format(extra=extra))
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "JOBDISPATCH_CLUSTER": "k",
    }
    runner = CliRunner()
    with runner.isolation(env=env) as (out, err, _):
        try:
            main(["plan", str(job), *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue().decode(), err.getvalue().decode()


def test_show_submission_prints_the_trainjob_with_the_job_file_fields(tmp_path: Path) -> None:
    code, out, err = plan(tmp_path, "", "--show-submission", "--json")
    assert code == 0, err
    tj: dict[str, Any] = json.loads(json.loads(out)["submission"])
    assert tj["kind"] == "TrainJob"
    assert tj["metadata"]["labels"]["team"] == "vision"
    assert tj["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"amd.com/gpu": "8"}
    (patch,) = tj["spec"]["runtimePatches"]
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "h100"}
    assert pod["tolerations"][0]["key"] == "gpu"


def test_an_unknown_key_of_the_table_is_refused_by_its_name(tmp_path: Path) -> None:
    code, _, err = plan(tmp_path, 'node_selector = "gpu=h100"\nbogus_key = 1\n')
    assert code == 2, err
    assert "bogus_key: unknown key" in err and "node_selector: unknown key" in err


def test_a_bad_value_is_refused_naming_its_key(tmp_path: Path) -> None:
    code, _, err = plan(tmp_path, 'service_account = "Not A Name"\n')
    assert code == 2, err
    assert "resources.kubeflow.service_account" in err
