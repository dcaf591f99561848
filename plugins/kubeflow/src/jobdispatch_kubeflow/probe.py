"""What a cluster can do, asked of the cluster: API discovery, the runtime, and RBAC.

A probe makes a fixed handful of requests: ``GET /apis`` (which API groups and versions are
served: Trainer, JobSet, Kueue), one GET of the configured runtime (its JobSet template says
whether the runtime restarts failed Jobs or reruns pods in place), and one
SelfSubjectAccessReview per verb the adapter needs. A job that names its own runtime has it read
at each plan (:func:`runtime_problem`). Under Kueue it also follows the LocalQueue
to its ClusterQueue, that queue's AdmissionChecks and the Lease of the controller answering
dispatch's check: whether a readmission is really gated (:func:`readmission_gate`, :func:`gate`).
Facts are kept for ``probe_ttl`` seconds per cluster (API server URL and namespace; the gate
also per LocalQueue), shared by the backends of one process, so a poll costs no probe.
Capabilities are computed from facts by a pure function. With ``probe = false`` nothing is
asked: :data:`UNPROBED` (Trainer and JobSet taken as served) stands in for the facts, and the
kit's :func:`~jobdispatch.kit.facts.unprobed` makes every answer resting on them ``unknown``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs
from jobdispatch.errors import DispatchError, Unauthorized
from jobdispatch.kit.facts import NOT_PROBED, FactsCache, unprobed
from jobdispatch.types import Capability, Source, Support, Tristate

from jobdispatch_kubeflow import admission
from jobdispatch_kubeflow.api import KINDS, Api
from jobdispatch_kubeflow.config import Settings

__all__ = [
    "LEASE_SLACK",
    "UNPROBED",
    "ClusterFacts",
    "GateObjects",
    "capabilities",
    "forget",
    "gate",
    "probe",
    "read_runtime",
    "readmission_gate",
    "runtime_kind",
    "runtime_problem",
    "with_runtime",
]

Obj = dict[str, Any]

#: The API group of each resource the adapter touches ("" is the core group).
_GROUP = {
    "trainjobs": "trainer.kubeflow.org",
    "trainingruntimes": "trainer.kubeflow.org",
    "jobsets": "jobset.x-k8s.io",
    "jobs": "batch",
    "workloads": "kueue.x-k8s.io",
    "pods": "",
    "nodes": "",
    "events": "",
}
#: What the adapter must be allowed to do, each as ``verb resource[/subresource]``.
_NEEDS = (
    "create trainjobs",
    "patch trainjobs",
    "delete trainjobs",
    "list trainjobs",
    "watch trainjobs",
    "list jobsets",
    "list jobs",
    "list pods",
    "get pods/log",
    "list nodes",
    "list events",
    "create trainingruntimes",
    "patch workloads",
)


def _review(need: str) -> tuple[str, str, str, str]:
    """The (verb, group, resource, subresource) an access review asks for ``need``."""
    verb, _, target = need.partition(" ")
    resource, _, sub = target.partition("/")
    return verb, _GROUP[resource], resource, sub


#: The (verb, group, resource, subresource) of each of :data:`_NEEDS`, by what it is for.
NEEDED: Mapping[str, tuple[str, str, str, str]] = {need: _review(need) for need in _NEEDS}


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


#: The facts of a cluster that was not asked (``probe = false``): Trainer and JobSet taken as
#: served so that the catalogue's answers show, and every probed answer made unknown.
UNPROBED = ClusterFacts(
    groups={"trainer.kubeflow.org": ("v1alpha1",), "jobset.x-k8s.io": ("v1alpha2",)},
    runtime_found=True,
    probed=False,
)

#: Facts per cluster and namespace, shared by every backend of the process.
_CACHE: FactsCache[tuple[str, str], ClusterFacts] = FactsCache()

#: The readmission gate of each LocalQueue, per cluster and namespace (:func:`gate`).
_GATES: FactsCache[tuple[str, str, str], Support] = FactsCache()


def forget() -> None:
    """Drop every cached probe, facts and gates (tests that change a cluster's answers)."""
    _CACHE.forget()
    _GATES.forget()


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


def gate(
    api: Api,
    settings: Settings,
    queue: str,
    *,
    key: str,
    facts: ClusterFacts,
    clock: Callable[[], datetime],
) -> Support:
    """Whether LocalQueue ``queue`` gates readmissions (:func:`readmission_gate`), probed and
    cached per ``key``, namespace and queue for ``probe_ttl``; ``clock`` judges the admission
    controller's Lease. No without Kueue served (``facts``); unknown for :data:`UNPROBED`."""
    if not facts.probed:
        return Support.unknown(Source.PROBED, NOT_PROBED)
    if not facts.kueue:
        return Support.no(Source.PROBED, "kueue.x-k8s.io is not served (Kueue absent)")
    return _GATES.get(
        (key, settings.namespace, queue),
        settings.probe_ttl,
        lambda: readmission_gate(_gate_objects(api, settings.namespace, queue), clock()),
    )


#: How long past a Lease's ``renewTime`` plus its duration its holder still counts as alive: the
#: probe's clock and the controller's are different hosts' (a missed renewal or two, and skew).
LEASE_SLACK = timedelta(seconds=30)


@attrs.frozen(kw_only=True)
class GateObjects:
    """What the probe read to tell whether a LocalQueue's readmissions are gated: each object
    as read, None when it does not exist. ``refused``: a read RBAC refused (then the answer is
    unknown, never a guess)."""

    queue: str
    namespace: str
    local_queue: Obj | None = None
    cluster_queue: Obj | None = None
    checks: Mapping[str, Obj | None] = attrs.field(factory=dict)
    leases: Mapping[str, Obj | None] = attrs.field(factory=dict)
    refused: str = ""


def _listed_checks(cluster_queue: Mapping[str, Any]) -> list[str]:
    """The AdmissionChecks a ClusterQueue lists: ``admissionChecks`` (names) or
    ``admissionChecksStrategy.admissionChecks`` (objects with a name)."""
    spec = cluster_queue.get("spec") or {}
    names_ = [str(n) for n in spec.get("admissionChecks") or ()]
    strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
    names_ += [str(c.get("name")) for c in strategy if c.get("name")]
    return names_


def _active(check: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (check.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Active" and cond.get("status") == "True":
            return dict(cond)
    return None


def _lease_alive(lease: Mapping[str, Any], now: datetime) -> tuple[bool, str]:
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    renewed = spec.get("renewTime")
    if not holder or not renewed:
        return False, "nobody holds it"
    try:
        at = datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    except ValueError:
        return False, f"its renewTime {renewed!r} cannot be read"
    duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 15))
    if now > at + duration + LEASE_SLACK:
        return False, f"last renewed {renewed} by {holder}"
    return True, f"held by {holder}"


def readmission_gate(objects: GateObjects, now: datetime) -> Support:
    """Whether an evicted TrainJob of the LocalQueue waits for dispatch's open before Kueue
    readmits it (spec 0012 §3): the LocalQueue names a ClusterQueue that lists an AdmissionCheck
    of dispatch's controller, marked Active, whose controller's Lease is held and renewed (as of
    ``now``, within :data:`LEASE_SLACK`). Pure. No where anything is missing, since Kueue then
    readmits by itself; unknown where RBAC refused a read, or the check names no Lease."""
    P = Source.PROBED
    where = f"LocalQueue {objects.namespace}/{objects.queue}"
    if objects.refused:
        return Support.unknown(P, f"RBAC refuses reading {objects.refused}")
    if objects.local_queue is None:
        return Support.no(P, f"{where} does not exist")
    cq_name = str((objects.local_queue.get("spec") or {}).get("clusterQueue") or "")
    if objects.cluster_queue is None:
        return Support.no(P, f"{where} names ClusterQueue {cq_name!r}, which does not exist")
    listed = _listed_checks(objects.cluster_queue)
    ours = [
        n
        for n in listed
        if ((objects.checks.get(n) or {}).get("spec") or {}).get("controllerName")
        == admission.CONTROLLER_NAME
    ]
    if not ours:
        shown = ", ".join(listed) if listed else "none"
        return Support.no(
            P,
            f"ClusterQueue {cq_name} of {where} lists no AdmissionCheck of "
            f"{admission.CONTROLLER_NAME} (its checks: {shown}): Kueue readmits an evicted "
            "TrainJob by itself",
        )
    why: list[str] = []
    for name in ours:
        active = _active(objects.checks[name] or {})
        if active is None:
            why.append(f"AdmissionCheck {name} is not Active (no controller has answered it)")
            continue
        named = admission.lease_of(str(active.get("message") or ""))
        if named is None:
            return Support.unknown(
                P, f"AdmissionCheck {name} names no controller Lease: cannot tell it is answered"
            )
        lease_ns, lease_name = named
        lease = objects.leases.get(f"{lease_ns}/{lease_name}")
        if lease is None:
            why.append(f"the Lease {lease_ns}/{lease_name} of its controller does not exist")
            continue
        alive, how = _lease_alive(lease, now)
        if alive:
            return Support.yes(
                P,
                f"ClusterQueue {cq_name} lists AdmissionCheck {name}, answered by "
                f"jobdispatch-kueue-admission (lease {lease_ns}/{lease_name} {how}): the check "
                "answers Ready only for a fresh open",
            )
        why.append(f"its controller's Lease {lease_ns}/{lease_name} lapsed ({how})")
    return Support.no(
        P,
        f"ClusterQueue {cq_name} of {where} lists dispatch's check, but no controller answers "
        f"it ({'; '.join(why)}): Kueue's readmission waits on nothing dispatch decides",
    )


def _gate_objects(api: Api, ns: str, queue: str) -> GateObjects:
    """Read LocalQueue → ClusterQueue → its AdmissionChecks → their controllers' Leases."""
    found = GateObjects(queue=queue, namespace=ns)
    what = "localqueues"
    try:
        local_queue = api.get("localqueues", ns, queue)
        found = attrs.evolve(found, local_queue=local_queue)
        if local_queue is None:
            return found
        what = "clusterqueues"
        cq_name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
        cluster_queue = api.get("clusterqueues", None, cq_name) if cq_name else None
        found = attrs.evolve(found, cluster_queue=cluster_queue)
        if cluster_queue is None:
            return found
        what = "admissionchecks"
        checks = {n: api.get("admissionchecks", None, n) for n in _listed_checks(cluster_queue)}
        found = attrs.evolve(found, checks=checks)
        what = "leases"
        leases: dict[str, Obj | None] = {}
        for check in checks.values():
            active = _active(check or {})
            named = admission.lease_of(str((active or {}).get("message") or ""))
            if named is not None:
                leases[f"{named[0]}/{named[1]}"] = api.get("leases", named[0], named[1])
        return attrs.evolve(found, leases=leases)
    except Unauthorized:
        return attrs.evolve(found, refused=what)


def runtime_kind(settings: Settings) -> str:
    """The resource the cluster entry's kind of training runtime is read as."""
    if settings.runtime.kind == "TrainingRuntime":
        return "trainingruntimes"
    return "clustertrainingruntimes"


def read_runtime(api: Api, settings: Settings, name: str) -> Obj | None:
    """The training runtime ``name`` of the cluster entry's kind (in its namespace for a
    TrainingRuntime); None when it does not exist. Raises Unauthorized when RBAC refuses."""
    kind = runtime_kind(settings)
    return api.get(kind, settings.namespace if KINDS[kind].namespaced else None, name)


def with_runtime(facts: ClusterFacts, runtime: Mapping[str, Any]) -> ClusterFacts:
    """``facts`` with the failure policy, ``backoffLimit`` and ``restartPolicy`` of
    ``runtime`` (a job's own) in place of the cluster entry's runtime's. Pure."""
    policy, limit, restart = _template_facts(runtime)
    return attrs.evolve(facts, failure_policy=policy, backoff_limit=limit, restart_policy=restart)


def runtime_problem(api: Api, settings: Settings, name: str) -> str:
    """Why a job may not name training runtime ``name`` (``[resources.kubeflow] runtime``):
    it does not exist, or RBAC refuses reading it (the adapter reads a job's runtime to derive
    one from it, as it reads the entry's); "" when it was read. One GET, asked at each plan,
    never cached: a runtime created after a refusal is found by the next plan."""
    where = settings.runtime.kind
    if where == "TrainingRuntime":
        where += f" in namespace {settings.namespace}"
    try:
        found = read_runtime(api, settings, name)
    except Unauthorized as exc:
        return f"names {where} {name!r}, which RBAC refuses reading ({exc})"
    if found is None:
        return (
            f"names {where} {name!r}, which does not exist (the cluster entry's runtime kind is "
            f"{settings.runtime.kind}: `kubectl get {runtime_kind(settings)}` lists them)"
        )
    return ""


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
        try:
            runtime = read_runtime(api, settings, settings.runtime.name)
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
    facts: ClusterFacts,
    declared: Mapping[Capability, Support],
    *,
    kueue_mode: bool = False,
    readmission: Support | None = None,
) -> dict[Capability, Support]:
    """Every capability from the facts, then the site's declarations over them.
    ``kueue_mode``: the backend submits through Kueue (spec 0012); ``readmission``: then, the
    probed gate of the LocalQueue in question (:func:`gate`)."""
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
            C.GPUS: Support.yes(
                K, "trainer.resourcesPerNode, as gpu_resource (nvidia.com/gpu unless named)"
            ),
            C.MEMORY_LIMIT: Support.yes(K, "trainer.resourcesPerNode memory, requests = limits"),
            C.CPUS_PER_PROC: Support.yes(K, "trainer.resourcesPerNode cpu, per node"),
            C.QUEUES: Support.no(
                K, "a LocalQueue per job needs a cluster entry submitting through Kueue (kueue)"
            ),
            C.ACCOUNTS: Support.no(K, "Kubernetes has no accounts or QoS to charge a job to"),
            C.NODE_CONSTRAINTS: Support.yes(K, "a nodeSelector of key=value labels"),
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
            base[C.QUEUES] = Support.yes(K, "the job's LocalQueue, kueue.x-k8s.io/queue-name")
            base[C.READMISSION_GATE] = readmission or Support.unknown(
                P, "the LocalQueue's ClusterQueue and its admission checks were not read"
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
        base = unprobed(base)
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
