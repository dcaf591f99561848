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
from jobdispatch.types import JobSpec

from jobdispatch_kubeflow import helper, job_settings, names
from jobdispatch_kubeflow.config import Settings
from jobdispatch_kubeflow.gating import Gating
from jobdispatch_kubeflow.job_settings import GPU_RESOURCE, SHM_PATH, JobSettings, node_selector

__all__ = [
    "HOSTNAME_LABEL",
    "TRAINER_CONTAINER",
    "TRAINER_JOB",
    "avoid_nodes",
    "labels",
    "resources_per_node",
    "runtime_name",
    "trainer_job",
    "trainjob",
]

#: The volume a job's /dev/shm is (memory-backed, of the job's ``shm_size``).
SHM_VOLUME = "jobdispatch-shm"
#: The volumes of a job's claims, numbered in the order the job file lists them.
VOLUME_PREFIX = "jobdispatch-claim-"
#: The node label a suspect node is kept off by: the kubelet sets it to the node's host name.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The replicated job of a Trainer runtime whose pods run the training (Trainer's ``node``).
TRAINER_JOB = "node"
#: The container of the training pods that runs the trainer (Trainer's ``node`` container).
TRAINER_CONTAINER = "node"
#: A label value: what ``kubernetes.io/hostname`` can hold, so all a suspect node may be.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def trainer_job(job_template: dict[str, Any]) -> dict[str, Any]:
    """A training runtime's ``template.spec`` that says ``job_template`` of the training job
    (:data:`TRAINER_JOB`) and nothing of any other replicated job: what the adapter's runtime
    patch says of the training pods, and all a runtime of one replicated job holds."""
    return {"replicatedJobs": [{"name": TRAINER_JOB, "template": job_template}]}


def labels(request: StartRequest) -> dict[str, str]:
    """The labels every object of the request carries."""
    return {
        names.JOB: request.job,
        names.SUBMISSION: str(request.submission),
        names.ATTEMPT: str(request.attempt),
        names.MANAGED: "true",
    }


def resources_per_node(
    request: StartRequest, gpu_resource: str = GPU_RESOURCE
) -> Mapping[str, Any] | None:
    """The job's resources as ``trainer.resourcesPerNode``: requests equal to limits, so a node
    gets exactly what it asked for (spec 0011). GPUs are the extended resource
    ``gpu_resource`` (the job's or the cluster entry's; ``nvidia.com/gpu`` unless named);
    CPUs are ``cpus_per_proc`` for each of the node's processes; memory is in ``Mi``. None when
    the spec asks for none of them: the runtime's own requests apply. The fields this adapter
    cannot map (a GPU type, accounts, exclusive nodes) are answered ``no`` by its capabilities,
    so the plan refuses them before this runs.
    """
    res = request.spec.resources
    amounts: dict[str, Any] = {}
    if res.gpus_per_node:
        amounts[gpu_resource] = str(res.gpus_per_node)
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


def _plain_env(request: StartRequest, settings: Settings) -> dict[str, str]:
    """The job's values: the spec's, the request's, then dispatch's own."""
    return {
        **request.spec.env,
        **request.env,
        "JOBDISPATCH_JOB": request.job,
        "JOBDISPATCH_SUBMISSION": str(request.submission),
        "JOBDISPATCH_ATTEMPT": str(request.attempt),
        "JOBDISPATCH_OBJECT": f"{settings.namespace}/{names.check_name(request.name)}",
    }


def _env(request: StartRequest, settings: Settings, fields: JobSettings) -> list[dict[str, Any]]:
    """``trainer.env``: the spec's and the request's values, dispatch's own, the execution
    read from the pod's JobSet restart attempt (``names.EXECUTION_ENV``), then the values
    read from Secrets and ConfigMaps (``valueFrom``; Trainer refuses env in a patch of the
    ``node`` container, so they cannot go through the runtime patch)."""
    env = _plain_env(request, settings)
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    out.append(dict(names.EXECUTION_ENV))
    for kind, refs in (
        ("secretKeyRef", fields.secret_env),
        ("configMapKeyRef", fields.config_map_env),
    ):
        out.extend(
            {"name": r.name, "valueFrom": {kind: {"name": r.of, "key": r.key}}} for r in refs
        )
    return out


def _pod_patch(request: StartRequest, fields: JobSettings) -> dict[str, Any]:
    """The ``PodSpecPatch`` of the training pods: the suspect nodes kept off, the node
    selector, tolerations, claims and ``/dev/shm``, the service account, the image pull
    secrets and the pod security context. Empty when the job asks none of them."""
    pod: dict[str, Any] = {}
    if request.exclude:
        # The suspect nodes recorded with the submission (``jobdispatch.suspects``).
        pod["affinity"] = avoid_nodes(request.exclude)
    if request.spec.resources.constraints:
        pod["nodeSelector"] = node_selector(request.spec.resources.constraints)
    if fields.tolerations:
        pod["tolerations"] = [t.body() for t in fields.tolerations]
    if fields.service_account is not None:
        pod["serviceAccountName"] = fields.service_account
    if fields.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": name} for name in fields.image_pull_secrets]
    security = fields.security_context()
    if security:
        pod["securityContext"] = security
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for i, claim in enumerate(fields.volumes):
        name = f"{VOLUME_PREFIX}{i}"
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim.claim}})
        mount: dict[str, Any] = {"name": name, "mountPath": claim.path}
        if claim.read_only:
            mount["readOnly"] = True
        mounts.append(mount)
    if fields.shm_size is not None:
        volumes.append(
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": fields.shm_size}}
        )
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    if volumes:
        pod["volumes"] = volumes
        pod["containers"] = [{"name": TRAINER_CONTAINER, "volumeMounts": mounts}]
    return pod


def trainjob(
    request: StartRequest, settings: Settings, gating: Gating, *, runtime: str | None = None
) -> dict[str, Any]:
    """The TrainJob body for ``request``: labelled, its environment injected, the job file's
    ``[resources.kubeflow]`` mapped (through ``trainer`` and the adapter's runtime patch),
    gated as ``gating`` gates (suspended and ``gate: closed``; in a LocalQueue under Kueue).
    ``runtime``: a derived TrainingRuntime carrying a failure policy, in place of the job's."""
    spec = request.spec
    fields = job_settings.of(spec)
    name = names.check_name(request.name)
    trainer: dict[str, Any] = {
        "image": spec.image or settings.image,
        "command": list(spec.command),
        "numNodes": spec.nodes,
        "env": _env(request, settings, fields),
    }
    if spec.procs_per_node != 1:
        trainer["numProcPerNode"] = spec.procs_per_node
    resources = resources_per_node(request, fields.gpu_resource or settings.gpu_resource)
    if resources is not None:
        trainer["resourcesPerNode"] = dict(resources)
    own = {**fields.labels, **labels(request)}
    template: dict[str, Any] = {"metadata": {"labels": own}}
    if fields.annotations:
        template["metadata"]["annotations"] = dict(fields.annotations)
    job_template: dict[str, Any] = {}
    pod = _pod_patch(request, fields)
    if settings.publish is not None:
        # The publish image's init container (in the derived runtime) gets the job's own
        # environment, as the training container does.
        pod["initContainers"] = [helper.init_patch(_plain_env(request, settings))]
    if pod:
        job_template["spec"] = {"template": {"spec": pod}}
    if fields.labels or fields.annotations:
        meta = {"labels": dict(fields.labels), "annotations": dict(fields.annotations)}
        job_template.setdefault("spec", {}).setdefault("template", {})["metadata"] = {
            k: v for k, v in meta.items() if v
        }
    if job_template:
        # Through the adapter's own runtime patch, on the training pods only.
        template["spec"] = trainer_job(job_template)
    patch = {"template": template}
    kind = settings.runtime.kind if runtime is None else "TrainingRuntime"
    body: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": own.copy(),
            "annotations": dict(fields.annotations),
            "finalizers": [names.FINALIZER],
        },
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": kind,
                "name": runtime or runtime_name(spec, settings),
            },
            "trainer": trainer,
            "runtimePatches": [{"manager": names.PATCH_MANAGER, "trainingRuntimeSpec": patch}],
        },
    }
    if gating.through_kueue:
        # The job's own LocalQueue and priority class; the gate fills in the cluster entry's.
        if spec.resources.queue is not None:
            body["metadata"]["labels"][names.QUEUE_NAME] = spec.resources.queue
        if fields.priority_class is not None:
            body["metadata"]["labels"][names.PRIORITY_CLASS] = fields.priority_class
    if spec.time_limit is not None:
        # Whole seconds, rounded up: a limit is never cut short. The TrainJob's deadline
        # restarts when it is resumed, so it bounds each run, not the job (0010 §3).
        body["spec"]["activeDeadlineSeconds"] = max(1, math.ceil(spec.time_limit.total_seconds()))
    return gating.gate(body)


def runtime_name(spec: JobSpec, settings: Settings) -> str:
    """The training runtime ``spec`` runs under: its own (``[resources.kubeflow] runtime``),
    else the cluster entry's; of the kind the cluster entry names."""
    return job_settings.of(spec).runtime or settings.runtime.name
