"""What a cluster can do, asked of the cluster: API discovery, the runtime, and RBAC.

A probe makes a fixed handful of requests: ``GET /apis`` (which API groups and versions are
served: Trainer, JobSet, Kueue), one GET of the configured runtime (its JobSet template says
whether the runtime restarts failed Jobs or reruns pods in place), and one
SelfSubjectAccessReview per verb the adapter needs. Facts are kept for ``probe_ttl`` seconds per
cluster (API server URL and namespace), shared by the backends of one process, so a poll costs
no probe. Capabilities are computed from facts by a pure function. With ``probe = false``
nothing is asked: :data:`UNPROBED` stands in for the facts, and every answer that would rest on
them is ``unknown`` unless declared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from jobdispatch.errors import DispatchError, Unauthorized
from jobdispatch.kit.facts import FactsCache
from jobdispatch.types import Capability, Source, Support, Tristate

from jobdispatch_kubeflow.api import KINDS, Api
from jobdispatch_kubeflow.config import Settings

__all__ = ["NOT_PROBED", "UNPROBED", "ClusterFacts", "capabilities", "forget", "probe"]

#: The (verb, resource, subresource) the adapter needs, and what each is for.
NEEDED: Mapping[str, tuple[str, str, str, str]] = {
    "create trainjobs": ("create", "trainer.kubeflow.org", "trainjobs", ""),
    "patch trainjobs": ("patch", "trainer.kubeflow.org", "trainjobs", ""),
    "delete trainjobs": ("delete", "trainer.kubeflow.org", "trainjobs", ""),
    "list trainjobs": ("list", "trainer.kubeflow.org", "trainjobs", ""),
    "watch trainjobs": ("watch", "trainer.kubeflow.org", "trainjobs", ""),
    "list jobsets": ("list", "jobset.x-k8s.io", "jobsets", ""),
    "list jobs": ("list", "batch", "jobs", ""),
    "list pods": ("list", "", "pods", ""),
    "get pods/log": ("get", "", "pods", "log"),
    "list nodes": ("list", "", "nodes", ""),
    "list events": ("list", "", "events", ""),
    "create trainingruntimes": ("create", "trainer.kubeflow.org", "trainingruntimes", ""),
    "patch workloads": ("patch", "kueue.x-k8s.io", "workloads", ""),
}


@attrs.frozen(kw_only=True)
class ClusterFacts:
    """What a probe found."""

    groups: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    allowed: Mapping[str, bool] = attrs.field(factory=dict)
    runtime_found: bool = False
    #: The runtime's JobSet failure policy (None: it has none, so the first failure is final).
    failure_policy: Mapping[str, Any] | None = None
    #: The largest ``backoffLimit`` among the runtime's Jobs (None: unset, Kubernetes' 6).
    backoff_limit: int | None = None
    restart_policy: str | None = None
    #: Whether JobSet failure-policy rules take onJobFailureMessagePatterns (JobSet v0.10+),
    #: from the API server's OpenAPI document; None when it could not be read.
    message_patterns: bool | None = None
    #: False for :data:`UNPROBED`: nothing here was said by the cluster.
    probed: bool = True

    @property
    def trainer(self) -> bool:
        return "v1alpha1" in self.groups.get("trainer.kubeflow.org", ())

    @property
    def jobset(self) -> bool:
        return "v1alpha2" in self.groups.get("jobset.x-k8s.io", ())

    @property
    def kueue(self) -> bool:
        return "kueue.x-k8s.io" in self.groups

    @property
    def reruns_pods(self) -> bool:
        """Whether the runtime lets Kubernetes rerun a rank in place (a Job retry or a container
        restart), which weakens the execution identity."""
        limit = 6 if self.backoff_limit is None else self.backoff_limit
        return limit > 0 or self.restart_policy in (None, "OnFailure", "Always")


#: Why an answer is unknown when the site turned probing off.
NOT_PROBED = "not probed (probe = false); declare it under capabilities"

#: The facts of a cluster that was not asked (``probe = false``): Trainer and JobSet taken as
#: served so that the catalogue's answers show, and every probed answer made unknown.
UNPROBED = ClusterFacts(
    groups={"trainer.kubeflow.org": ("v1alpha1",), "jobset.x-k8s.io": ("v1alpha2",)},
    runtime_found=True,
    probed=False,
)

#: Facts per cluster and namespace, shared by every backend of the process.
_CACHE: FactsCache[tuple[str, str], ClusterFacts] = FactsCache()

#: Drop every cached probe (tests that change a cluster's answers).
forget = _CACHE.forget


def _template_facts(runtime: Mapping[str, Any]) -> tuple[Any, int | None, str | None]:
    spec = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    limits: list[int] = []
    policies: list[str] = []
    for rjob in spec.get("replicatedJobs") or ():
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        if "backoffLimit" in job_spec:
            limits.append(int(job_spec["backoffLimit"]))
        pod = (job_spec.get("template") or {}).get("spec") or {}
        if pod.get("restartPolicy"):
            policies.append(str(pod["restartPolicy"]))
    restart = (
        "Never"
        if policies and all(p == "Never" for p in policies)
        else (policies[0] if policies else None)
    )
    return spec.get("failurePolicy"), (max(limits) if limits else None), restart


def probe(api: Api, settings: Settings, *, key: str) -> ClusterFacts:
    """Probe the cluster behind ``api`` (cached per ``key`` and namespace for ``probe_ttl``)."""
    return _CACHE.get((key, settings.namespace), settings.probe_ttl, lambda: _ask(api, settings))


def _ask(api: Api, settings: Settings) -> ClusterFacts:
    """What the probe asks: the API groups served, what the credentials may do in the
    namespace, the runtime's template, and whether JobSet takes message patterns."""
    groups: dict[str, tuple[str, ...]] = {}
    for group in api.raw("GET", "/apis").get("groups") or ():
        groups[str(group.get("name"))] = tuple(
            str(v.get("version")) for v in group.get("versions") or ()
        )
    allowed: dict[str, bool] = {}
    for what, (verb, group, resource, sub) in NEEDED.items():
        attributes = {
            "namespace": settings.namespace,
            "verb": verb,
            "group": group,
            "resource": resource,
        }
        if sub:
            attributes["subresource"] = sub
        review = api.raw(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        allowed[what] = bool((review.get("status") or {}).get("allowed"))
    runtime = None
    if "v1alpha1" in groups.get("trainer.kubeflow.org", ()):
        kind = "clustertrainingruntimes"
        if settings.runtime.kind == "TrainingRuntime":
            kind = "trainingruntimes"
        try:
            runtime = api.get(
                kind, settings.namespace if KINDS[kind].namespaced else None, settings.runtime.name
            )
        except Unauthorized:
            runtime = None
    policy, limit, restart = _template_facts(runtime or {})
    patterns: bool | None = None
    if "v1alpha2" in groups.get("jobset.x-k8s.io", ()):
        try:
            document = api.raw("GET", "/openapi/v3/apis/jobset.x-k8s.io/v1alpha2")
            patterns = "onJobFailureMessagePatterns" in json.dumps(document)
        except DispatchError:
            patterns = None
    return ClusterFacts(
        groups=groups,
        allowed=allowed,
        runtime_found=runtime is not None,
        failure_policy=policy,
        backoff_limit=limit,
        restart_policy=restart,
        message_patterns=patterns,
    )


def capabilities(
    facts: ClusterFacts, declared: Mapping[Capability, Support], *, kueue_mode: bool = False
) -> dict[Capability, Support]:
    """Every capability from the facts, then the site's declarations over them.
    ``kueue_mode``: the backend submits through Kueue (spec 0012)."""
    C, P, K = Capability, Source.PROBED, Source.CATALOGUE
    can = facts.allowed

    def rbac(what: str, yes: str) -> Support:
        if what not in can:
            return Support.unknown(P, f"RBAC for {what} not asked")
        if can[what]:
            return Support.yes(P, yes)
        return Support.no(P, f"RBAC refuses {what} in this namespace")

    if not facts.trainer:
        missing = Support.no(P, "trainer.kubeflow.org/v1alpha1 is not served (Trainer v2 absent)")
        base = dict.fromkeys(C, missing)
    else:
        base = {
            C.CONTAINER_IMAGE: Support.yes(K, "trainer.image"),
            C.NATIVE_REQUEUE: Support.no(K, "Kubernetes has no requeue of an ended TrainJob"),
            C.NATIVE_RESTART: _native_restart(facts),
            C.HOLD: rbac("patch trainjobs", "spec.suspend with the instance in an annotation"),
            C.PRE_TERMINATION_SIGNAL: Support.yes(K, "SIGTERM, then the pod's grace period"),
            C.ACCOUNTING_HISTORY: Support.no(K, "pods and events are deleted; no history API"),
            C.ATTEMPT_INJECTION: Support.yes(K, "JOBDISPATCH_* in trainer.env"),
            C.READMISSION_GATE: Support.yes(K, "spec.suspend"),
            C.WORKING_DIRECTORY: Support.no(K, "a TrainJob's trainer has no working directory"),
            C.PROCS_PER_NODE: Support.yes(K, "trainer.numProcPerNode"),
            C.OUTPUT_PATH: Support.no(K, "output is the pods' logs, read from the API"),
            C.OUTPUT_READ: rbac("get pods/log", "pod logs through the API"),
            C.OUTPUT_FOLLOW: rbac("get pods/log", "pod logs with follow=true"),
            C.OUTPUT_RETAINED: Support.no(K, "a pod's log goes with the pod"),
            C.OUTPUT_GROWTH: Support.no(
                K, "a pod log's growth is not watched: the API serves logs, not their sizes"
            ),
            C.GPUS: Support.yes(K, "trainer.resourcesPerNode, as nvidia.com/gpu"),
            C.MEMORY_LIMIT: Support.yes(K, "trainer.resourcesPerNode memory, requests = limits"),
            C.CPUS_PER_PROC: Support.yes(K, "trainer.resourcesPerNode cpu, per node"),
            C.QUEUES: Support.no(K, "Kueue LocalQueues are not yet mapped by this adapter"),
            C.ACCOUNTS: Support.no(K, "Kubernetes has no accounts or QoS to charge a job to"),
            C.NODE_CONSTRAINTS: Support.no(K, "node selectors are not yet mapped by this adapter"),
            C.EXCLUSIVE_NODES: Support.no(K, "exclusive placement is not yet mapped"),
        }
        if kueue_mode:
            hold = rbac("patch trainjobs", "the instance in an annotation")
            workloads = rbac("patch workloads", "Workload.spec.active=false")
            base[C.HOLD] = (
                Support.yes(P, "Workload.spec.active=false, the instance in a TrainJob annotation")
                if hold.answer is Tristate.YES and workloads.answer is Tristate.YES
                else (hold if hold.answer is not Tristate.YES else workloads)
            )
            base[C.READMISSION_GATE] = Support.yes(
                K, "the jobdispatch-kueue-admission check answers Ready only for a fresh open"
            )
        elif facts.kueue:
            base[C.HOLD] = attrs.evolve(
                base[C.HOLD],
                detail=base[C.HOLD].detail
                + "; Kueue is installed: a TrainJob it manages is unsuspended once admitted, "
                "so do not hold Kueue-managed TrainJobs this way",
            )
        if not facts.jobset:
            base[C.CONTAINER_IMAGE] = Support.no(P, "jobset.x-k8s.io/v1alpha2 is not served")
        if not facts.runtime_found:
            why = Support.no(P, "the configured training runtime was not found")
            base = dict.fromkeys(C, why)
    if not facts.probed:
        base = {c: Support.unknown(P, NOT_PROBED) if a.source is P else a for c, a in base.items()}
    base.update(declared)
    return base


def _native_restart(facts: ClusterFacts) -> Support:
    """Yes when a derived TrainingRuntime can carry the JobSet failure policy (0010 §6)."""
    P = Source.PROBED
    if not facts.jobset:
        return Support.no(P, "JobSet is not served")
    if not facts.allowed.get("create trainingruntimes", False):
        return Support.no(P, "RBAC refuses creating trainingruntimes (the derived runtime)")
    if facts.message_patterns is None:
        return Support.unknown(P, "JobSet's OpenAPI document could not be read")
    if not facts.message_patterns:
        return Support.no(P, "JobSet has no onJobFailureMessagePatterns (needs v0.10+)")
    return Support.yes(P, "JobSet failurePolicy in a derived TrainingRuntime")
