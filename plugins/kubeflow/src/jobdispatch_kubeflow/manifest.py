"""The TrainJob a StartRequest becomes. Pure: a request and the settings in, a dict out.

The TrainJob is created under the request's discovery name, labelled with job, submission and
attempt, and gated the way the backend's :mod:`gating` strategy gates (suspended and annotated
``gate: closed``; under Kueue also in its LocalQueue, behind ``admission-gated-by``). Trainer
v2.2 removed ``spec.labels``, and the TrainJob's own labels do not reach the JobSet, so the
labels are also given to the JobSet through a runtime patch of the adapter's own (manager
``jobdispatch.dev/adapter``): the JobSet can then be found by the same selector.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from jobdispatch.errors import Invalid
from jobdispatch.spi import StartRequest

from jobdispatch_kubeflow import helper, names
from jobdispatch_kubeflow.config import Settings
from jobdispatch_kubeflow.gating import Gating

__all__ = [
    "HOSTNAME_LABEL",
    "TRAINER_JOB",
    "avoid_nodes",
    "labels",
    "resources_per_node",
    "trainjob",
]

#: The node label a suspect node is kept off by: the kubelet sets it to the node's host name.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The replicated job of a Trainer runtime whose pods run the training (Trainer's ``node``).
TRAINER_JOB = "node"
#: A label value: what ``kubernetes.io/hostname`` can hold, so all a suspect node may be.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def labels(request: StartRequest) -> dict[str, str]:
    """The labels every object of the request carries."""
    return {
        names.JOB: request.job,
        names.SUBMISSION: str(request.submission),
        names.ATTEMPT: str(request.attempt),
        names.MANAGED: "true",
    }


#: The extended resource GPUs are asked for by (the NVIDIA device plugin's name).
GPU_RESOURCE = "nvidia.com/gpu"


def resources_per_node(request: StartRequest) -> Mapping[str, Any] | None:
    """The job's resources as ``trainer.resourcesPerNode``: requests equal to limits, so a node
    gets exactly what it asked for (spec 0011). GPUs are the extended resource
    ``nvidia.com/gpu``; CPUs are ``cpus_per_proc`` for each of the node's processes; memory is
    in ``Mi``. None when the spec asks for none of them: the runtime's own requests apply.
    The fields this adapter cannot map (a GPU type, a queue, constraints, accounts, exclusive
    nodes) are answered ``no`` by its capabilities, so the plan refuses them before this runs.
    """
    res = request.spec.resources
    amounts: dict[str, Any] = {}
    if res.gpus_per_node:
        amounts[GPU_RESOURCE] = str(res.gpus_per_node)
    if res.cpus_per_proc is not None:
        amounts["cpu"] = str(res.cpus_per_proc * request.spec.procs_per_node)
    if res.memory_per_node_mib is not None:
        amounts["memory"] = f"{res.memory_per_node_mib}Mi"
    if not amounts:
        return None
    return {"requests": dict(amounts), "limits": dict(amounts)}


def avoid_nodes(exclude: tuple[str, ...]) -> dict[str, Any]:
    """A required node anti-affinity keeping a pod off the suspect nodes ``exclude``: no node
    whose ``kubernetes.io/hostname`` is one of them may take it. A name that cannot be a label
    value is refused (Invalid), since it could never match and the exclusion would be a lie."""
    for name in exclude:
        if not _LABEL_VALUE.fullmatch(name):
            msg = f"suspect node {name!r} is not a {HOSTNAME_LABEL} label value"
            raise Invalid(msg)
    term = {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": list(exclude)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]
            }
        }
    }


def trainjob(
    request: StartRequest, settings: Settings, gating: Gating, *, runtime: str | None = None
) -> dict[str, Any]:
    """The TrainJob body for ``request``: labelled, its environment injected, gated as
    ``gating`` gates (suspended and ``gate: closed``; in a LocalQueue under Kueue)."""
    spec = request.spec
    name = names.check_name(request.name)
    env = {
        **spec.env,
        **request.env,
        "JOBDISPATCH_JOB": request.job,
        "JOBDISPATCH_SUBMISSION": str(request.submission),
        "JOBDISPATCH_ATTEMPT": str(request.attempt),
        "JOBDISPATCH_OBJECT": f"{settings.namespace}/{name}",
    }
    trainer: dict[str, Any] = {
        "image": spec.image or settings.image,
        "command": list(spec.command),
        "numNodes": spec.nodes,
        "env": [
            *({"name": k, "value": v} for k, v in sorted(env.items())),
            dict(names.EXECUTION_ENV),
        ],
    }
    if spec.procs_per_node != 1:
        trainer["numProcPerNode"] = spec.procs_per_node
    resources = resources_per_node(request)
    if resources is not None:
        trainer["resourcesPerNode"] = dict(resources)
    template: dict[str, Any] = {"metadata": {"labels": labels(request)}}
    pod_spec: dict[str, Any] = {}
    if request.exclude:
        # Through the adapter's own runtime patch, on the training pods only: the suspect
        # nodes recorded with the submission (``jobdispatch.suspects``).
        pod_spec["affinity"] = avoid_nodes(request.exclude)
    if settings.publish is not None:
        # The publish image's init container (in the derived runtime) gets the job's own
        # environment, as the training container does.
        pod_spec["initContainers"] = [helper.init_patch(env)]
    if pod_spec:
        pod = {"spec": {"template": {"spec": pod_spec}}}
        template["spec"] = {"replicatedJobs": [{"name": TRAINER_JOB, "template": pod}]}
    patch = {"template": template}
    body: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels(request),
            "annotations": {},
            "finalizers": [names.FINALIZER],
        },
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": settings.runtime.kind if runtime is None else "TrainingRuntime",
                "name": runtime or settings.runtime.name,
            },
            "trainer": trainer,
            "runtimePatches": [{"manager": names.PATCH_MANAGER, "trainingRuntimeSpec": patch}],
        },
    }
    if spec.time_limit is not None:
        # Whole seconds, rounded up: a limit is never cut short. The TrainJob's deadline
        # restarts when it is resumed, so it bounds each run, not the job (0010 §3).
        body["spec"]["activeDeadlineSeconds"] = max(1, math.ceil(spec.time_limit.total_seconds()))
    return gating.gate(body)
