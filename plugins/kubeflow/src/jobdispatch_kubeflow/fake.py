"""An in-memory stand-in for the API server's REST verbs, for unit tests, the benchmark, and the
conformance suite where no control plane runs (:class:`FakeCluster`, :class:`FakeDriver`).

It stores objects as given and answers list, get, create, merge patch and delete the way the API
server does for what the adapter relies on: label selectors (``k=v`` and ``k in (a,b)``),
``resourceVersion`` checks on patch (409 on a stale one), 409 AlreadyExists on create, and
finalizers that keep a deleted object readable with its ``deletionTimestamp``. No controller
runs: a test sets the objects' status itself. Every request is counted like :class:`KubeApi`.
:class:`FakeDriver` imports the conformance package: ``pip install jobdispatch-kubeflow[testing]``.
"""

from __future__ import annotations

import builtins
import copy
import io
import re
import threading
from collections import Counter
from collections.abc import Iterator
from typing import IO, Any

from jobdispatch.errors import Conflict, NotFound

from jobdispatch_kubeflow.api import AlreadyExists
from jobdispatch_kubeflow.manifest import trainer_job

__all__ = ["TEST_RUNTIME_OBJECT", "FakeApi", "matches"]

Obj = dict[str, Any]

#: The ClusterTrainingRuntime the tests' runtime is, as tools/kube/up applies it, for an
#: in-memory API to hold: one replicated job, "node", whose pods never restart in place.
TEST_RUNTIME_OBJECT: Obj = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "dispatch-torch-test"},
    "spec": {
        "template": {
            "spec": trainer_job(
                {"spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never"}}}}
            )
        }
    },
}

_IN = re.compile(r"^\s*([^\s!=]+)\s+in\s+\(([^)]*)\)\s*$")


def matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy a selector of ``k=v``, ``k in (a,b)`` and bare ``k`` terms."""
    if not selector:
        return True
    terms, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    terms.append(cur)
    for term in terms:
        m = _IN.match(term)
        if m:
            if labels.get(m[1]) not in {v.strip() for v in m[2].split(",")}:
                return False
            continue
        key, eq, value = term.partition("=")
        if not eq:  # a bare key: the label exists, whatever its value
            if key.strip() not in labels:
                return False
            continue
        if labels.get(key.strip()) != value.strip():
            return False
    return True


def _merge(target: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeApi:
    """Objects by (kind, namespace, name); see the module docstring."""

    #: Its watch streams nothing (controllers here change objects in place, unseen): a
    #: backend over it lists on every poll rather than follow the kinds (``Api.streams``).
    streams = False

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.requests: Counter[str] = Counter()
        self.logs: dict[str, bytes] = {}
        self.groups: dict[str, tuple[str, ...]] = {
            "trainer.kubeflow.org": ("v1alpha1",),
            "jobset.x-k8s.io": ("v1alpha2",),
        }
        self.allowed = True
        self._version = 100
        #: One lock for every call: supervisors in threads share one fake (the racing tests).
        self.lock = threading.RLock()

    def __repr__(self) -> str:
        return f"FakeApi({id(self)})"

    def _bump(self, obj: Obj) -> None:
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)

    def _gate(self, method: str) -> None:
        """Before a read is answered: nothing here; :class:`FakeCluster` refuses it when the
        stand-in cluster is unreachable or the identity unauthorized."""

    def put(self, kind: str, namespace: str | None, obj: Obj) -> Obj:
        """Store ``obj`` as a controller would have made it (no request counted)."""
        obj = copy.deepcopy(obj)
        self._bump(obj)
        self.objects[(kind, namespace, obj["metadata"]["name"])] = obj
        return obj

    def list(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Obj], str]:
        with self.lock:
            self._gate("LIST")
            self.requests[f"LIST {kind}"] += 1
            items = []
            for (k, ns, _), obj in sorted(self.objects.items(), key=lambda kv: str(kv[0])):
                if k != kind or (namespace is not None and ns != namespace):
                    continue
                if not matches(label_selector, (obj.get("metadata") or {}).get("labels") or {}):
                    continue
                if field_selector:
                    key, _, value = field_selector.partition("=")
                    if (
                        key == "involvedObject.name"
                        and (obj.get("involvedObject") or {}).get("name") != value
                    ):
                        continue
                items.append(copy.deepcopy(obj))
            return items, str(self._version)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        with self.lock:
            self._gate("GET")
            self.requests[f"GET {kind}"] += 1
            obj = self.objects.get((kind, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def create(self, kind: str, namespace: str | None, body: Obj) -> Obj:
        self.requests[f"POST {kind}"] += 1
        key = (kind, namespace, body["metadata"]["name"])
        if key in self.objects:
            raise AlreadyExists(f"{kind} {key[2]} already exists")
        obj = copy.deepcopy(body)
        self._bump(obj)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def patch(self, kind: str, namespace: str | None, name: str, body: Obj) -> Obj:
        self.requests[f"PATCH {kind}"] += 1
        if kind.endswith("/status"):
            # The status subresource: the same object; only its status is written.
            kind = kind.removesuffix("/status")
            body = {"metadata": body.get("metadata") or {}, "status": body.get("status") or {}}
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k == "resourceVersion"}
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {name} not found")
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise Conflict(f"{kind} {name}: the object has been modified")
        patch = copy.deepcopy(body)
        patch.get("metadata", {}).pop("resourceVersion", None)
        _merge(obj, patch)
        self._bump(obj)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            del self.objects[(kind, namespace, name)]
        return copy.deepcopy(obj)

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str) -> None:
        self.requests[f"DELETE {kind}"] += 1
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            return
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", "2026-12-01T00:00:00Z")
            self._bump(obj)
        else:
            del self.objects[(kind, namespace, name)]

    def watch(
        self,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None,
        resource_version: str,
        timeout: int,
    ) -> Iterator[Obj]:
        self.requests[f"WATCH {kind}"] += 1
        return self.stream(kind, label_selector, resource_version, timeout)

    def stream(self, kind: str, selector: str | None, version: str, timeout: int) -> Iterator[Obj]:
        """What a watch streams once counted: nothing here. The fakes that stream events
        override this alone, so the watch's signature and counting stay in one place."""
        return iter(())

    def log(self, namespace: str, pod: str, *, container: str | None, follow: bool) -> IO[bytes]:
        self.requests["GET pods/log"] += 1
        if pod not in self.logs:
            raise NotFound(f"pod {pod} has no log")
        return io.BytesIO(self.logs[pod])

    def raw(self, method: str, path: str, body: Obj | None = None) -> Obj:
        with self.lock:
            self._gate(method)
            self.requests[f"{method} {path}"] += 1
            if path == "/apis":
                return {
                    "groups": [
                        {"name": g, "versions": [{"version": v} for v in vs]}
                        for g, vs in self.groups.items()
                    ]
                }
            if path.startswith("/openapi/v3/apis/jobset"):
                return {
                    "components": {
                        "schemas": {"x": {"properties": {"onJobFailureMessagePatterns": {}}}}
                    }
                }
            if path.endswith("selfsubjectaccessreviews"):
                return {"status": {"allowed": self.allowed}}
            raise NotFound(path)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------- controllers


_T = "2026-12-01T10:00:00Z"


def _cond(kind: str, reason: str, message: str = "", status: str = "True") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _T,
    }


class FakeCluster(FakeApi):
    """The in-memory API with a stand-in for the controllers behind it, for running the
    conformance suite where no control plane is: what Trainer, JobSet, the Job controller, the
    garbage collector and a kubelet would do, as the adapter expects them to (spec 0010). It
    tests the adapter's side of the SPI, not Kubernetes: the real control plane does that.

    After every write it reconciles: a TrainJob that is open and not ended has one Running pod
    per node in its current attempt; a suspended or deleted one has none (and a deleted one
    goes once its finalizers are gone). :class:`FakeDriver` ends pods the way the cluster
    would.
    """

    namespace = "dispatch"

    def __init__(self) -> None:
        super().__init__()
        self.fail_next_create = False
        self.reachable = True
        self.authorized = True
        self.put(
            "nodes",
            None,
            {
                "metadata": {"name": "node-1"},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
                },
            },
        )
        self._serial = 0

    def _gate(self, method: str) -> None:
        from jobdispatch.errors import Unauthorized, Unreachable

        if not self.reachable:
            raise Unreachable(f"{method}: connection refused (fake)")
        if not self.authorized:
            raise Unauthorized(f"{method}: HTTP 401 Unauthorized (fake)")

    def create(self, kind: str, namespace: str | None, body: Obj) -> Obj:
        with self.lock:
            return self._create(kind, namespace, body)

    def _create(self, kind: str, namespace: str | None, body: Obj) -> Obj:
        from jobdispatch.errors import OutcomeUnknown

        self._gate("POST")
        made = super().create(kind, namespace, body)
        if kind == "trainjobs":
            self.put(
                "jobsets",
                namespace,
                {
                    "metadata": {
                        "name": body["metadata"]["name"],
                        "labels": dict(body["metadata"].get("labels") or {}),
                    },
                    "status": {},
                },
            )
            self.reconcile(namespace, body["metadata"]["name"])
        if self.fail_next_create:
            self.fail_next_create = False
            raise OutcomeUnknown("POST trainjobs: the reply was lost (fake)")
        return made

    def patch(self, kind: str, namespace: str | None, name: str, body: Obj) -> Obj:
        with self.lock:
            self._gate("PATCH")
            out = super().patch(kind, namespace, name, body)
            if kind == "trainjobs":
                self.reconcile(namespace, name)
            return out

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str) -> None:
        with self.lock:
            self._gate("DELETE")
            super().delete(kind, namespace, name, propagation=propagation)
            if kind == "trainjobs":
                self.reconcile(namespace, name)

    # ------------------------------------------------------------------ the stand-in

    def trainjob(self, name: str) -> Obj:
        return self.objects[("trainjobs", self.namespace, name)]

    def pods_of(self, name: str) -> builtins.list[Obj]:
        return [
            o
            for (k, _, _), o in self.objects.items()
            if k == "pods" and o["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == name
        ]

    def _attempt(self, name: str) -> int:
        js = self.objects.get(("jobsets", self.namespace, name)) or {}
        return int((js.get("status") or {}).get("restarts") or 0)

    def _terminal(self, tj: Obj) -> bool:
        return any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (tj.get("status") or {}).get("conditions") or ()
        )

    def reconcile(self, namespace: str | None, name: str) -> None:
        tj = self.objects.get(("trainjobs", namespace, name))
        if tj is None:
            for pod in self.pods_of(name):
                del self.objects[("pods", namespace, pod["metadata"]["name"])]
            self.objects.pop(("jobsets", namespace, name), None)
            return
        deleting = bool(tj["metadata"].get("deletionTimestamp"))
        if deleting or tj["spec"].get("suspend"):
            for pod in self.pods_of(name):
                del self.objects[("pods", namespace, pod["metadata"]["name"])]
            return
        if self._terminal(tj):
            return
        attempt = self._attempt(name)
        if any(
            p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == str(attempt)
            for p in self.pods_of(name)
        ):
            return
        for index in range(int(tj["spec"]["trainer"].get("numNodes") or 1)):
            self._serial += 1
            self.put(
                "pods",
                namespace,
                {
                    "metadata": {
                        "name": f"{name}-node-0-{index}-{self._serial:05d}",
                        "labels": {
                            "jobset.sigs.k8s.io/jobset-name": name,
                            "jobset.sigs.k8s.io/restart-attempt": str(attempt),
                            "batch.kubernetes.io/job-completion-index": str(index),
                        },
                    },
                    "spec": {"nodeName": "node-1", "containers": [{"name": "node"}]},
                    "status": {
                        "phase": "Running",
                        "startTime": _T,
                        "containerStatuses": [
                            {"name": "node", "state": {"running": {"startedAt": _T}}}
                        ],
                    },
                },
            )
        tj.setdefault("status", {})["jobsStatus"] = [{"name": "node", "ready": 1, "active": 1}]

    def end(
        self, name: str, pod_status: Obj, *, trainjob: Obj | None, restart_index: int | None
    ) -> None:
        """End the current attempt: its pods take ``pod_status``; the JobSet restarts when the
        TrainJob's runtime restarts on ``restart_index`` with restarts left, else the TrainJob
        takes the ``trainjob`` condition."""
        with self.lock:
            self._end(name, pod_status, trainjob=trainjob, restart_index=restart_index)

    def _end(
        self, name: str, pod_status: Obj, *, trainjob: Obj | None, restart_index: int | None
    ) -> None:
        attempt = self._attempt(name)
        for pod in self.pods_of(name):
            if pod["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == str(attempt):
                pod["status"] = copy.deepcopy(pod_status)
                if pod_status.get("phase") == "Failed" and "startTime" not in pod_status:
                    pod["status"]["startTime"] = _T
        tj = self.trainjob(name)
        runtime = self._runtime(tj)
        policy = (
            ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get("failurePolicy")
        )
        if policy is not None and restart_index is not None:
            rules = [r["name"] for r in policy["rules"] if r["action"] == "RestartJobSet"]
            wanted = f"dispatch-restart-{restart_index}"
            js = self.objects[("jobsets", self.namespace, name)]
            status = js.setdefault("status", {})
            if wanted in rules and int(status.get("restarts") or 0) < policy["maxRestarts"]:
                for pod in self.pods_of(name):
                    del self.objects[("pods", self.namespace, pod["metadata"]["name"])]
                status["restarts"] = int(status.get("restarts") or 0) + 1
                status["conditions"] = [_cond("RestartingJobSet", f"FailurePolicy_{wanted}")]
                self.reconcile(self.namespace, name)
                return
            if wanted in rules:
                trainjob = _cond("Failed", "ReachedMaxRestarts", "jobset reached max restarts")
        if trainjob is not None:
            tj.setdefault("status", {}).setdefault("conditions", []).append(trainjob)

    def _runtime(self, tj: Obj) -> Obj:
        ref = tj["spec"]["runtimeRef"]
        if ref.get("kind") == "TrainingRuntime":
            return self.objects.get(("trainingruntimes", self.namespace, ref["name"])) or {}
        return self.objects.get(("clustertrainingruntimes", None, ref["name"])) or {}


class FakeDriver:
    """The conformance driver over :class:`FakeCluster` (built lazily to keep this module free
    of the conformance package at import)."""

    def __new__(cls, backend: Any) -> Any:
        from jobdispatch_conformance.adapter import Driver

        from jobdispatch_kubeflow.backend import KubeflowBackend
        from jobdispatch_kubeflow.config import Settings
        from jobdispatch_kubeflow.names import split_ref

        cluster = backend.api
        assert isinstance(cluster, FakeCluster)

        def name_of(ref: Any) -> str:
            return split_ref(ref)[1]

        def failed(code: int, reason: str = "Error", **extra: Any) -> Obj:
            return {
                "phase": "Failed",
                **extra,
                "containerStatuses": [
                    {
                        "name": "node",
                        "state": {
                            "terminated": {"exitCode": code, "reason": reason, "finishedAt": _T}
                        },
                    }
                ],
            }

        jobs_failed = _cond("Failed", "FailedJobs", "jobset failed due to one or more job failures")

        def disrupted(ref: Any, reason: str) -> None:
            """The pods ended by Kubernetes for ``reason`` (their DisruptionTarget condition)."""
            cluster.end(
                name_of(ref),
                failed(137, conditions=[_cond("DisruptionTarget", reason)]),
                trainjob=jobs_failed,
                restart_index=0,
            )

        class _Driver(Driver):
            def unknown_ref(self) -> Any:
                from jobdispatch_kubeflow.names import ref_of

                return ref_of(cluster.namespace, "jd-nosuchjob-9-9")

            def complete(self, ref: Any) -> None:
                cluster.end(
                    name_of(ref),
                    {
                        "phase": "Succeeded",
                        "containerStatuses": [
                            {
                                "name": "node",
                                "state": {
                                    "terminated": {
                                        "exitCode": 0,
                                        "reason": "Completed",
                                        "finishedAt": _T,
                                    }
                                },
                            }
                        ],
                    },
                    trainjob=_cond("Complete", "AllJobsCompleted"),
                    restart_index=None,
                )

            def fail(self, ref: Any, code: int) -> None:
                cluster.end(
                    name_of(ref),
                    failed(code),
                    trainjob=jobs_failed,
                    restart_index=1 if code == 137 else 2,
                )

            def oom(self, ref: Any) -> None:
                cluster.end(
                    name_of(ref), failed(137, "OOMKilled"), trainjob=jobs_failed, restart_index=1
                )

            def preempt(self, ref: Any) -> None:
                disrupted(ref, "PreemptionByScheduler")

            def evict(self, ref: Any) -> None:
                disrupted(ref, "EvictionByEvictionAPI")

            def lose_node(self, ref: Any) -> None:
                disrupted(ref, "DeletionByPodGC")

            def time_out(self, ref: Any) -> None:
                cluster.end(
                    name_of(ref),
                    failed(143),
                    trainjob=_cond(
                        "Failed", "DeadlineExceeded", "TrainJob exceeded its activeDeadlineSeconds"
                    ),
                    restart_index=None,
                )

            def launch_fail(self, ref: Any) -> None:
                cluster.end(
                    name_of(ref),
                    {
                        "phase": "Failed",
                        "containerStatuses": [
                            {"name": "node", "state": {"waiting": {"reason": "ErrImagePull"}}}
                        ],
                    },
                    trainjob=jobs_failed,
                    restart_index=None,
                )

            def lose_next_start_reply(self) -> None:
                cluster.fail_next_create = True

            def emit_output(
                self, ref: Any, data: bytes, stream: str = "stdout", rank: int = 0
            ) -> None:
                for pod in cluster.pods_of(name_of(ref)):
                    pod_name = pod["metadata"]["name"]
                    cluster.logs[pod_name] = cluster.logs.get(pod_name, b"") + data

            def unreachable_backend(self) -> Any:
                api = FakeCluster()
                api.reachable = False
                return KubeflowBackend(Settings(namespace="dispatch", probe_ttl=0), api=api)

            def unauthorized_backend(self) -> Any:
                api = FakeCluster()
                api.authorized = False
                return KubeflowBackend(Settings(namespace="dispatch", probe_ttl=0), api=api)

        return _Driver()
