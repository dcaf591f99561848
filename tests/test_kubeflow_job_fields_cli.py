"""``jobdispatch plan`` of a job file with ``[resources.kubeflow]``, on a cluster entry that is
not probed (nothing to reach): an unknown key or a bad value refused with its name and exit 2,
and ``--show-submission`` printing the TrainJob ``submit`` would create, with every field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import test_plan_unprobed as unprobed

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
image_pull_secrets = ["regcred"]
run_as_user = 1000
fs_group = 2000
run_as_non_root = true
{extra}"""


def plan(tmp_path: Path, extra: str, *args: str) -> tuple[int, str, str]:
    """``jobdispatch plan --json`` of the job with ``extra`` in its table, on an unprobed
    Kubeflow cluster entry."""
    return unprobed.plan(
        tmp_path, "kubeflow", "probe = false\n", job_text=JOB.format(extra=extra), args=args
    )


def test_show_submission_prints_the_trainjob_with_the_job_file_fields(tmp_path: Path) -> None:
    code, out, err = plan(tmp_path, "", "--show-submission")
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
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["securityContext"] == {"runAsUser": 1000, "fsGroup": 2000, "runAsNonRoot": True}


def test_an_unknown_key_of_the_table_is_refused_by_its_name(tmp_path: Path) -> None:
    code, _, err = plan(tmp_path, 'node_selector = "gpu=h100"\nbogus_key = 1\n')
    assert code == 2, err
    assert "bogus_key: unknown key" in err and "node_selector: unknown key" in err


def test_a_bad_value_is_refused_naming_its_key(tmp_path: Path) -> None:
    code, _, err = plan(tmp_path, 'service_account = "Not A Name"\n')
    assert code == 2, err
    assert "resources.kubeflow.service_account" in err


def test_a_security_context_id_out_of_range_is_refused_naming_its_key(tmp_path: Path) -> None:
    code, _, err = plan(tmp_path, "run_as_group = -1\n")
    assert code == 2, err
    assert "run_as_group: -1 is less than the minimum of 0" in err
