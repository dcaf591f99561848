"""API objects shaped as the API server returns them (field names, nesting and value types of
trainer.kubeflow.org/v1alpha1 TrainJob, jobset.x-k8s.io/v1alpha2 JobSet, batch/v1 Job, v1 Pod,
Node and Event), built by small functions so each test states only what it is about."""

from __future__ import annotations

from datetime import datetime
from typing import Any

T0 = "2026-12-01T10:00:00Z"
T1 = "2026-12-01T10:05:00Z"

Obj = dict[str, Any]


def cond(kind: str, reason: str = "", message: str = "", status: str = "True") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T1,
    }


def trainjob(
    name: str = "jd-j1-1-1",
    *,
    suspend: bool = False,
    gate: str | None = "open",
    hold: int | None = None,
    stop: str | None = None,
    conditions: list[Obj] | None = None,
    deleting: bool = False,
    jobs_status: list[Obj] | None = None,
) -> Obj:
    annotations: dict[str, str] = {}
    if gate is not None:
        annotations["jobdispatch.dev/gate"] = gate
    if hold is not None:
        annotations["jobdispatch.dev/hold"] = str(hold)
    if stop is not None:
        annotations["jobdispatch.dev/stop"] = stop
    meta: Obj = {
        "name": name,
        "namespace": "dispatch",
        "uid": "0b0e2a51-0000-4000-8000-000000000001",
        "resourceVersion": "1234",
        "generation": 1,
        "creationTimestamp": T0,
        "labels": {"jobdispatch.dev/job": name.split("-")[1], "jobdispatch.dev/managed": "true"},
        "annotations": annotations,
        "finalizers": ["jobdispatch.dev/receipt"],
    }
    if deleting:
        meta["deletionTimestamp"] = T1
        meta["deletionGracePeriodSeconds"] = 0
        meta["finalizers"].append("foregroundDeletion")
    obj: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": meta,
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": "torch-distributed",
            },
            "suspend": suspend,
            "trainer": {"image": "busybox:stable", "command": ["sleep", "3600"], "numNodes": 1},
        },
        "status": {},
    }
    if conditions:
        obj["status"]["conditions"] = conditions
    if jobs_status is not None:
        obj["status"]["jobsStatus"] = jobs_status
    return obj


def jobset(
    name: str = "jd-j1-1-1", *, restarts: int = 0, conditions: list[Obj] | None = None
) -> Obj:
    status: Obj = {
        "replicatedJobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
        ]
    }
    if restarts:
        status["restarts"] = restarts
        status["restartsCountTowardsMax"] = restarts
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "dispatch", "resourceVersion": "1300"},
        "spec": {"replicatedJobs": [{"name": "node", "replicas": 1}], "suspend": False},
        "status": status,
    }


def job(
    name: str = "jd-j1-1-1-node-0",
    *,
    jobset_name: str = "jd-j1-1-1",
    conditions: list[Obj] | None = None,
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "dispatch",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": jobset_name,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/restart-attempt": "0",
            },
        },
        "spec": {"backoffLimit": 0, "completionMode": "Indexed", "parallelism": 1},
        "status": {"conditions": conditions or [], "active": 0 if conditions else 1},
    }


def running(name: str = "node", started: str = T0) -> Obj:
    return {
        "name": name,
        "image": "busybox:stable",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "started": True,
        "state": {"running": {"startedAt": started}},
    }


def terminated(
    code: int, reason: str = "Error", name: str = "node", finished: str = T1, *, last: bool = False
) -> Obj:
    term = {"exitCode": code, "reason": reason, "startedAt": T0, "finishedAt": finished}
    status: Obj = {
        "name": name,
        "image": "busybox:stable",
        "imageID": "",
        "ready": False,
        "restartCount": 1 if last else 0,
        "started": False,
    }
    if last:
        status["state"] = {"running": {"startedAt": T1}}
        status["lastState"] = {"terminated": term}
    else:
        status["state"] = {"terminated": term}
    return status


def waiting(reason: str, message: str = "", name: str = "node") -> Obj:
    return {
        "name": name,
        "image": "nope:missing",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {"waiting": {"reason": reason, "message": message}},
    }


def pod(
    name: str = "jd-j1-1-1-node-0-0-abcde",
    *,
    jobset_name: str = "jd-j1-1-1",
    attempt: int = 0,
    phase: str = "Running",
    node: str | None = "kwok-node-1",
    containers: list[Obj] | None = None,
    conditions: list[Obj] | None = None,
    reason: str | None = None,
    message: str | None = None,
    index: int = 0,
    deleting: bool = False,
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": "dispatch",
        "labels": {
            "batch.kubernetes.io/job-completion-index": str(index),
            "jobset.sigs.k8s.io/jobset-name": jobset_name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/job-index": "0",
            "jobset.sigs.k8s.io/restart-attempt": str(attempt),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = T1
    spec: Obj = {
        "containers": [{"name": "node", "image": "busybox:stable"}],
        "restartPolicy": "Never",
    }
    if node:
        spec["nodeName"] = node
    status: Obj = {"phase": phase, "conditions": conditions or []}
    if node and phase != "Pending":
        status["startTime"] = T0
    if containers is None and phase == "Running":
        containers = [running()]
    if containers is not None:
        status["containerStatuses"] = containers
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node(name: str = "kwok-node-1", *, ready: str = "True", reason: str = "KubeletReady") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"type": "kwok"}},
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": reason,
                    "lastHeartbeatTime": T0,
                    "lastTransitionTime": T0,
                }
            ]
        },
    }


def nodes(*objs: Obj) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objs}


def event(reason: str, message: str, *, kind: str = "Warning", about: str = "jd-j1-1-1") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{about}.1", "namespace": "dispatch"},
        "involvedObject": {"kind": "TrainJob", "name": about, "namespace": "dispatch"},
        "reason": reason,
        "message": message,
        "type": kind,
        "count": 1,
    }


# ---------------------------------------------------------------------------- Kueue's queues

#: Kueue's AdmissionCheck controller name dispatch's controller answers.
CONTROLLER_NAME = "jobdispatch.dev/admission"
#: The Active condition's message of a check answered by the holder of Lease dispatch/l.
ANSWERED = "answered by the holder of lease dispatch/l"


def local_queue(cluster_queue: str = "cq") -> Obj:
    return {
        "metadata": {"name": "q", "namespace": "dispatch"},
        "spec": {"clusterQueue": cluster_queue},
    }


def cluster_queue(*checks: str, strategy: bool = True) -> Obj:
    spec: Obj = {}
    if checks and strategy:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    elif checks:
        spec["admissionChecks"] = list(checks)
    return {"metadata": {"name": "cq"}, "spec": spec}


def check(controller: str = CONTROLLER_NAME, message: str | None = None) -> Obj:
    obj: Obj = {"metadata": {"name": "gate"}, "spec": {"controllerName": controller}}
    if message is not None:
        obj["status"] = {"conditions": [{"type": "Active", "status": "True", "message": message}]}
    return obj


def lease(renewed: datetime, holder: str = "ctl-1") -> Obj:
    return {
        "metadata": {"name": "l", "namespace": "dispatch"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def kueue_queue(api: Any, *, gated: bool, renewed: datetime) -> None:
    """Put into the fake ``api``: Kueue served, the test runtime, LocalQueue dispatch/q and its
    ClusterQueue cq, listing AdmissionCheck ``gate`` answered by a controller whose Lease was
    renewed at ``renewed`` (``gated``), or listing no check."""
    from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT

    api.groups["kueue.x-k8s.io"] = ("v1beta2",)
    api.put("clustertrainingruntimes", None, TEST_RUNTIME_OBJECT)
    api.put("localqueues", "dispatch", local_queue())
    if gated:
        api.put("clusterqueues", None, cluster_queue("gate"))
        api.put("admissionchecks", None, check(message=ANSWERED))
        api.put("leases", "dispatch", lease(renewed))
    else:
        api.put("clusterqueues", None, cluster_queue())


def kueue_backend(
    *, gated: bool, renewed: datetime, priority_class: str | None = None
) -> tuple[Any, Any]:
    """A KubeflowBackend in Kueue mode on LocalQueue q of a fresh fake cluster
    (:func:`kueue_queue`), with its clock at ``renewed``, and the fake; probes forgotten first."""
    from jobdispatch_kubeflow import KubeflowBackend, probe
    from jobdispatch_kubeflow.config import Kueue, Runtime, Settings
    from jobdispatch_kubeflow.fake import FakeApi

    probe.forget()
    api = FakeApi()
    kueue_queue(api, gated=gated, renewed=renewed)
    settings = Settings(
        namespace="dispatch",
        allow_rank_restart=True,
        runtime=Runtime(name="dispatch-torch-test"),
        kueue=Kueue(queue="q", priority_class=priority_class),
    )
    return KubeflowBackend(settings, api=api, clock=lambda: renewed), api
