"""The conformance driver for the real control plane built by tools/kube/up, and its gate.

It imports the conformance package, so it needs the ``testing`` extra:
``pip install jobdispatch-kubeflow[testing]``; nothing in the adapter itself imports it.

The control plane runs kwok as every kubelet, with stages that end a Running pod when the test
annotates it (``dispatch.test/exit-code=N``, ``dispatch.test/reason=OOMKilled``). The driver uses
the admin identity (``KUBECONFIG``, for test set-up only: annotating pods, deleting nodes) and
never the adapter's; the adapter under test uses its own token identity.

What the driver cannot cause says so (CannotDrive), and the checks that need it are skipped
with that reason: a launch failure (kwok pulls no image). A time limit is set at submission
(``ending_spec``: ``activeDeadlineSeconds`` is immutable once the TrainJob exists, and the
Trainer enforces it by itself, ``DeadlineExceeded``); a scheduler preemption is a preemptor pod
of a higher PriorityClass pinned to the victim's node, asking the GPUs that node has free plus
the victim's (``DisruptionTarget`` ``PreemptionByScheduler``). Output: kwok runs no container, so
a pod has no log of its own: tools/kube/up has kwok serve one file as every container's log,
and ``emit_output`` appends to it (0010 §7).

``RealNodeDriver`` drives the real node (tools/kube/up --real-node) instead, where pods run real
processes: they exit when told, allocate until the OOM killer stops them, and are preempted by
the scheduler for a pod of a higher priority (0010 §10).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Conflict, NotFound, Unauthorized
from jobdispatch.spi import Backend, ObjectRef
from jobdispatch.testing import eventually
from jobdispatch.types import Capability, JobSpec, Resources, Support, Tristate
from jobdispatch_conformance.adapter import CannotDrive, Driver
from jobdispatch_conformance.services import require_service as require

from jobdispatch_kubeflow import job_settings, manifest, names, placement, probe
from jobdispatch_kubeflow.api import AlreadyExists, Api, KubeApi
from jobdispatch_kubeflow.backend import KubeflowBackend
from jobdispatch_kubeflow.config import Runtime, Settings

__all__ = [
    "KubeDriver",
    "RealNodeDriver",
    "cluster_problem",
    "create_preemptor",
    "forget_receipts",
    "gated",
    "kubectl",
    "own_node",
    "place_on_own_node",
    "real_node_problem",
    "remove_jobs",
    "require",
    "settings",
]

TEST_RUNTIME = "dispatch-torch-test"
#: The time limit a ``time_out`` object is created with: long enough to be seen running on a
#: loaded machine (kwok runs a pod within seconds of its scheduling), short for a test.
TIME_LIMIT = timedelta(seconds=45)
#: The PriorityClass of the preemptor pods ``preempt`` makes (above every test pod's 0).
PREEMPTOR_CLASS = "jobdispatch-conformance-preemptor"
#: The label every preemptor pod carries.
PREEMPTOR_LABEL = "dispatch.test/preemptor"
#: How long a stopped TrainJob's receipt is left to the test that made it before
#: ``forget_receipts`` may release it: far more than any check reads it for.
RECEIPT_GRACE = timedelta(minutes=10)


def _gpus(pod: Mapping[str, Any]) -> int:
    """The GPUs a pod asks, over its containers (requests, else limits)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or ():
        res = container.get("resources") or {}
        value = (res.get("requests") or {}).get(job_settings.GPU_RESOURCE) or (
            res.get("limits") or {}
        ).get(job_settings.GPU_RESOURCE)
        total += int(placement.quantity(value or 0) or 0)
    return total


def settings(**overrides: object) -> Settings:
    """The adapter's settings for the control plane tools/kube/up started."""
    values: dict[str, object] = {
        "kubeconfig": os.environ.get("JOBDISPATCH_KUBE_ADAPTER_KUBECONFIG"),
        "namespace": os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch"),
        "token_file": os.environ.get("JOBDISPATCH_KUBE_TOKEN_FILE"),
        "runtime": Runtime(name=TEST_RUNTIME),
        "probe_ttl": 30.0,
        # dispatch-torch-test has backoffLimit 0 but leaves the pods' restartPolicy to JobSet's
        # default, OnFailure: a real kubelet could rerun a rank in place. kwok never restarts a
        # container, so the tests accept it (0010 §6).
        "allow_rank_restart": True,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def kubectl(*args: str, stdin: str | None = None) -> str:
    """``kubectl ARGS`` with the admin identity of the control plane tools/kube/up started (for
    test set-up only); its output, or the test fails naming the call and what kubectl said."""
    kube = Path(os.environ["JOBDISPATCH_KUBE_BIN"]) / "kubectl"
    done = subprocess.run(
        [str(kube), *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def create_preemptor(
    namespace: str,
    queue: str,
    *,
    prefix: str,
    nodes: int,
    command: list[str],
    resources: dict[str, Any],
) -> str:
    """Create a TrainJob that is not dispatch's, at high priority on the Kueue ``queue``, on the
    test runtime, asking ``resources`` a node: what the Kueue tests preempt a dispatch job with.
    Its name (``prefix`` and a random tail)."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "labels": {
                "kueue.x-k8s.io/queue-name": queue,
                "kueue.x-k8s.io/priority-class": "jobdispatch-high",
            },
        },
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": TEST_RUNTIME,
            },
            "trainer": {
                "numNodes": nodes,
                "image": "registry.invalid/x:1",
                "command": command,
                "resourcesPerNode": resources,
            },
        },
    }
    kubectl("-n", namespace, "create", "-f", "-", stdin=json.dumps(body))
    return name


def cluster_problem() -> str | None:
    """Why the real control plane cannot be used, or None when it answers."""
    kubeconfig = os.environ.get("JOBDISPATCH_KUBE_ADAPTER_KUBECONFIG")
    if not kubeconfig or not os.environ.get("KUBECONFIG"):
        return (
            'no Kubernetes control plane: run eval "$(tools/kube/up)" first '
            "(JOBDISPATCH_KUBE_ADAPTER_KUBECONFIG and KUBECONFIG are not set)"
        )
    if not Path(kubeconfig).exists():
        return f"the adapter kubeconfig {kubeconfig} does not exist"
    server = os.environ.get("JOBDISPATCH_KUBE_SERVER", "https://127.0.0.1:6443")
    try:
        import ssl

        context = ssl.create_default_context(cafile=os.environ.get("JOBDISPATCH_KUBE_CA_FILE"))
        with urllib.request.urlopen(f"{server}/livez", context=context, timeout=5):  # noqa: S310
            pass
    except Exception as exc:
        if "401" in str(exc) or "403" in str(exc):
            return None
        return f"the Kubernetes API at {server} does not answer: {exc}"
    return None


def gated(backend: KubeflowBackend, within: float = 120.0) -> Support:
    """Wait until ``backend`` (in Kueue mode) answers ``readmission-gate: yes``: its LocalQueue's
    check is answered by a controller that has named its Lease (a controller just started
    takes a round or two). Each look probes afresh. The answer, or AssertionError past
    ``within`` naming the last one."""

    def look() -> Support:
        probe.forget()
        return backend.capabilities()[Capability.READMISSION_GATE]

    return eventually(
        look, "readmission-gate: yes", holds=lambda a: a.answer is Tristate.YES, within=within
    )


def forget_receipts(older_than: timedelta = RECEIPT_GRACE) -> int:
    """Remove the receipt finalizer of every TrainJob of dispatch's in the test namespace that
    was stopped more than ``older_than`` ago (the suite stops what it starts; the receipts
    would stay for ever). How many.

    Only the old ones: another test session on the same plane may be reading a receipt it has
    just made (``test_stop_gated_never_runs`` once met ``NotFound`` for its stopped TrainJob,
    the receipt released under it by a session that ended meanwhile). A younger one is left
    to the next session."""
    backend = KubeflowBackend(settings())
    try:
        items, _ = backend.api.list(
            "trainjobs", backend.namespace, label_selector=f"{names.MANAGED}=true"
        )
        done = 0
        now = datetime.now(UTC)
        for obj in items:
            meta = obj.get("metadata") or {}
            stopped = meta.get("deletionTimestamp")
            if not stopped or names.FINALIZER not in (meta.get("finalizers") or ()):
                continue
            if now - datetime.fromisoformat(str(stopped)) < older_than:
                continue
            backend.forget(names.ref_of(backend.namespace, str(meta["name"])))
            done += 1
        return done
    finally:
        backend.close()


def remove_jobs(backend: KubeflowBackend, jobs: Iterable[str], reason: str) -> None:
    """Stop every object of each of ``jobs`` and remove its receipt, so that its TrainJob goes
    now: the teardown of a test that made them on a plane other sessions share."""
    for job in jobs:
        for obs in backend.find(job).objects:
            backend.stop(obs.ref, reason)
            backend.forget(obs.ref)


def own_node(
    admin: Api,
    name: str,
    key: str,
    value: str,
    *,
    resources: Mapping[str, str] | None = None,
    pods: int | None = None,
) -> None:
    """Create a kwok node of a test's own, made like the plane's first schedulable kwok node,
    labelled and tainted (NoSchedule) ``key=value``: only pods that select and tolerate it land
    there, and no other test's pod does. ``resources`` replaces its allocatable and capacity;
    ``pods`` how many pods it holds. The caller deletes it."""
    like = next(
        n
        for n in admin.list("nodes", None, label_selector="type=kwok")[0]
        if not (n.get("spec") or {}).get("unschedulable")
    )
    meta = like["metadata"]
    status = {
        k: dict(resources) if resources is not None else dict(v)
        for k, v in (like.get("status") or {}).items()
        if k in ("allocatable", "capacity")
    }
    if pods is not None:
        for part in status.values():
            part["pods"] = str(pods)
    admin.create(
        "nodes",
        None,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    **(meta.get("labels") or {}),
                    "kubernetes.io/hostname": name,
                    key: value,
                },
                "annotations": meta.get("annotations") or {},
            },
            "spec": {"taints": [{"key": key, "value": value, "effect": "NoSchedule"}]},
            "status": status,
        },
    )


def place_on_own_node(
    admin: Api,
    namespace: str,
    name: str,
    key: str,
    value: str,
    *,
    manager: str = "dispatch.test/placement",
) -> None:
    """Put the pods of TrainJob ``name`` on the node :func:`own_node` made for ``key=value``,
    before the TrainJob is opened: a runtime patch of ``manager`` (the test's own, never the
    adapter's) adds the node selector and the toleration of the node's taint."""
    tj = admin.get("trainjobs", namespace, name)
    if tj is None:
        raise NotFound(f"no TrainJob {namespace}/{name} to place")
    pod = {
        "nodeSelector": {key: value},
        "tolerations": [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}],
    }
    placement = {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {"spec": manifest.trainer_job({"spec": {"template": {"spec": pod}}})}
        },
    }
    patches = [*tj["spec"]["runtimePatches"], placement]
    admin.patch("trainjobs", namespace, name, {"spec": {"runtimePatches": patches}})


class KubeDriver(Driver):
    """Makes the control plane do things, with the admin identity."""

    def __init__(self, backend: KubeflowBackend) -> None:
        self.backend = backend
        self.admin = KubeApi(kubeconfig=os.environ.get("KUBECONFIG"))
        self.namespace = backend.namespace
        #: Nodes lose_node deleted, as they were, for cleanup to create again.
        self.lost: list[dict[str, Any]] = []
        #: Preemptor pods preempt made, for cleanup to delete.
        self.preemptors: list[str] = []

    def now(self) -> datetime:
        return datetime.now(UTC)

    def base_spec(self) -> JobSpec:
        return JobSpec(command=("sleep", "3600"), nodes=1)

    def resource_spec(self) -> JobSpec:
        """A GPU on a kwok node, selected by its label, with a label and a toleration of the
        job file's own: what the dry run should show."""
        return JobSpec(
            command=("sleep", "3600"),
            nodes=1,
            resources=Resources(
                gpus_per_node=1,
                constraints=("type=kwok",),
                adapter={"kubeflow": {"labels": ("team=conformance",), "tolerations": ("spot",)}},
            ),
        )

    def created(self, ref: ObjectRef) -> str:
        """The TrainJob as the API server holds it, without what the server and others write
        (its ids, times and field managers, the status, the ``managedBy`` default, the runtime
        patches of other managers, such as the empty one Kueue's webhook adds, and each patch's
        time), in the form ``preview`` prints."""
        namespace, name = names.split_ref(ref)
        obj = self.admin.get("trainjobs", namespace, name)
        if obj is None:
            raise CannotDrive("created", f"no TrainJob {ref}")
        obj.pop("status", None)
        for key in ("creationTimestamp", "generation", "managedFields", "resourceVersion", "uid"):
            obj["metadata"].pop(key, None)
        spec = obj["spec"]
        if spec.get("managedBy") == "trainer.kubeflow.org/trainjob-controller":
            del spec["managedBy"]
        spec["runtimePatches"] = [
            {k: v for k, v in patch.items() if k != "time"}
            for patch in spec.get("runtimePatches") or []
            if patch.get("manager") == names.PATCH_MANAGER
        ]
        return json.dumps(obj, indent=2, sort_keys=True) + "\n"

    def unknown_ref(self) -> ObjectRef:
        return names.ref_of(self.namespace, "jd-nosuchjob-9-9")

    def _pods(self, ref: ObjectRef, timeout: float = 120.0) -> list[dict[str, object]]:
        """The Running pods of ``ref``'s current attempt (waiting for one to run)."""
        _, name = names.split_ref(ref)
        end = time.monotonic() + timeout
        while True:
            pods, _ = self.admin.list(
                "pods", self.namespace, label_selector=f"{names.JOBSET_NAME}={name}"
            )
            live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            if live or time.monotonic() > end:
                return live
            time.sleep(1)

    def _running_pods(self, ref: ObjectRef, operation: str) -> list[dict[str, object]]:
        """The Running pods of ``ref`` (:meth:`_pods`); CannotDrive naming ``operation`` when
        none runs, since every operation on a pod needs one."""
        pods = self._pods(ref)
        if not pods:
            raise CannotDrive(operation, f"{ref} has no running pod")
        return pods

    def _running_pod_names(self, ref: ObjectRef, operation: str) -> list[str]:
        """The names of :meth:`_running_pods`."""
        found = []
        for pod in self._running_pods(ref, operation):
            meta = pod["metadata"]
            assert isinstance(meta, dict)
            found.append(str(meta["name"]))
        return found

    def _annotate(self, ref: ObjectRef, **annotations: str) -> None:
        for name in self._running_pod_names(ref, "annotate"):
            self.admin.patch(
                "pods", self.namespace, name, {"metadata": {"annotations": annotations}}
            )

    def complete(self, ref: ObjectRef) -> None:
        self._annotate(ref, **{"dispatch.test/exit-code": "0"})

    def fail(self, ref: ObjectRef, code: int) -> None:
        self._annotate(ref, **{"dispatch.test/exit-code": str(code)})

    def oom(self, ref: ObjectRef) -> None:
        self._annotate(
            ref, **{"dispatch.test/exit-code": "137", "dispatch.test/reason": "OOMKilled"}
        )

    def lose_node(self, ref: ObjectRef) -> None:
        """Delete the node under the object's pod: PodGC fails the pod (DeletionByPodGC).
        tools/kube/up re-creates missing nodes on its next run."""
        pods = self._running_pods(ref, "lose_node")
        spec = pods[0]["spec"]
        assert isinstance(spec, dict)
        name = str(spec["nodeName"])
        node = self.admin.get("nodes", None, name)
        if node is not None:
            self.lost.append(node)
        self.admin.delete("nodes", None, name, propagation="Background")

    def cleanup(self) -> None:
        """Delete the preemptors this driver made, and create again every node it deleted
        (kwok takes them over again), so the next check has somewhere to run."""
        while self.preemptors:
            name = self.preemptors.pop()
            try:
                self.admin.delete("pods", self.namespace, name, propagation="Background")
            except Exception as exc:  # reported, never hidden
                print(f"could not delete preemptor {name}: {exc}")
        while self.lost:
            node = self.lost.pop()
            meta = node.get("metadata") or {}
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": meta.get("name"),
                    "labels": meta.get("labels") or {},
                    "annotations": meta.get("annotations") or {},
                },
                "spec": {k: v for k, v in (node.get("spec") or {}).items() if k != "taints"},
                "status": {
                    k: v
                    for k, v in (node.get("status") or {}).items()
                    if k in ("allocatable", "capacity")
                },
            }
            try:
                self.admin.create("nodes", None, body)
            except Exception as exc:  # reported, never hidden: the next up re-creates it too
                print(f"could not re-create node {meta.get('name')}: {exc}")

    def evict(self, ref: ObjectRef) -> None:
        """Evict the object's pods through the Eviction API, as a drain would: the pods get
        ``DisruptionTarget`` ``EvictionByEvictionAPI`` (preempted, by an actor)."""
        for name in self._running_pod_names(ref, "evict"):
            self.admin.raw(
                "POST",
                f"/api/v1/namespaces/{self.namespace}/pods/{name}/eviction",
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": self.namespace},
                },
            )

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        """Append ``data`` to the file kwok serves as every container's log (tools/kube/up's
        ClusterLogs), one CRI log line per line: kwok runs no process, so this is how a pod
        "writes"."""
        if stream != "stdout":
            raise CannotDrive("emit_output", "a pod log has one stream")
        state = os.environ.get("JOBDISPATCH_KUBE_STATE", "/var/lib/jobdispatch-kube")
        # kwok reads the file in the CRI log format: "<RFC3339Nano> stdout F <text>" per line.
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z").encode()
        lines = b"".join(stamp + b" stdout F " + line + b"\n" for line in data.splitlines() if line)
        with (Path(state) / "pod.log").open("ab") as log:
            log.write(lines)

    def ending_spec(self, operation: str) -> JobSpec:
        """A time limit at submission for ``time_out`` (the Trainer ends the run by itself);
        a GPU for ``preempt`` (what a preemptor displaces it by)."""
        if operation == "time_out":
            return attrs.evolve(self.base_spec(), time_limit=TIME_LIMIT)
        if operation == "preempt":
            return attrs.evolve(self.base_spec(), resources=Resources(gpus_per_node=1))
        return self.base_spec()

    def preempt(self, ref: ObjectRef) -> None:
        """Have kube-scheduler preempt the object's pod: a pod of PriorityClass
        :data:`PREEMPTOR_CLASS`, pinned to the victim's node, asking the GPUs free there plus
        the victim's, so that it fits only once the victim is gone (every other pod stays)."""
        pods = self._running_pods(ref, "preempt")
        victim: Mapping[str, Any] = pods[0]
        asked = _gpus(victim)
        if not asked:
            raise CannotDrive("preempt", f"{ref}'s pod asks no GPU for a preemptor to displace")
        node_name = str((victim.get("spec") or {}).get("nodeName") or "")
        node = self.admin.get("nodes", None, node_name)
        if node is None:
            raise CannotDrive("preempt", f"the node {node_name} of {ref}'s pod is gone")
        allocatable = placement.quantity(
            ((node.get("status") or {}).get("allocatable") or {}).get(job_settings.GPU_RESOURCE, 0)
        )
        on_node, _ = self.admin.list("pods", None, field_selector=f"spec.nodeName={node_name}")
        used = sum(
            _gpus(p)
            for p in on_node
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        free = int(allocatable or 0) - used
        if self.admin.get("priorityclasses", None, PREEMPTOR_CLASS) is None:
            with contextlib.suppress(AlreadyExists):
                self.admin.create(
                    "priorityclasses",
                    None,
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": PREEMPTOR_CLASS},
                        "value": 1_000_000,
                        "description": "dispatch's conformance preemptor",
                    },
                )
        gpus = str(free + asked)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "jd-preemptor-",
                "labels": {PREEMPTOR_LABEL: "true"},
            },
            "spec": {
                "priorityClassName": PREEMPTOR_CLASS,
                "nodeSelector": {manifest.HOSTNAME_LABEL: node_name},
                "containers": [
                    {
                        "name": "preemptor",
                        "image": "example.invalid/preemptor:1",
                        "resources": {
                            "requests": {job_settings.GPU_RESOURCE: gpus},
                            "limits": {job_settings.GPU_RESOURCE: gpus},
                        },
                    }
                ],
            },
        }

        def create() -> str | None:
            """The preemptor's name; None while the API server's Priority admission has not
            yet seen a class just created (it reads them from a cache)."""
            try:
                made = self.admin.create("pods", self.namespace, body)
            except Unauthorized as exc:
                if "no PriorityClass" in str(exc):
                    return None
                raise
            return str(made["metadata"]["name"])

        self.preemptors.append(eventually(create, f"a preemptor pod of {PREEMPTOR_CLASS}"))

    def time_out(self, ref: ObjectRef) -> None:
        """Nothing to do but wait: the TrainJob was created with ``activeDeadlineSeconds``
        (``ending_spec``), and the Trainer fails it ``DeadlineExceeded`` by itself."""
        _, name = names.split_ref(ref)
        obj = self.admin.get("trainjobs", self.namespace, name)
        if obj is None or not (obj.get("spec") or {}).get("activeDeadlineSeconds"):
            raise CannotDrive("time_out", f"{ref} was not created with a time limit")

    def launch_fail(self, ref: ObjectRef) -> None:
        raise CannotDrive("launch_fail", "kwok pulls no image, so no pull can fail")

    def unreachable_backend(self) -> Backend:
        folder = Path(tempfile.mkdtemp(prefix="jd-kube-"))
        config = folder / "kubeconfig"
        config.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: nowhere\n  cluster:\n"
            "    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\n"
            "users:\n- name: u\n  user: {token: none}\ncontexts:\n- name: c\n  context:\n"
            "    cluster: nowhere\n    user: u\ncurrent-context: c\n"
        )
        return KubeflowBackend(settings(kubeconfig=str(config), token_file=None, probe_ttl=0))

    def unauthorized_backend(self) -> Backend:
        return KubeflowBackend(
            settings(token_file=None, probe_ttl=0), token=lambda: "not-a-valid-token"
        )


def real_node_problem() -> str | None:
    """Why the real node (tools/kube/up --real-node) cannot be used, or None when it is Ready."""
    problem = cluster_problem()
    if problem is not None:
        return problem
    for var in (
        "JOBDISPATCH_KUBE_REAL_NODE_NAME",
        "JOBDISPATCH_KUBE_REAL_RUNTIME",
        "JOBDISPATCH_KUBE_REAL_IMAGE",
        "JOBDISPATCH_KUBE_REAL_SCRIPTS",
        "JOBDISPATCH_KUBE_REAL_CHECKPOINTS",
    ):
        if not os.environ.get(var):
            return f'no real node: run eval "$(tools/kube/up --real-node)" first ({var} is not set)'
    name = os.environ["JOBDISPATCH_KUBE_REAL_NODE_NAME"]
    admin = KubeApi(kubeconfig=os.environ.get("KUBECONFIG"))
    try:
        node = admin.get("nodes", None, name)
    finally:
        admin.close()
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return f"the real node {name} is not Ready"
    return None


#: The word a pod of the real-node profile waits for: REAL_NODE_WORKER reads it from the file
#: named after its TrainJob, in the checkpoint hostPath every pod of the real node mounts.
REAL_NODE_ORDERS = "conformance-orders"
#: The program of every pod of the real-node profile: it waits for the driver's word and obeys
#: it (exit N, or allocate until the kernel's OOM killer stops it). Python as PID 1, no torchrun:
#: the container's exit code is the program's own.
REAL_NODE_WORKER = f"""
import os, sys, time
from pathlib import Path
order = Path("/checkpoints/{REAL_NODE_ORDERS}") / os.environ["JOBDISPATCH_OBJECT"].replace("/", "_")
while not order.exists():
    time.sleep(0.5)
word = order.read_text().split()
if word[0] == "exit":
    sys.exit(int(word[1]))
hog = []
while True:
    block = bytearray(32 << 20)
    block[::4096] = b"x" * len(block[::4096])
    hog.append(block)
"""
#: The time limit ``time_out`` objects on the real node are created with: a real pod starts
#: within seconds, but the check must see it running before the Trainer ends it.
REAL_NODE_TIME_LIMIT = timedelta(seconds=60)
#: The PriorityClass of the preemptor the real-node driver schedules.
PREEMPTOR_PRIORITY = "jobdispatch-conformance-preemptor"


def _millicores(quantity: str) -> int:
    """A CPU quantity (``2``, ``1500m``, ``0.5``) in millicores."""
    text = str(quantity)
    if text.endswith("m"):
        return int(text[:-1])
    return round(float(text) * 1000)


class RealNodeDriver(KubeDriver):
    """The conformance driver for the real node (tools/kube/up --real-node): the pods run a real
    process, so endings are real ones.

    - complete, fail: the pod's program exits with the code it is told (REAL_NODE_WORKER);
    - oom: it allocates past the pod's 256 MiB limit, and the kernel kills it;
    - preempt: a pod of a higher PriorityClass asking for the node's free CPU and the object's,
      which the scheduler makes room for by preempting the object's pods
      (``PreemptionByScheduler``);
    - time_out: the TrainJob is created with a time limit (:data:`REAL_NODE_TIME_LIMIT`), and
      the Trainer ends the real process at its deadline (``DeadlineExceeded``);
    - a program that cannot start: the container runtime's own failure.

    Not driven, each for the reason its method gives: losing the node, and a launch failure of
    an object already running.
    """

    def __init__(self, backend: KubeflowBackend) -> None:
        super().__init__(backend)
        self.orders = Path(os.environ["JOBDISPATCH_KUBE_REAL_CHECKPOINTS"]) / REAL_NODE_ORDERS
        self.orders.mkdir(exist_ok=True)
        self.preemptors: list[str] = []

    def base_spec(self) -> JobSpec:
        return JobSpec(
            command=("python3", "-c", REAL_NODE_WORKER),
            nodes=1,
            resources=Resources(cpus_per_proc=1, memory_per_node_mib=256),
        )

    def ending_spec(self, operation: str) -> JobSpec:
        """A time limit at submission for ``time_out`` (as on kwok, longer: the real pod must
        be seen running first); else the plain spec: the real node has no GPU, and its
        preemptor displaces the object by CPU (:meth:`preempt`), so the kwok profile's GPU for
        ``preempt`` would leave the object unschedulable for ever."""
        if operation == "time_out":
            return attrs.evolve(self.base_spec(), time_limit=REAL_NODE_TIME_LIMIT)
        return self.base_spec()

    def _order(self, ref: ObjectRef, word: str) -> None:
        self._running_pods(ref, "order")
        path = self.orders / str(ref).replace("/", "_")
        partial = path.with_name(path.name + ".partial")
        partial.write_text(word)
        partial.replace(path)

    def complete(self, ref: ObjectRef) -> None:
        self._order(ref, "exit 0")

    def fail(self, ref: ObjectRef, code: int) -> None:
        self._order(ref, f"exit {code}")

    def oom(self, ref: ObjectRef) -> None:
        self._order(ref, "allocate")

    def preempt(self, ref: ObjectRef) -> None:
        pods = self._running_pods(ref, "preempt")
        spec = pods[0]["spec"]
        assert isinstance(spec, dict)
        cpu = self._room_with(str(spec["nodeName"]), pods)
        with contextlib.suppress(Conflict):  # made by an earlier preemption
            self.admin.raw(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": PREEMPTOR_PRIORITY},
                    "value": 1_000_000,
                    "description": "dispatch's conformance suite: a pod that preempts",
                },
            )
        name = f"jd-preemptor-{len(self.preemptors)}-{int(time.time())}"
        container = dict(spec["containers"][0])
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "priorityClassName": PREEMPTOR_PRIORITY,
                "nodeSelector": spec.get("nodeSelector") or {},
                "tolerations": spec.get("tolerations") or [],
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "preemptor",
                        "image": container["image"],
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sleep", "600"],
                        "resources": {"requests": {"cpu": cpu}},
                    }
                ],
            },
        }
        self.admin.create("pods", self.namespace, body)
        self.preemptors.append(name)

    def _room_with(self, node_name: str, victims: list[dict[str, object]]) -> str:
        """The CPU the node has free plus what ``victims`` ask for, in millicores: a pod that
        asks for it fits only once they are gone. No more, so that of the pods other tests run
        on the shared node the scheduler needs none; among pods of one priority it preempts
        the latest started, which the object's are."""
        node = self.admin.get("nodes", None, node_name) or {}
        allocatable = ((node.get("status") or {}).get("allocatable") or {}).get("cpu")
        if not allocatable:
            raise CannotDrive("preempt", f"node {node_name} reports no allocatable CPU")
        on_node, _ = self.admin.list("pods", None, field_selector=f"spec.nodeName={node_name}")
        mine = {str(p["metadata"].get("name")) for p in victims if isinstance(p["metadata"], dict)}
        asked = 0
        theirs = 0
        for pod in on_node:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            milli = sum(
                _millicores(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
                for c in (pod.get("spec") or {}).get("containers") or ()
            )
            asked += milli
            if pod["metadata"]["name"] in mine:
                theirs += milli
        if theirs == 0:
            raise CannotDrive("preempt", "the object's pods ask for no CPU to make room from")
        return f"{_millicores(allocatable) - asked + theirs}m"

    def cleanup(self) -> None:
        super().cleanup()
        while self.preemptors:
            self.admin.delete(
                "pods", self.namespace, self.preemptors.pop(), propagation="Background"
            )

    def missing_program(self) -> JobSpec:
        return self.spec_without_program()

    def lose_node(self, ref: ObjectRef) -> None:
        """Not driven: the one real node is shared. Deleting its Node object makes PodGC delete
        every pod bound to it, other tests' too, and its kubelet (v1.36) never registers again
        once it has (``registrationCompleted``, pkg/kubelet/kubelet_node_status.go): the node
        would stay gone until its kubelet restarted. Stopping the kubelet instead ends every
        pod on the node as well, after the taint manager's five minutes. The evidence of a
        lost node is the API server's (PodGC's ``DeletionByPodGC``), which the kwok profile
        drives."""
        raise CannotDrive(
            "lose_node",
            "deleting the one shared real node ends every test's pods on it, and its kubelet "
            "never registers the Node again without a restart (kwok's profile drives it)",
        )

    def launch_fail(self, ref: ObjectRef) -> None:
        """Not driven: the object is running, so its containers have launched; a launch that
        fails is a pod's first, driven here as a program that cannot start
        (``test_program_that_cannot_start_is_launch_failed``) and in tests/test_real_node.py
        as an image that cannot be found."""
        raise CannotDrive(
            "launch_fail",
            "a running object's containers have launched; launch failures of a pod's first "
            "start are test_program_that_cannot_start_is_launch_failed's",
        )

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        raise CannotDrive("emit_output", "the API server cannot reach the real node's kubelet")
