"""The names, labels and annotations the adapter writes on its objects, and how refs read.

Everything the adapter needs to know of an object later is written on the object itself (its
labels and annotations), never kept in the adapter, so two backends, or a backend restarted
after a crash, read the same thing back.
"""

from __future__ import annotations

import re

from jobdispatch.errors import Invalid, NotFound
from jobdispatch.spi import ObjectRef, parse_discovery_name

__all__ = [
    "ADMISSION_GATED_BY",
    "ADMISSION_SPENT",
    "ATTEMPT",
    "EVIDENCE",
    "EXECUTION_ENV",
    "FINALIZER",
    "GATE",
    "HOLD",
    "JOB",
    "KUEUE_RUNS",
    "MANAGED",
    "OPEN",
    "PATCH_MANAGER",
    "PLACEMENT",
    "PRIORITY_CLASS",
    "QUEUE_NAME",
    "STOP",
    "STOPPED_RUN",
    "SUBMISSION",
    "check_name",
    "job_selector",
    "ref_of",
    "split_ref",
]

_DOMAIN = "jobdispatch.dev"
#: Labels every TrainJob (and, through the runtime patch, its JobSet) carries.
JOB = f"{_DOMAIN}/job"
SUBMISSION = f"{_DOMAIN}/submission"
ATTEMPT = f"{_DOMAIN}/attempt"
MANAGED = f"{_DOMAIN}/managed"
#: Annotation: "closed" while Start's gate stands, "open" once Open lifted it.
GATE = f"{_DOMAIN}/gate"
#: Annotation: the hold instance standing, as decimal digits.
HOLD = f"{_DOMAIN}/hold"
#: Annotation: the reason given to Stop, written before the delete.
STOP = f"{_DOMAIN}/stop"
#: Annotation written with STOP when a run was going: the run's pods may be gone before the
#: stop is observed, and this says there was one to end.
STOPPED_RUN = f"{_DOMAIN}/stopped-run"
#: Annotation prefix: ``<EVIDENCE>-<attempt>`` holds the cause a failing pod of that attempt
#: showed, pinned before the pod is deleted with it (0010 §5).
EVIDENCE = f"{_DOMAIN}/evidence"
#: Annotation prefix: ``<PLACEMENT>-<attempt>`` holds the nodes that attempt's pods ran on, as
#: JSON ``{node name: node uid}``, pinned when they are first seen running. A node deleted with
#: its pods (PodGC fails and removes them within a second) leaves nothing else behind to say
#: the run's node is gone (0010 §5).
PLACEMENT = f"{_DOMAIN}/placement"
#: Annotation (Kueue mode): the latest open, ``{"id", "deadline"}`` as JSON; the admission
#: controller answers its check Ready for that open only, and only before its deadline.
OPEN = f"{_DOMAIN}/open"
#: Annotation (Kueue mode): the runs Kueue's evictions ended, as a JSON list of ``{"index",
#: "attempt", "accumulated", "kind", "provenance", "detail", "evicted_at"}``: Kueue's suspend
#: deletes the pods and JobSet does not count a restart, so the execution index across a
#: readmission is kept here (spec 0012 §6).
KUEUE_RUNS = f"{_DOMAIN}/kueue-runs"
#: Workload annotation the admission controller writes: the open spent on an admission.
ADMISSION_SPENT = f"{_DOMAIN}/admission-spent"
#: Kueue's labels and annotation on a job: its LocalQueue, its WorkloadPriorityClass, and the
#: gates that keep its Workload from reserving quota (creation only; removable, never re-added).
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
ADMISSION_GATED_BY = "kueue.x-k8s.io/admission-gated-by"
#: Finalizer that keeps a deleted TrainJob readable as the stop's receipt (0010 §4).
FINALIZER = f"{_DOMAIN}/receipt"
#: The manager name of the adapter's runtime patch (labels for the JobSet).
PATCH_MANAGER = f"{_DOMAIN}/adapter"
#: Label the JobSet controller puts on every Job and Pod of a JobSet (the TrainJob's name).
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
#: Label telling a JobSet's restart attempts apart on its Jobs and Pods.
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
#: ``JOBDISPATCH_EXECUTION`` in every container: the execution is the JobSet's restart attempt,
#: which each pod reads from its own label through the downward API.
EXECUTION_ENV = {
    "name": "JOBDISPATCH_EXECUTION",
    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{RESTART_ATTEMPT}']"}},
}

# RFC 1035 label, as the TrainJob CRD's validation rule demands, at most 63 characters.
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_name(name: str) -> str:
    """``name`` if the TrainJob CRD would accept it (RFC 1035, 63 characters at most).

    The JobSet controller derives its Jobs' and Pods' names from it, so a longer name would be
    refused later, deep in another controller; it is refused here instead, naming it.
    """
    if len(name) > 63 or not _RFC1035.fullmatch(name):
        raise Invalid(
            f"discovery name {name!r} is not a TrainJob name (RFC 1035 label, at most 63 "
            "characters): use a shorter job id"
        )
    return name


def ref_of(namespace: str, name: str) -> ObjectRef:
    """The ref of TrainJob ``name`` in ``namespace``: ``<namespace>/<name>``."""
    return ObjectRef(f"{namespace}/{name}")


def split_ref(ref: ObjectRef) -> tuple[str, str]:
    """(namespace, name) of a ref this adapter issued; NotFound for any other shape, since no
    TrainJob can be named by it."""
    namespace, sep, name = ref.id.partition("/")
    if not sep or not _NAMESPACE.fullmatch(namespace) or not _RFC1035.fullmatch(name):
        raise NotFound(f"no TrainJob {ref}: a Kubeflow ref is <namespace>/<name>")
    if parse_discovery_name(name) is None:
        raise NotFound(f"no TrainJob {ref}: {name!r} is not a dispatch discovery name")
    return namespace, name


def job_selector(jobs: list[str] | tuple[str, ...]) -> str:
    """A label selector matching the TrainJobs of every job in ``jobs`` (one LIST for all)."""
    wanted = sorted(set(jobs))
    if len(wanted) == 1:
        return f"{JOB}={wanted[0]}"
    return f"{JOB} in ({','.join(wanted)})"
