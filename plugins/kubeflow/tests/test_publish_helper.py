"""The ``publish`` option: the publish image's init container in a derived runtime, the job's
environment patched into it, and the configuration refused where it is wrong."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jobdispatch.errors import Rejected, Unauthorized, ValidationError
from jobdispatch.spi import StartRequest
from jobdispatch.types import JobSpec, ProgressSource
from jobdispatch_kubeflow import KubeflowBackend, Settings, derived, probe
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi
from jobdispatch_kubeflow.helper import CONTAINER, INIT, VOLUME
from jobdispatch_kubeflow.restart import runtime_body

IMAGE = "dispatch.local/jobdispatch-publish:0.1.0-abc"
PUBLISH = {"image": IMAGE, "mounts": [{"volume": "checkpoints", "path": "/checkpoints"}]}


def runtime(volumes: tuple[str, ...] = ("checkpoints",)) -> dict[str, Any]:
    """The test runtime with its training container and host folders named ``volumes``."""
    rt: dict[str, Any] = {**TEST_RUNTIME_OBJECT, "spec": dict(TEST_RUNTIME_OBJECT["spec"])}
    body = runtime_body(rt, namespace="x")["spec"]  # a deep copy of the spec
    pod = body["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"] = [{"name": "node", "image": "pytorch"}]
    pod["volumes"] = [{"name": v, "hostPath": {"path": f"/srv/{v}"}} for v in volumes]
    return {**rt, "spec": body}


def backend(api: FakeApi, **extra: Any) -> KubeflowBackend:
    probe.forget()
    config = {
        "namespace": "dispatch",
        "runtime": {"name": "dispatch-torch-test"},
        "probe_ttl": 0,
        "publish": PUBLISH,
        **extra,
    }
    return KubeflowBackend(Settings.from_config(config), api=api)


def pod_of(runtime_spec: dict[str, Any]) -> dict[str, Any]:
    (rjob,) = runtime_spec["template"]["spec"]["replicatedJobs"]
    pod: dict[str, Any] = rjob["template"]["spec"]["template"]["spec"]
    return pod


def test_start_refers_to_a_runtime_with_the_init_container_and_patches_the_jobs_env() -> None:
    api = FakeApi()
    api.put("clustertrainingruntimes", None, runtime())
    spec = JobSpec(
        command=("torchrun", "train.py"),
        nodes=2,
        env={"A": "1"},
        progress=ProgressSource(root="/checkpoints/team"),
    )
    # What launch.execution_env gives a submission of this spec.
    told = {"X": "y", "JOBDISPATCH_CHECKPOINT_ROOT": "/checkpoints/team"}
    request = StartRequest(job="j1", submission=2, attempt=1, spec=spec, env=told)
    ref = backend(api).start(request)
    body = api.objects[("trainjobs", "dispatch", ref.id.split("/")[1])]
    derived = body["spec"]["runtimeRef"]
    assert derived["kind"] == "TrainingRuntime" and derived["name"].startswith("jd-rt-")
    rt = api.objects[("trainingruntimes", "dispatch", derived["name"])]
    pod = pod_of(rt["spec"])
    (init,) = pod["initContainers"]
    assert init["name"] == CONTAINER and init["image"] == IMAGE and init["command"] == [INIT]
    assert {"name": VOLUME, "emptyDir": {}} in pod["volumes"]
    assert init["volumeMounts"] == [
        {"name": VOLUME, "mountPath": "/jobdispatch"},
        {"name": "checkpoints", "mountPath": "/checkpoints"},
    ]
    (node,) = pod["containers"]
    assert {"name": VOLUME, "mountPath": "/jobdispatch"} in node["volumeMounts"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in init["env"]}
    assert env["JOBDISPATCH_SHARED"] == "/jobdispatch"
    assert "restart-attempt" in str(env["JOBDISPATCH_EXECUTION"])
    # The job's own environment reaches the init container through the TrainJob's patch.
    patch = body["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    (job_patch,) = patch["replicatedJobs"]
    (init_patch,) = job_patch["template"]["spec"]["template"]["spec"]["initContainers"]
    assert init_patch["name"] == CONTAINER
    patched = {e["name"]: e["value"] for e in init_patch["env"]}
    assert patched["JOBDISPATCH_JOB"] == "j1" and patched["JOBDISPATCH_SUBMISSION"] == "2"
    assert patched["JOBDISPATCH_CHECKPOINT_ROOT"] == "/checkpoints/team"
    assert patched["A"] == "1" and patched["X"] == "y"
    trainer_env = {e["name"]: e.get("value") for e in body["spec"]["trainer"]["env"]}
    assert {k: trainer_env[k] for k in patched} == patched, "the same environment as training"


def test_equal_settings_share_one_derived_runtime_and_the_base_is_unchanged() -> None:
    api = FakeApi()
    base = runtime()
    api.put("clustertrainingruntimes", None, base)
    b = backend(api)
    one = b.start(StartRequest(job="j1", submission=1, attempt=1, spec=JobSpec(command=("a",))))
    two = b.start(StartRequest(job="j2", submission=1, attempt=1, spec=JobSpec(command=("b",))))
    names = {
        api.objects[("trainjobs", "dispatch", r.id.split("/")[1])]["spec"]["runtimeRef"]["name"]
        for r in (one, two)
    }
    assert len(names) == 1
    assert "initContainers" not in pod_of(base["spec"])


def test_a_mount_of_a_volume_the_runtime_lacks_is_rejected_naming_it() -> None:
    api = FakeApi()
    api.put("clustertrainingruntimes", None, runtime(volumes=()))
    with pytest.raises(Rejected, match="no volume checkpoints"):
        backend(api).start(
            StartRequest(job="j1", submission=1, attempt=1, spec=JobSpec(command=("a",)))
        )


def test_restart_and_publish_derive_one_runtime_with_both() -> None:
    body = runtime_body(
        runtime(),
        namespace="dispatch",
        restart_on=[2],
        max_restarts=1,
        publish=Settings.from_config({"publish": PUBLISH}).publish,
    )
    pod = pod_of(body["spec"])
    assert pod["restartPolicy"] == "Never"
    assert [c["name"] for c in pod["initContainers"]] == [CONTAINER]
    assert body["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] == 1


@pytest.mark.parametrize(
    ("publish", "problem"),
    [
        ({}, "'image' is a required property"),
        ({"image": IMAGE, "path": "relative"}, "publish.path"),
        ({"image": IMAGE, "mounts": [{"volume": "Not_A_Name", "path": "/x"}]}, "volume"),
        ({"image": IMAGE, "mounts": [{"volume": "ckpt", "path": "/a:b"}]}, "path"),
        ({"image": IMAGE, "mounts": [{"volume": "ckpt"}]}, "'path' is a required property"),
        ({"image": IMAGE, "bogus": 1}, "bogus"),
    ],
)
def test_a_bad_publish_section_is_refused_naming_the_key(
    publish: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        Settings.from_config({"publish": publish})


class NoRuntimeCreate(FakeApi):
    """An API whose identity may read TrainingRuntimes but not create them: the
    least-privilege identity the project ships (0010 §6)."""

    def create(self, kind: str, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        if kind == "trainingruntimes":
            raise Unauthorized("POST trainingruntimes: HTTP 403 Forbidden (fake)")
        return super().create(kind, namespace, body)


def a_request() -> StartRequest:
    return StartRequest(job="j1", submission=1, attempt=1, spec=JobSpec(command=("a",)))


def test_without_create_the_start_is_refused_naming_the_runtime_and_the_operator_step() -> None:
    api = NoRuntimeCreate()
    api.put("clustertrainingruntimes", None, runtime())
    b = backend(api)
    with pytest.raises(Rejected, match=r"jd-rt-\w+ is not in namespace dispatch") as refused:
        b.start(a_request())
    assert "python -m jobdispatch_kubeflow.derived" in str(refused.value)
    assert not [k for k in api.objects if k[0] == "trainjobs"], "no TrainJob without its runtime"


def test_without_create_plan_refuses_what_start_would_and_finds_an_applied_runtime() -> None:
    """Plan tells what start would refuse, with the same words; once the operator applied the
    runtime (or where the identity may create it) plan says nothing of it."""
    api = NoRuntimeCreate()
    api.put("clustertrainingruntimes", None, runtime())
    api.allowed = False  # the probe's access reviews: this identity may create nothing
    b = backend(api)
    spec = JobSpec(command=("a",))
    (problem,) = [p for p in b.resource_problems(spec) if "derived runtime" in p.message]
    with pytest.raises(Rejected) as refused:
        b.start(a_request())
    found = re.search(r"jd-rt-\w+", str(refused.value))
    assert found is not None
    name = found[0]
    assert problem.path == "" and f"the derived runtime {name} is not in namespace" in str(problem)
    assert "python -m jobdispatch_kubeflow.derived" in problem.message
    body = derived.derive(api, b.settings, "dispatch-torch-test")
    api.put("trainingruntimes", "dispatch", body)
    assert not [p for p in b.resource_problems(spec) if "derived runtime" in p.message]
    allowed = FakeApi()
    allowed.put("clustertrainingruntimes", None, runtime())
    assert not [p for p in backend(allowed).resource_problems(spec) if "derived" in p.message]


def test_a_runtime_the_operator_applied_is_used_without_create(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``python -m jobdispatch_kubeflow.derived`` prints for the cluster entry's publish
    settings is the runtime the adapter refers to, and with it applied a start needs no
    create."""
    api = NoRuntimeCreate()
    api.put("clustertrainingruntimes", None, runtime())
    monkeypatch.setattr(derived, "KubeApi", lambda **_: api)
    argv = ["--namespace", "dispatch", "--runtime", "dispatch-torch-test", "--image", IMAGE]
    assert derived.main([*argv, "--mount", "checkpoints=/checkpoints"]) == 0
    applied = json.loads(capsys.readouterr().out)
    api.put("trainingruntimes", "dispatch", applied)
    ref = backend(api).start(a_request())
    body = api.objects[("trainjobs", "dispatch", ref.id.split("/")[1])]
    assert body["spec"]["runtimeRef"]["name"] == applied["metadata"]["name"]


def test_the_operator_command_refuses_a_bad_mount_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--namespace", "dispatch", "--runtime", "rt", "--image", IMAGE, "--mount", "Bad=x"]
    assert derived.main(argv) == 2
    assert "publish" in capsys.readouterr().err
