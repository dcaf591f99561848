"""The backend over an in-memory API (no controllers run): what it writes, what it reads back,
and how many requests a poll costs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_adapter import fake_adapter
from jobdispatch.errors import Invalid, NotFound, Rejected, Unsupported, ValidationError
from jobdispatch.spi import ObjectRef, StartRequest
from jobdispatch.types import HoldMeta, JobSpec, ObjectState, Tristate
from jobdispatch_kubeflow import KubeflowBackend, Settings
from jobdispatch_kubeflow.api import file_token
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT, FakeApi, matches
from jobdispatch_kubeflow.names import check_name, job_selector, split_ref
from objects import cond, node, pod

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
RUNTIME = TEST_RUNTIME_OBJECT


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi()
    fake.put("clustertrainingruntimes", None, RUNTIME)
    return fake


@pytest.fixture
def backend(api: FakeApi) -> KubeflowBackend:
    return fake_adapter(api, lambda: NOW)


def request(job: str = "j1", n: int = 1, k: int = 1, **spec: Any) -> StartRequest:
    return StartRequest(
        job=job, submission=n, attempt=k, spec=JobSpec(command=("python", "train.py"), **spec)
    )


def running(backend: KubeflowBackend, api: FakeApi) -> ObjectRef:
    """Job ``j1``'s first object started and opened, its one pod running on a ready node."""
    ref = backend.start(request())
    backend.open(ref)
    api.put("pods", "dispatch", pod())
    api.put("nodes", None, node())
    return ref


def meta(instance: int, deadline: datetime = NOW + timedelta(minutes=1)) -> HoldMeta:
    return HoldMeta(instance=instance, deadline=deadline)


def test_start_creates_one_suspended_trainjob_under_its_discovery_name(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    ref = backend.start(request(nodes=2, env={"A": "1"}))
    assert ref.id == "dispatch/jd-j1-1-1"
    body = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert body["spec"]["suspend"] is True
    assert body["metadata"]["labels"] == {
        "jobdispatch.dev/job": "j1",
        "jobdispatch.dev/submission": "1",
        "jobdispatch.dev/attempt": "1",
        "jobdispatch.dev/managed": "true",
    }
    assert body["metadata"]["annotations"] == {"jobdispatch.dev/gate": "closed"}
    assert body["spec"]["runtimeRef"]["name"] == "dispatch-torch-test"
    assert body["spec"]["trainer"]["numNodes"] == 2
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in body["spec"]["trainer"]["env"]}
    assert env["A"] == "1" and env["JOBDISPATCH_ATTEMPT"] == "1"
    # The execution is the JobSet's restart attempt, read by each pod from its own label.
    assert env["JOBDISPATCH_EXECUTION"] == {
        "fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}
    }
    patch = body["spec"]["runtimePatches"][0]
    assert (
        patch["trainingRuntimeSpec"]["template"]["metadata"]["labels"]["jobdispatch.dev/job"]
        == "j1"
    )
    assert backend.inspect(ref).state is ObjectState.GATED


def test_a_second_start_of_the_same_name_is_rejected(backend: KubeflowBackend) -> None:
    backend.start(request())
    with pytest.raises(Rejected, match="exists already"):
        backend.start(request())


def test_a_time_limit_becomes_the_deadline_rounded_up(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    backend.start(request(time_limit=timedelta(seconds=90.2)))
    assert (
        api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]["spec"]["activeDeadlineSeconds"] == 91
    )


def test_a_working_directory_is_refused_as_unsupported(backend: KubeflowBackend) -> None:
    with pytest.raises(Unsupported, match="working-directory"):
        backend.start(request(working_dir="/data"))


def test_a_runtime_that_reruns_pods_is_refused_unless_the_site_allows_it(api: FakeApi) -> None:
    from jobdispatch_kubeflow import probe

    probe.forget()
    lenient = dict(
        RUNTIME,
        metadata={"name": "torch-distributed"},
        spec={"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}},
    )
    api.put("clustertrainingruntimes", None, lenient)
    strict = KubeflowBackend(
        Settings(namespace="dispatch", probe_ttl=0), api=api, clock=lambda: NOW
    )
    assert "backoffLimit 6" in strict.identity_weakened(request().spec)
    with pytest.raises(Unsupported, match="allow_rank_restart"):
        strict.start(request())
    allowed = KubeflowBackend(
        Settings(namespace="dispatch", probe_ttl=0, allow_rank_restart=True),
        api=api,
        clock=lambda: NOW,
    )
    assert allowed.start(request(job="j2")).id == "dispatch/jd-j2-1-1"


def test_a_long_job_id_is_refused_before_anything_is_created(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    with pytest.raises(Invalid, match="RFC 1035"):
        backend.start(request(job="x" * 60))
    assert not [k for k in api.objects if k[0] == "trainjobs"]


def test_open_lifts_suspend_and_is_idempotent(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = backend.start(request())
    backend.open(ref)
    obj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert obj["spec"]["suspend"] is False
    assert obj["metadata"]["annotations"]["jobdispatch.dev/gate"] == "open"
    writes = api.requests["PATCH trainjobs"]
    backend.open(ref)
    assert api.requests["PATCH trainjobs"] == writes
    assert backend.inspect(ref).state is ObjectState.PENDING


def test_open_of_an_unknown_ref_is_not_found(backend: KubeflowBackend) -> None:

    with pytest.raises(NotFound):
        backend.open(ObjectRef("dispatch/jd-nope-1-1"))
    with pytest.raises(NotFound):
        backend.open(ObjectRef("not-a-ref"))


def test_hold_and_release_by_instance(backend: KubeflowBackend) -> None:
    ref = backend.start(request())
    backend.open(ref)
    backend.hold(ref, meta(7))
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, 7)
    backend.release(ref, meta(8))
    assert backend.inspect(ref).hold_instance == 7, "another instance's release must not lift it"
    backend.release(ref, meta(7))
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.PENDING, None)


def test_a_hold_over_the_gate_stays_gated_after_release_and_open_keeps_the_hold(
    backend: KubeflowBackend,
) -> None:
    ref = backend.start(request())
    backend.hold(ref, meta(3))
    backend.open(ref)
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, 3), "open must not lift a hold"
    backend.release(ref, meta(3))
    assert backend.inspect(ref).state is ObjectState.PENDING
    ref2 = backend.start(request(k=2))
    backend.hold(ref2, meta(4))
    backend.release(ref2, meta(4))
    assert backend.inspect(ref2).state is ObjectState.GATED


def test_hold_and_release_refuse_past_their_deadline(backend: KubeflowBackend) -> None:
    ref = backend.start(request())
    with pytest.raises(Rejected, match="deadline"):
        backend.hold(ref, meta(1, NOW - timedelta(seconds=1)))
    backend.hold(ref, meta(1))
    with pytest.raises(Rejected, match="deadline"):
        backend.release(ref, meta(1, NOW - timedelta(seconds=1)))


def test_hold_of_a_running_object_is_rejected(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = running(backend, api)
    assert backend.inspect(ref).state is ObjectState.RUNNING
    with pytest.raises(Rejected, match="running"):
        backend.hold(ref, meta(1))


def test_stop_writes_its_reason_deletes_and_keeps_a_receipt(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    ref = running(backend, api)
    backend.stop(ref, "operator asked")
    assert api.requests["DELETE trainjobs"] == 1
    stopped = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert stopped["spec"]["suspend"] is True, "a JobSet the controller applies again must not run"
    assert stopped["metadata"]["annotations"]["jobdispatch.dev/stop"] == "operator asked"
    assert stopped["metadata"]["annotations"]["jobdispatch.dev/stopped-run"] == "0"
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.RUNNING and "clean-up pending: 1 pods" in obs.detail
    assert backend.ceased(ref).ceased is Tristate.NO
    # The pod's container is killed: it fails, and is then deleted.
    from objects import terminated

    api.put("pods", "dispatch", pod(phase="Failed", containers=[terminated(143)]))
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[-1].cause
    assert cause is not None and "operator asked" in cause.detail
    assert str(cause.kind) == "cancelled"
    assert backend.ceased(ref).ceased is Tristate.YES
    del api.objects[("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")]
    assert "clean-up clear" in backend.inspect(ref).detail
    backend.stop(ref, "again")
    assert api.requests["DELETE trainjobs"] == 1, "a second stop must not act"
    backend.forget(ref)
    with pytest.raises(NotFound):
        backend.inspect(ref)
    backend.stop(ref, "gone")  # already gone: success


def test_find_many_costs_one_list_per_kind_whatever_the_number_of_jobs(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    """One LIST per kind, by selectors that name no job (a selector naming every job id got
    HTTP 431 at 60,000 jobs), and a GET of the one node a pod is bound to: never a LIST of the
    cluster's nodes."""
    jobs = [f"j{i}" for i in range(30)]
    for job in jobs:
        ref = backend.start(request(job=job))
        backend.open(ref)
    api.put("pods", "dispatch", pod(name="p", jobset_name="jd-j3-1-1"))
    api.put("nodes", None, node())
    api.requests.clear()
    found = backend.find_many(jobs)
    assert all(len(found[j].objects) == 1 for j in jobs)
    assert found["j3"].objects[0].state is ObjectState.RUNNING
    lists = {
        "LIST trainjobs": 1,
        "LIST jobsets": 1,
        "LIST jobs": 1,
        "LIST pods": 1,
        "GET nodes": 1,
    }
    # The first look at j3's run pins the node it runs on: one write, once.
    assert dict(api.requests) == {**lists, "PATCH trainjobs": 1}
    api.requests.clear()
    backend.find_many(jobs)
    assert dict(api.requests) == lists


def test_no_selector_grows_with_the_number_of_jobs(
    backend: KubeflowBackend, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    selectors: list[str | None] = []
    listing = api.list

    def counted(
        kind: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, object]], str]:
        selectors.append(label_selector)
        return listing(
            kind, namespace, label_selector=label_selector, field_selector=field_selector
        )

    monkeypatch.setattr(api, "list", counted)
    for n in (2, 40):
        jobs = [f"s{n}x{i}" for i in range(n)]
        for job in jobs:
            backend.open(backend.start(request(job=job)))
        selectors.clear()
        found = backend.find_many(jobs)
        assert all(len(found[j].objects) == 1 for j in jobs)
        assert selectors and all(len(s or "") < 40 for s in selectors), selectors


def test_find_many_filters_states_and_never_shows_another_jobs_objects(
    backend: KubeflowBackend,
) -> None:
    a = backend.start(request(job="ja"))
    backend.start(request(job="jb"))
    backend.open(a)
    found = backend.find_many(["ja"], states=[ObjectState.GATED])
    assert found["ja"].objects == ()
    assert [o.ref for o in backend.find("ja").objects] == [a]


def test_ended_trainjob_is_shown_with_its_cause(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = backend.start(request())
    backend.open(ref)
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    tj["status"] = {"conditions": [cond("Failed", "FailedJobs")]}
    from objects import terminated

    api.put("pods", "dispatch", pod(phase="Failed", containers=[terminated(137, "OOMKilled")]))
    api.put("nodes", None, node())
    cause = backend.inspect(ref).executions[-1].cause
    assert cause is not None and str(cause.kind) == "out-of-memory"


def test_capabilities_follow_rbac_and_discovery(backend: KubeflowBackend, api: FakeApi) -> None:
    caps = backend.capabilities()
    assert caps[next(iter(caps))] is not None
    from jobdispatch.types import Capability
    from jobdispatch_kubeflow import probe

    assert caps[Capability.HOLD].answer is Tristate.YES
    api.allowed = False
    probe.forget()
    assert backend.capabilities()[Capability.HOLD].answer is Tristate.NO
    api.groups.pop("trainer.kubeflow.org")
    probe.forget()
    assert all(s.answer is Tristate.NO for s in backend.capabilities().values())


def test_output_reads_the_log_of_the_rank(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = backend.start(request())
    api.put("pods", "dispatch", pod(name="p0", index=0))
    api.logs["p0"] = b"hello\n"
    assert backend.output(ref).read() == b"hello\n"
    with pytest.raises(NotFound, match="rank 1"):
        backend.output(ref, rank=1)
    with pytest.raises(Unsupported, match="stderr"):
        backend.output(ref, stream="stderr")


def test_the_token_file_is_read_on_every_use(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    token = file_token(str(path))
    assert token() == "one"
    path.write_text("two\n")
    assert token() == "two"


def test_configuration_refuses_unknown_keys_and_contradictions() -> None:
    with pytest.raises(ValidationError, match="bogus"):
        Settings.from_config({"bogus": 1})
    with pytest.raises(ValidationError, match="name"):
        Settings.from_config({"runtime": {"kind": "TrainingRuntime"}})
    with pytest.raises(ValidationError, match="in_cluster"):
        Settings.from_config({"in_cluster": True, "kubeconfig": "/k"})
    with pytest.raises(ValidationError, match="namespace"):
        Settings.from_config({"namespace": "Not_DNS"})
    s = Settings.from_config({"namespace": "ns", "capabilities": {"hold": "no"}})
    assert s.namespace == "ns" and s.declared


def test_names_and_selectors() -> None:
    assert job_selector(["b", "a", "b"]) == "jobdispatch.dev/job in (a,b)"
    assert matches("jobdispatch.dev/job in (a,b)", {"jobdispatch.dev/job": "b"})
    assert not matches("jobdispatch.dev/job=a", {"jobdispatch.dev/job": "b"})
    assert check_name("jd-abc-1-2") == "jd-abc-1-2"

    assert split_ref(ObjectRef("ns/jd-a-1-1")) == ("ns", "jd-a-1-1")


def test_the_hook_module_does_not_import_the_kubernetes_client() -> None:
    code = "import sys, jobdispatch_kubeflow._hooks; print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _GoneOnce(FakeApi):
    """A watch of TrainJobs whose first resourceVersion is too old (410), then one change
    (the pod sentinel's watch of pods sees nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.versions: list[str] = []

    def watch(
        self, kind: str, namespace: str | None, *, resource_version: str, **_: Any
    ) -> Iterator[dict[str, Any]]:
        from jobdispatch_kubeflow.api import Gone

        if kind != "trainjobs":
            return iter(())
        self.requests[f"WATCH {kind}"] += 1
        self.versions.append(resource_version)
        if len(self.versions) == 1:
            self._version += 5  # the server moved on; the version asked for is compacted
            raise Gone("too old resource version")
        obj = self.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
        return iter(
            [
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "999"}}},
                {"type": "MODIFIED", "object": obj},
            ]
        )


def test_watch_lists_again_after_410_gone_and_follows_changes() -> None:
    from jobdispatch_kubeflow import probe

    probe.forget()
    api = _GoneOnce()
    api.put("clustertrainingruntimes", None, RUNTIME)
    backend = KubeflowBackend(
        Settings.from_config({"namespace": "dispatch", "runtime": {"name": "dispatch-torch-test"}}),
        api=api,
        clock=lambda: NOW,
    )
    ref = backend.start(request())
    seen = list(backend.watch("j1"))
    backend.close()
    assert [o.ref for o in seen] == [ref, ref, ref], "initial list, the list after 410, the change"
    assert api.requests["LIST trainjobs"] == 2
    assert (len(api.versions) == 2 and api.versions[0] == api.versions[1]) or api.versions[1]


def test_kueue_installed_is_said_in_the_hold_answer(backend: KubeflowBackend, api: FakeApi) -> None:
    from jobdispatch.types import Capability
    from jobdispatch_kubeflow import probe

    api.groups["kueue.x-k8s.io"] = ("v1beta2",)
    probe.forget()
    assert "Kueue is installed" in backend.capabilities()[Capability.HOLD].detail


def test_the_real_client_reports_a_cluster_that_does_not_answer_as_unreachable(
    tmp_path: Path,
) -> None:
    from jobdispatch.errors import Unreachable
    from jobdispatch_kubeflow.api import KubeApi

    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: n\n  cluster:\n"
        "    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context:\n"
        "    cluster: n\n    user: u\ncurrent-context: c\n"
    )
    calls: list[int] = []

    def token() -> str:
        calls.append(1)
        return "t"

    api = KubeApi(kubeconfig=str(config), token=token, timeout=2)
    with pytest.raises(Unreachable, match="Connection refused"):
        api.list("trainjobs", "dispatch")
    with pytest.raises(Unreachable):
        api.list("trainjobs", "dispatch")
    assert len(calls) == 2, "the token is read for every request"
    with pytest.raises(Unreachable, match="cannot load"):
        KubeApi(kubeconfig=str(tmp_path / "missing")).get("pods", "dispatch", "p")


def test_a_second_stop_racing_the_first_keeps_the_first_reason(
    backend: KubeflowBackend, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A person's cancel stops the TrainJob; the supervisor, seeing the cancel committed, stops
    # it too before the first stop's delete has landed. Its reason overwrote the person's, so
    # the receipt (the cause's detail) said "the job has its outcome" (seen on the control
    # plane, tests/test_kubeflow_end_to_end.py).
    ref = running(backend, api)
    deletes = []
    monkeypatch.setattr(api, "delete", lambda *a, **k: deletes.append(a))  # not landed yet
    backend.stop(ref, "not needed")
    backend.stop(ref, "stopped: the job has its outcome")
    stopped = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert stopped["metadata"]["annotations"]["jobdispatch.dev/stop"] == "not needed"
    assert stopped["spec"]["suspend"] is True
    assert len(deletes) == 2


def test_open_after_stop_never_lifts_the_gate(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = backend.start(request())
    api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]["metadata"]["finalizers"].append("hold-on")
    backend.stop(ref, "retired")
    backend.open(ref)
    obj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert obj["spec"]["suspend"] is True
    assert backend.inspect(ref).state is ObjectState.ENDED


def test_a_stopped_run_is_cancelled_even_when_its_pods_went_before_anyone_looked(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    ref = running(backend, api)
    backend.stop(ref, "ops")
    del api.objects[("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")]
    obs = backend.inspect(ref)
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[-1].cause
    assert cause is not None and str(cause.kind) == "cancelled"


def test_a_webhook_that_does_not_answer_means_nothing_was_written() -> None:
    import json as _json

    from jobdispatch.errors import OutcomeUnknown, Unreachable
    from jobdispatch_kubeflow.api import _status_error

    # The status the real API server returned for a create while the Trainer was down.
    body = _json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": 'Internal error occurred: failed calling webhook "defaulter.trainjob.'
            'trainer.kubeflow.org": failed to call webhook: Post "https://kubeflow-trainer-'
            "controller-manager.kubeflow-system.svc:19445/mutate-trainer-kubeflow-org-v1alpha1"
            '-trainjob?timeout=10s": dial tcp 127.0.0.1:19445: connect: connection refused',
            "reason": "InternalError",
            "code": 500,
        }
    ).encode()
    assert isinstance(_status_error(500, body, "POST trainjobs", write=True), Unreachable)
    other = _json.dumps({"message": "etcdserver: request timed out", "code": 500}).encode()
    assert isinstance(_status_error(500, other, "POST trainjobs", write=True), OutcomeUnknown)


def test_a_poll_pins_what_a_dying_pod_shows_once(backend: KubeflowBackend, api: FakeApi) -> None:
    ref = backend.start(request())
    backend.open(ref)
    api.put("nodes", None, node())
    api.put(
        "pods",
        "dispatch",
        pod(deleting=True, conditions=[cond("DisruptionTarget", "EvictionByEvictionAPI")]),
    )
    backend.find("j1")
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert '"preempted"' in tj["metadata"]["annotations"]["jobdispatch.dev/evidence-0"]
    writes = api.requests["PATCH trainjobs"]
    backend.find("j1")
    assert api.requests["PATCH trainjobs"] == writes, "pinned once"
    # The pod goes; the Job fails; the TrainJob fails: the pin still tells why.
    del api.objects[("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")]
    tj["status"] = {"conditions": [cond("Failed", "FailedJobs")]}
    cause = backend.inspect(ref).executions[-1].cause
    assert cause is not None and str(cause.kind) == "preempted"


def test_a_node_deleted_with_its_pods_is_named_from_the_placement_pinned_at_the_start(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    """As on the control plane: the node under a run is deleted, PodGC fails its pod and the
    Job controller lets it go before any poll sees it, and the Job fails saying nothing of why.
    The placement the first look pinned still names the loss."""
    ref = backend.start(request())
    backend.open(ref)
    api.put("nodes", None, {**node(), "metadata": {**node()["metadata"], "uid": "u-1"}})
    api.put("pods", "dispatch", pod())
    assert backend.find("j1").objects[0].state is ObjectState.RUNNING
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert tj["metadata"]["annotations"]["jobdispatch.dev/placement-0"] == '{"kwok-node-1": "u-1"}'
    del api.objects[("nodes", None, "kwok-node-1")]
    del api.objects[("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")]
    tj["status"] = {"conditions": [cond("Failed", "FailedJobs")]}
    (obs,) = backend.find("j1").objects
    cause = obs.executions[-1].cause
    assert obs.state is ObjectState.ENDED
    assert cause is not None and str(cause.kind) == "node-lost", cause
    assert "node kwok-node-1 was deleted" in cause.detail


def test_follow_ends_when_the_object_ends_whatever_the_servers_follow_does(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    """kwok's follow stream never ends (seen on the control plane): the adapter must not rely on
    it, and must end its own stream once the object has ended."""

    def no_server_follow(namespace, pod, *, container, follow):  # type: ignore[no-untyped-def]
        assert not follow, "the server's follow stream may never end"
        return FakeApi.log(api, namespace, pod, container=container, follow=False)

    api.log = no_server_follow  # type: ignore[method-assign]
    ref = backend.start(request())
    backend.open(ref)
    api.put("nodes", None, node())
    api.put("pods", "dispatch", pod(name="p0"))
    api.logs["p0"] = b"one\n"
    stream = backend.output(ref, follow=True)
    # The log stream is buffered (read1 returns what has come without waiting for more).
    assert stream.read1(100) == b"one\n"  # type: ignore[attr-defined]
    api.logs["p0"] += b"two\n"
    from objects import terminated

    api.put(
        "pods",
        "dispatch",
        pod(name="p0", phase="Succeeded", containers=[terminated(0, "Completed")]),
    )
    api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]["status"] = {
        "conditions": [cond("Complete", "AllJobsCompleted")]
    }
    assert stream.read() == b"two\n"


def test_forget_tries_again_when_the_collector_changed_the_finalizers_meanwhile(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    ref = backend.start(request())
    backend.stop(ref, "done")
    real_patch = api.patch
    calls = []

    def racing_patch(kind, namespace, name, body):  # type: ignore[no-untyped-def]
        calls.append(body)
        if len(calls) == 1:
            obj = api.objects[(kind, namespace, name)]
            api._bump(obj)  # the collector's write lands first
        return real_patch(kind, namespace, name, body)

    api.patch = racing_patch  # type: ignore[method-assign]
    backend.forget(ref)
    assert len(calls) == 2
    with pytest.raises(NotFound):
        backend.inspect(ref)


def _deleted_by_someone_else(api: FakeApi) -> None:
    # kubectl delete trainjob (background): the receipt finalizer keeps it, deleting.
    api.delete("trainjobs", "dispatch", "jd-j1-1-1", propagation="Background")
    assert api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]["metadata"]["deletionTimestamp"]


def test_a_trainjob_someone_else_deleted_is_stopped_by_the_next_look_and_let_go_later(
    api: FakeApi,
) -> None:
    """Issue 35 item 2: the next observation suspends it (its pods go), it ends cancelled by
    an actor outside dispatch, and its receipt is released once RECEIPT_KEEP has passed."""
    from jobdispatch_kubeflow import backend as module
    from jobdispatch_kubeflow import classify
    from objects import terminated

    deleted_at = datetime(2026, 12, 1, tzinfo=UTC)  # the fake's deletionTimestamp
    clock = [deleted_at + timedelta(seconds=5)]
    backend = fake_adapter(api, lambda: clock[0])
    running(backend, api)
    _deleted_by_someone_else(api)
    (obs,) = backend.find("j1").objects
    assert obs.state is ObjectState.RUNNING and "clean-up pending: 1 pods" in obs.detail
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert tj["spec"]["suspend"] is True, "the observation suspends it: its pods go"
    assert tj["metadata"]["annotations"]["jobdispatch.dev/stopped-run"] == "0"
    assert "jobdispatch.dev/stop" not in tj["metadata"]["annotations"]
    # The suspension kills the pod's container: the run has ended, cancelled from outside.
    api.put("pods", "dispatch", pod(phase="Failed", containers=[terminated(143)]))
    (obs,) = backend.find("j1").objects
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[-1].cause
    assert cause is not None and str(cause.kind) == "cancelled"
    assert str(cause.provenance) == "actor" and cause.actor == classify.OUTSIDE
    assert "someone other than dispatch" in cause.detail
    del api.objects[("pods", "dispatch", "jd-j1-1-1-node-0-0-abcde")]
    backend.find("j1")
    assert ("trainjobs", "dispatch", "jd-j1-1-1") in api.objects, "the receipt is kept a while"
    clock[0] = deleted_at + module.RECEIPT_KEEP
    backend.find("j1")
    assert ("trainjobs", "dispatch", "jd-j1-1-1") not in api.objects, "and then let go"


def test_a_stop_of_a_trainjob_someone_else_deleted_suspends_it(
    backend: KubeflowBackend, api: FakeApi
) -> None:
    ref = running(backend, api)
    _deleted_by_someone_else(api)
    backend.stop(ref, "jobdispatch cancel")
    tj = api.objects[("trainjobs", "dispatch", "jd-j1-1-1")]
    assert tj["spec"]["suspend"] is True
    assert api.requests["DELETE trainjobs"] == 1, "deleted already: not deleted again"
    writes = api.requests["PATCH trainjobs"]
    backend.stop(ref, "again")
    assert api.requests["PATCH trainjobs"] == writes, "suspended already: nothing more"
