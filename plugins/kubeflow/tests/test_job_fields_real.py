"""The job-file fields on the real control plane: a TrainJob made from a job file's
``[resources.kubeflow]`` (and ``resources.constraints``) is accepted by the API server and the
Trainer webhook, and its JobSet and pods carry every field.

The test brings its own kwok node, labelled and tainted with a value of its own, so the pods can
only land there if both the node selector and the toleration reached them; it offers
``amd.com/gpu`` alone, so they fit only if the accelerator's name did too. A claim bound to a
volume of its own, a service account, and a runtime copied from the test runtime with a label
of its own (which Trainer propagates to the JobSet), an image pull Secret and a pod security
context complete it. Everything is removed after.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from jobdispatch import JobSpec, Resources, StartRequest, make_plan
from jobdispatch.testing import eventually

pytestmark = pytest.mark.kube

POOL = "dispatch.test/pool"


@pytest.fixture
def place(kube_cluster: None) -> Iterator[tuple[Any, Any, str]]:
    """The backend, the admin API and an id; the node, claim, service account and runtime of
    that id exist until the test ends."""
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.testing import TEST_RUNTIME, KubeDriver, own_node, settings

    backend = KubeflowBackend(settings())
    admin = KubeDriver(backend).admin
    ns = backend.namespace
    tag = "f" + uuid.uuid4().hex[:8]
    amounts = {"cpu": "32", "memory": "256Gi", "pods": "110", "amd.com/gpu": "8"}
    base = admin.get("clustertrainingruntimes", None, TEST_RUNTIME)
    assert base is not None, f"the test runtime {TEST_RUNTIME} exists"
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": f"rt-{tag}"},
        "spec": copy.deepcopy(base["spec"]),
    }
    template = runtime["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("labels", {})["dispatch.test/runtime"] = tag
    made: list[tuple[str, str]] = []

    def create(path: str, body: dict[str, Any]) -> None:
        admin.raw("POST", path, body)
        made.append((path, body["metadata"]["name"]))

    try:
        own_node(admin, f"kwok-{tag}", POOL, tag, resources=amounts)
        admin.create("clustertrainingruntimes", None, runtime)
        create(
            "/api/v1/persistentvolumes",
            {
                "metadata": {"name": f"pv-{tag}"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "hostPath": {"path": f"/tmp/{tag}"},
                    "claimRef": {"namespace": ns, "name": f"data-{tag}"},
                },
            },
        )
        create(
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            {
                "metadata": {"name": f"data-{tag}"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": f"pv-{tag}",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": f"sa-{tag}"}})
        create(
            f"/api/v1/namespaces/{ns}/secrets",
            {
                "metadata": {"name": f"pull-{tag}"},
                "type": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": '{"auths": {}}'},
            },
        )
        yield backend, admin, tag
    finally:
        for path, name in reversed(made):
            admin.raw("DELETE", f"{path}/{name}")
        admin.delete("clustertrainingruntimes", None, f"rt-{tag}", propagation="Background")
        admin.delete("nodes", None, f"kwok-{tag}", propagation="Background")
        backend.close()


def test_the_pods_of_a_trainjob_carry_every_job_file_field(place: tuple[Any, Any, str]) -> None:
    from jobdispatch_kubeflow import names

    backend, admin, tag = place
    ns = backend.namespace
    table = {
        "tolerations": (f"{POOL}={tag}:NoSchedule",),
        "labels": ("team=vision", f"cost-centre={tag}"),
        "annotations": ("example.com/owner=ana",),
        "volumes": (f"data-{tag}:/data:ro",),
        "shm_size": "1Gi",
        "secret_env": ("HF_TOKEN=hf:token",),
        "config_map_env": ("MODE=settings:mode",),
        "runtime": f"rt-{tag}",
        "service_account": f"sa-{tag}",
        "gpu_resource": "amd.com/gpu",
        "image_pull_secrets": (f"pull-{tag}",),
        "run_as_user": 1000,
        "run_as_group": 3000,
        "fs_group": 2000,
        "run_as_non_root": True,
    }
    spec = JobSpec(
        command=("sleep", "3600"),
        nodes=2,
        resources=Resources(
            gpus_per_node=2, constraints=(f"{POOL}={tag}",), adapter={"kubeflow": table}
        ),
    )
    make_plan(backend, None, spec)
    job = "jf" + tag
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    _, name = names.split_ref(ref)
    try:
        backend.open(ref)
        pods: list[dict[str, Any]] = eventually(
            lambda: admin.list("pods", ns, label_selector=f"{names.JOBSET_NAME}={name}")[0],
            f"two pods of {ref} on kwok-{tag}",
            holds=lambda found: (
                len(found) == 2 and all(p["spec"].get("nodeName") == f"kwok-{tag}" for p in found)
            ),
            every=1,
        )
        jobset = admin.get("jobsets", ns, name)
        assert jobset is not None
        assert jobset["metadata"]["labels"]["team"] == "vision"
        assert jobset["metadata"]["labels"]["dispatch.test/runtime"] == tag  # the job's runtime
        assert jobset["metadata"]["annotations"]["example.com/owner"] == "ana"
        for pod in pods:
            assert pod["metadata"]["labels"]["cost-centre"] == tag
            assert pod["metadata"]["annotations"]["example.com/owner"] == "ana"
            p = pod["spec"]
            assert p["nodeSelector"][POOL] == tag
            assert {"key": POOL, "operator": "Equal", "value": tag, "effect": "NoSchedule"} in p[
                "tolerations"
            ]
            assert p["serviceAccountName"] == f"sa-{tag}"
            assert p["imagePullSecrets"] == [{"name": f"pull-{tag}"}]
            assert p["securityContext"] == {
                "runAsUser": 1000,
                "runAsGroup": 3000,
                "fsGroup": 2000,
                "runAsNonRoot": True,
            }
            volumes = {v["name"]: v for v in p["volumes"]}
            assert volumes["jobdispatch-claim-0"]["persistentVolumeClaim"]["claimName"] == (
                f"data-{tag}"
            )
            assert volumes["jobdispatch-shm"]["emptyDir"] == {
                "medium": "Memory",
                "sizeLimit": "1Gi",
            }
            (node,) = [c for c in p["containers"] if c["name"] == "node"]
            mounts = {m["mountPath"]: m for m in node["volumeMounts"]}
            assert mounts["/data"].get("readOnly") is True and "/dev/shm" in mounts
            env = {e["name"]: e for e in node["env"]}
            assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
            assert env["MODE"]["valueFrom"]["configMapKeyRef"]["name"] == "settings"
            assert node["resources"]["limits"]["amd.com/gpu"] == "2"
    finally:
        backend.stop(ref, "test over")
        backend.forget(ref)


def test_plan_refuses_a_runtime_the_cluster_lacks_naming_it(kube_cluster: None) -> None:
    """The job's own runtime is read at plan (issue 35, item 6): one that does not exist is
    refused with its name and kind before anything is created; the test runtime is planned."""
    from jobdispatch.errors import ValidationError
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.testing import TEST_RUNTIME, settings

    def naming(runtime: str) -> JobSpec:
        return JobSpec(
            command=("true",), resources=Resources(adapter={"kubeflow": {"runtime": runtime}})
        )

    backend = KubeflowBackend(settings())
    missing = "absent-" + uuid.uuid4().hex[:8]
    try:
        make_plan(backend, None, naming(TEST_RUNTIME))
        with pytest.raises(ValidationError) as caught:
            make_plan(backend, None, naming(missing))
        assert (
            f"resources.kubeflow.runtime: names ClusterTrainingRuntime {missing!r}, which "
            "does not exist"
        ) in str(caught.value)
    finally:
        backend.close()


def test_a_job_names_its_own_localqueue_and_priority_class(kube_cluster: None) -> None:
    """Under a cluster entry submitting through Kueue (queue ``jobdispatch-gated``, priority
    class ``jobdispatch-low``), the job's own queue and priority class are the ones Kueue's
    Workload is queued with."""
    from jobdispatch_kubeflow import KubeflowBackend, names
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import KubeDriver, settings

    backend = KubeflowBackend(
        settings(kueue=Kueue(queue="jobdispatch-gated", priority_class="jobdispatch-low"))
    )
    admin = KubeDriver(backend).admin
    ns = backend.namespace
    spec = JobSpec(
        command=("sleep", "3600"),
        resources=Resources(
            queue="jobdispatch-spare", adapter={"kubeflow": {"priority_class": "jobdispatch-high"}}
        ),
    )
    make_plan(backend, None, spec)
    job = "jq" + uuid.uuid4().hex[:8]
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    _, name = names.split_ref(ref)
    try:
        trainjob = admin.get("trainjobs", ns, name)
        assert trainjob is not None
        uid = trainjob["metadata"]["uid"]

        def workload() -> dict[str, Any] | None:
            found, _ = admin.list("workloads", ns)
            for w in found:
                owners = w["metadata"].get("ownerReferences") or []
                if any(o.get("uid") == uid for o in owners):
                    return dict(w)
            return None

        wl: dict[str, Any] = eventually(workload, f"the Workload of {name}", every=1)
        assert wl["spec"]["queueName"] == "jobdispatch-spare"
        assert wl["spec"]["priorityClassRef"]["name"] == "jobdispatch-high"
        assert wl["spec"]["priority"] == 1000
    finally:
        backend.stop(ref, "test over")
        backend.forget(ref)
        backend.close()
