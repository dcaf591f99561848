"""Suspect nodes on Kubernetes: a request's ``exclude`` becomes a required node anti-affinity on
``kubernetes.io/hostname`` for the training pods, carried by the adapter's own runtime patch of
the TrainJob (``jobdispatch_kubeflow.manifest``)."""

from __future__ import annotations

from typing import Any

import pytest
from jobdispatch.errors import Invalid
from jobdispatch.spi import StartRequest
from jobdispatch.types import JobSpec
from jobdispatch_kubeflow import gating, manifest, names
from jobdispatch_kubeflow.config import Settings

SETTINGS = Settings(namespace="dispatch")


def body(exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    spec = JobSpec(command=("python", "train.py"), image="train:1", nodes=2)
    req = StartRequest(job="j1", submission=3, attempt=1, spec=spec, exclude=exclude)
    return manifest.trainjob(req, SETTINGS, gating.of(SETTINGS))


def own_patch(tj: dict[str, Any]) -> dict[str, Any]:
    (patch,) = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == names.PATCH_MANAGER]
    spec: dict[str, Any] = patch["trainingRuntimeSpec"]
    return spec


def test_suspect_nodes_are_kept_off_by_a_required_hostname_anti_affinity() -> None:
    template = own_patch(body(("n2", "n7")))["template"]
    (rjob,) = template["spec"]["replicatedJobs"]
    assert rjob["name"] == manifest.TRAINER_JOB
    affinity = rjob["template"]["spec"]["template"]["spec"]["affinity"]
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n2", "n7"]}
            ]
        }
    ]
    # The labels the JobSet is found by still ride on the same patch.
    assert template["metadata"]["labels"][names.JOB] == "j1"


def test_without_suspects_the_patch_carries_only_the_labels() -> None:
    assert set(own_patch(body())["template"]) == {"metadata"}


@pytest.mark.parametrize("name", ["", "n 1", "-n1", "x" * 64, "n1,n2"])
def test_a_suspect_node_that_cannot_be_a_hostname_label_is_refused(name: str) -> None:
    with pytest.raises(Invalid, match="suspect node"):
        body((name,))
