"""The job-file fields a TrainJob user reaches for (``[resources.kubeflow]``, constraints, a
queue): refused at plan with the field named, and mapped onto the TrainJob the backend creates
over the in-memory API (``jobdispatch_kubeflow.job_settings``, ``manifest``)."""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Unauthorized, Unsupported, ValidationError
from jobdispatch.launch import preview
from jobdispatch.plan import make_plan
from jobdispatch.spi import StartRequest
from jobdispatch.types import Capability, JobSpec, Resources, Tristate
from jobdispatch_kubeflow import KubeflowBackend, Settings, manifest, names, probe
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi
from jobdispatch_kubeflow.job_settings import JobSettings, Toleration

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)

#: Every key of the table, as a user writes it.
TABLE: dict[str, Any] = {
    "tolerations": ("gpu=true:NoSchedule", "dedicated:NoExecute", "spot"),
    "labels": ("team=vision", "cost-centre=cc-12"),
    "annotations": ("example.com/owner=ana@example.com",),
    "volumes": ("datasets:/data:ro", "checkpoints:/ckpt"),
    "shm_size": "16Gi",
    "secret_env": ("HF_TOKEN=hf:token",),
    "config_map_env": ("MODE=train-settings:mode",),
    "runtime": "deepspeed-distributed",
    "service_account": "trainer",
    "gpu_resource": "amd.com/gpu",
    "image_pull_secrets": ("regcred", "mirror-cred"),
    "run_as_user": 1000,
    "run_as_group": 1000,
    "fs_group": 2000,
    "run_as_non_root": True,
}


def runtime_named(name: str) -> dict[str, Any]:
    """The test runtime under another name."""
    return {**TEST_RUNTIME_OBJECT, "metadata": {"name": name}}


def backend(api: FakeApi | None = None, **config: Any) -> KubeflowBackend:
    """A backend over ``api``, which holds the test runtime and the one ``TABLE`` names."""
    probe.forget()
    fake = api or FakeApi()
    fake.put("clustertrainingruntimes", None, TEST_RUNTIME_OBJECT)
    fake.put("clustertrainingruntimes", None, runtime_named(TABLE["runtime"]))
    settings = Settings.from_config(
        {"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}, **config}
    )
    return KubeflowBackend(settings, api=fake, clock=lambda: NOW)


def spec(table: dict[str, Any] | None = None, **resources: Any) -> JobSpec:
    adapter = {} if table is None else {"kubeflow": table}
    return JobSpec(
        command=("python", "train.py"),
        nodes=2,
        env={"A": "1"},
        resources=Resources(gpus_per_node=8, adapter=adapter, **resources),
    )


def created(be: KubeflowBackend, api: FakeApi, s: JobSpec) -> dict[str, Any]:
    ref = be.start(StartRequest(job="j1", submission=1, attempt=1, spec=s))
    _, name = names.split_ref(ref)
    body: dict[str, Any] = api.objects[("trainjobs", "dispatch", name)]
    return body


def node_patch(tj: dict[str, Any]) -> dict[str, Any]:
    (patch,) = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == names.PATCH_MANAGER]
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == manifest.TRAINER_JOB
    template: dict[str, Any] = rjob["template"]["spec"]["template"]
    return template


def test_every_field_lands_on_the_trainjob() -> None:
    api = FakeApi()
    be = backend(api, kueue={"queue": "team-a"})
    tj = created(be, api, spec(TABLE, constraints=("pool=h100",), queue="team-b"))
    md = tj["metadata"]
    assert md["labels"]["team"] == "vision" and md["labels"]["cost-centre"] == "cc-12"
    assert md["labels"][names.JOB] == "j1"
    assert md["labels"][names.QUEUE_NAME] == "team-b"  # the job's queue, not the entry's
    assert md["annotations"]["example.com/owner"] == "ana@example.com"
    assert tj["spec"]["runtimeRef"]["name"] == "deepspeed-distributed"
    trainer = tj["spec"]["trainer"]
    assert trainer["resourcesPerNode"]["limits"] == {"amd.com/gpu": "8"}
    env = {e["name"]: e for e in trainer["env"]}
    assert env["A"] == {"name": "A", "value": "1"}
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert env["MODE"]["valueFrom"] == {
        "configMapKeyRef": {"name": "train-settings", "key": "mode"}
    }
    template = node_patch(tj)
    assert template["metadata"]["labels"] == {"team": "vision", "cost-centre": "cc-12"}
    pod = template["spec"]
    assert pod["nodeSelector"] == {"pool": "h100"}
    assert pod["tolerations"] == [
        {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "spot", "operator": "Exists"},
    ]
    assert pod["serviceAccountName"] == "trainer"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror-cred"}]
    assert pod["securityContext"] == {
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 2000,
        "runAsNonRoot": True,
    }
    assert pod["volumes"] == [
        {"name": "jobdispatch-claim-0", "persistentVolumeClaim": {"claimName": "datasets"}},
        {"name": "jobdispatch-claim-1", "persistentVolumeClaim": {"claimName": "checkpoints"}},
        {"name": "jobdispatch-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    assert pod["containers"] == [
        {
            "name": "node",
            "volumeMounts": [
                {"name": "jobdispatch-claim-0", "mountPath": "/data", "readOnly": True},
                {"name": "jobdispatch-claim-1", "mountPath": "/ckpt"},
                {"name": "jobdispatch-shm", "mountPath": "/dev/shm"},
            ],
        }
    ]


def test_the_cluster_entry_names_the_accelerator_and_the_job_may_name_another() -> None:
    api = FakeApi()
    be = backend(api, gpu_resource="nvidia.com/mig-1g.5gb")
    tj = created(be, api, spec())
    assert tj["spec"]["trainer"]["resourcesPerNode"]["requests"] == {"nvidia.com/mig-1g.5gb": "8"}
    assert backend().settings.gpu_resource == "nvidia.com/gpu"


def test_without_kueue_a_job_priority_class_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match=r"resources\.kubeflow\.priority_class"):
        make_plan(backend(), None, spec({"priority_class": "high"}))


def test_under_kueue_the_job_priority_class_wins_over_the_entry() -> None:
    api = FakeApi()
    be = backend(api, kueue={"queue": "team-a", "priority_class": "low"})
    make_plan(be, None, spec({"priority_class": "high"}))
    tj = created(be, api, spec({"priority_class": "high"}))
    assert tj["metadata"]["labels"][names.PRIORITY_CLASS] == "high"
    assert tj["metadata"]["labels"][names.QUEUE_NAME] == "team-a"


def test_a_queue_without_kueue_is_refused_and_with_kueue_is_planned() -> None:
    with pytest.raises(Unsupported, match=r"resources\.queue.*kueue"):
        make_plan(backend(), None, spec(queue="team-b"))
    made = make_plan(backend(kueue={"queue": "team-a"}), None, spec(queue="team-b"))
    assert made.capabilities[Capability.QUEUES].answer is Tristate.YES


def test_node_constraints_are_planned_and_a_bare_feature_is_refused() -> None:
    make_plan(backend(), None, spec(constraints=("pool=h100", "zone=")))
    with pytest.raises(ValidationError, match=r"resources\.constraints: \[1\] 'nvlink'"):
        make_plan(backend(), None, spec(constraints=("pool=h100", "nvlink")))
    with pytest.raises(ValidationError, match="second value"):
        make_plan(backend(), None, spec(constraints=("pool=h100", "pool=a100")))


@pytest.mark.parametrize(
    ("table", "path", "words"),
    [
        ({"node_selector": "gpu=h100"}, "resources.kubeflow: node_selector", "unknown key"),
        ({"bogus_key": 1}, "resources.kubeflow: bogus_key", "unknown key"),
        ({"tolerations": ("gpu=true:Sometimes",)}, "tolerations", "key[=value][:NoSchedule"),
        ({"tolerations": "gpu"}, "tolerations", "is not of type 'array'"),
        ({"labels": ("team",)}, "labels", "[0] 'team' is not a label key=value"),
        ({"labels": ("a=1", "a=2")}, "labels", "'a' is given twice"),
        ({"labels": ("a=" + "x" * 64,)}, "labels", "is not a label key=value"),
        ({"labels": ("jobdispatch.dev/job=x",)}, "labels", "written by dispatch"),
        ({"annotations": ("kueue.x-k8s.io/queue-name=q",)}, "annotations", "written by"),
        ({"volumes": ("data:relative",)}, "volumes", "claim:/path"),
        ({"volumes": ("a:/x", "b:/x")}, "volumes", "mounted twice"),
        ({"volumes": ("a:/dev/shm",)}, "volumes", "use shm_size"),
        ({"shm_size": "lots"}, "shm_size", "Kubernetes quantity"),
        ({"secret_env": ("HF_TOKEN=hf",)}, "secret_env", "NAME=object:key"),
        ({"secret_env": ("A=hf:token",)}, "secret_env", "also set by [env]"),
        ({"secret_env": ("JOBDISPATCH_JOB=hf:t",)}, "secret_env", "by dispatch itself"),
        (
            {"secret_env": ("X=s:k",), "config_map_env": ("X=c:k",)},
            "config_map_env",
            "also in secret_env",
        ),
        ({"runtime": "Deep_Speed"}, "runtime", "training runtime name"),
        ({"service_account": "a b"}, "service_account", "service account name"),
        ({"gpu_resource": "gpu"}, "gpu_resource", "extended resource name"),
        ({"image_pull_secrets": "regcred"}, "image_pull_secrets", "is not of type 'array'"),
        ({"image_pull_secrets": ("Reg_Cred",)}, "image_pull_secrets", "is not a Secret name"),
        ({"image_pull_secrets": ("a", "a")}, "image_pull_secrets", "'a' is given twice"),
        ({"run_as_user": -1}, "run_as_user", "less than the minimum of 0"),
        ({"run_as_group": 2**31}, "run_as_group", "greater than the maximum"),
        ({"fs_group": "100"}, "fs_group", "is not of type 'integer'"),
        ({"run_as_user": True}, "run_as_user", "is not of type 'integer'"),
        ({"run_as_non_root": "yes"}, "run_as_non_root", "is not of type 'boolean'"),
        ({"run_as_user": 0, "run_as_non_root": True}, "run_as_user", "is 0 (root)"),
        ({"security_context": "x"}, "resources.kubeflow: security_context", "unknown key"),
    ],
)
def test_a_bad_value_is_refused_at_plan_naming_its_key(
    table: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        make_plan(backend(), None, spec(table))
    assert path in str(caught.value)
    assert words in str(caught.value)


def test_a_runtime_the_cluster_lacks_is_refused_at_plan_naming_it() -> None:
    api = FakeApi()
    be = backend(api)
    make_plan(be, None, spec({"runtime": TABLE["runtime"]}))
    with pytest.raises(ValidationError) as caught:
        make_plan(be, None, spec({"runtime": "no-such-runtime"}))
    assert "resources.kubeflow.runtime: names ClusterTrainingRuntime 'no-such-runtime', " in str(
        caught.value
    )
    assert "which does not exist" in str(caught.value)
    created_later = runtime_named("no-such-runtime")
    api.put("clustertrainingruntimes", None, created_later)
    make_plan(be, None, spec({"runtime": "no-such-runtime"}))  # asked again at each plan


def test_a_namespaced_runtime_is_looked_for_in_the_namespace() -> None:
    api = FakeApi()
    be = backend(api, runtime={"name": "dispatch-torch-test", "kind": "TrainingRuntime"})
    api.put("trainingruntimes", "dispatch", {**TEST_RUNTIME_OBJECT, "kind": "TrainingRuntime"})
    own = {**runtime_named("team-torch"), "kind": "TrainingRuntime"}
    api.put("trainingruntimes", "elsewhere", own)
    with pytest.raises(
        ValidationError, match=r"TrainingRuntime in namespace dispatch 'team-torch'"
    ):
        make_plan(be, None, spec({"runtime": "team-torch"}))
    api.put("trainingruntimes", "dispatch", own)
    assert probe.runtime_problem(api, be.settings, "team-torch") == ""


class _NoRuntimeReads(FakeApi):
    """RBAC refuses reading training runtimes, and nothing else."""

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        if kind.endswith("trainingruntimes") and name != "dispatch-torch-test":
            raise Unauthorized(f"GET {kind}/{name}: HTTP 403 Forbidden (fake)")
        return super().get(kind, namespace, name)


def test_a_runtime_rbac_refuses_reading_is_refused_and_probe_false_asks_nothing() -> None:
    api = _NoRuntimeReads()
    with pytest.raises(ValidationError, match="RBAC refuses reading"):
        make_plan(backend(api), None, spec({"runtime": "team-torch"}))
    unprobed = backend(FakeApi(), probe=False)
    make_plan(unprobed, None, spec({"runtime": "no-such-runtime"}))


def test_a_job_runtime_that_reruns_ranks_weakens_identity_though_the_entrys_does_not() -> None:
    """The identity facts are those of the runtime the job runs under: its own, read at plan
    and at start, not the cluster entry's (probed with the facts)."""
    api = FakeApi()
    be = backend(api)
    lenient = {
        **runtime_named("lenient"),
        "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}},
    }
    api.put("clustertrainingruntimes", None, lenient)
    assert be.identity_weakened(spec({"runtime": TABLE["runtime"]})) == ""
    assert make_plan(be, None, spec()).identity_weakened == ""
    weak = spec({"runtime": "lenient"})
    assert "runtime lenient lets Kubernetes rerun a rank in place (Job backoffLimit 6" in (
        make_plan(be, None, weak).identity_weakened
    )
    with pytest.raises(Unsupported, match="runtime lenient lets Kubernetes rerun a rank"):
        be.start(StartRequest(job="j1", submission=1, attempt=1, spec=weak))
    assert "it is not found" in be.identity_weakened(spec({"runtime": "gone"}))


def test_show_submission_prints_the_trainjob_start_creates() -> None:
    api = FakeApi()
    be = backend(api)
    dry = preview(be, spec(TABLE, constraints=("pool=h100",)))
    shown = json.loads(dry.submission)
    assert shown["kind"] == "TrainJob"
    assert node_patch(shown)["spec"]["nodeSelector"] == {"pool": "h100"}
    assert not [k for k in api.objects if k[0] == "trainjobs"], "a preview creates nothing"
    made = created(be, api, spec(TABLE, constraints=("pool=h100",)))
    # Equal but for the names and the ids a dry run stands in for.
    assert set(shown["spec"]) == set(made["spec"])
    assert node_patch(shown) == node_patch(made)


def test_a_partial_security_context_carries_only_the_keys_given() -> None:
    api = FakeApi()
    pod = node_patch(created(backend(api), api, spec({"run_as_non_root": False})))["spec"]
    assert pod == {"securityContext": {"runAsNonRoot": False}}


def test_without_the_table_the_trainjob_carries_only_what_it_did() -> None:
    api = FakeApi()
    tj = created(backend(api), api, spec())
    assert "spec" not in tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
    assert tj["metadata"]["annotations"] == {names.GATE: "closed"}
    assert tj["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "8"}


_KEY = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=20)
_VALUE = st.text(string.ascii_letters + string.digits, max_size=20)
_EFFECT = st.sampled_from([None, "NoSchedule", "PreferNoSchedule", "NoExecute"])


@given(st.lists(st.tuples(_KEY, st.none() | _VALUE, _EFFECT), max_size=6))
def test_a_toleration_reads_back_as_written(
    items: list[tuple[str, str | None, str | None]],
) -> None:
    """Written in kubectl's taint form, every toleration reads back to its key, value and
    effect, and its body tolerates exactly that taint (Equal with a value, else Exists)."""
    written = tuple(
        k + ("" if v is None else f"={v}") + ("" if e is None else f":{e}") for k, v, e in items
    )
    read = JobSettings.from_config({"tolerations": list(written)}).tolerations
    assert read == tuple(Toleration(k, v, e) for k, v, e in items)
    for t in read:
        body = t.body()
        assert body["operator"] == ("Exists" if t.value is None else "Equal")
        assert ("effect" in body) == (t.effect is not None)
