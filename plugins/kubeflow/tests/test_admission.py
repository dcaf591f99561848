"""The Kueue admission controller without a cluster: ``decide`` (pure), the Lease over the
in-memory API, one reconcile round, the RBAC command, and the adapter's Kueue mode."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import objects
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import Rejected
from jobdispatch.spi import StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import CallMeta, Capability, HoldMeta, JobSpec, ObjectState, Tristate
from jobdispatch_kubeflow import KubeflowBackend, admission, names, probe
from jobdispatch_kubeflow.fake import FakeApi

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T0 = "2026-12-01T11:59:00Z"


def trainjob(open_id: str | None = None, deadline: datetime | None = None, **labels: str) -> Any:
    annotations = {names.GATE: "open" if open_id else "closed"}
    if open_id:
        annotations[names.OPEN] = admission.open_annotation(open_id, deadline)
    return {
        "metadata": {
            "name": "jd-j-1-1",
            "namespace": "dispatch",
            "uid": "u1",
            "labels": {names.JOB: "j", **labels},
            "annotations": annotations,
        }
    }


def workload(spent: str | None = None, check_time: str = T0) -> Any:
    annotations = {}
    if spent:
        annotations[names.ADMISSION_SPENT] = json.dumps({"open": spent, "check_time": check_time})
    return {"metadata": {"name": "wl", "namespace": "dispatch", "annotations": annotations}}


def pending(message: str = "", ltt: str = T0) -> Any:
    return {
        "name": "jobdispatch-admission",
        "state": "Pending",
        "message": message,
        "lastTransitionTime": ltt,
    }


def test_no_open_stays_pending() -> None:
    answer = admission.decide(pending(), workload(), trainjob(), NOW)
    assert answer == admission.Answer("Pending", "gated by dispatch: waiting for its open")
    # The same message again is not written again.
    assert admission.decide(pending(answer.message), workload(), trainjob(), NOW) is None


def test_a_fresh_open_is_spent_then_ready() -> None:
    answer = admission.decide(pending(), workload(), trainjob("o1", NOW + timedelta(1)), NOW)
    assert answer == admission.Answer("Ready", "opened by dispatch (open o1)", spend="o1")


def test_an_open_past_its_deadline_is_refused() -> None:
    answer = admission.decide(
        pending(), workload(), trainjob("o1", NOW - timedelta(seconds=1)), NOW
    )
    assert answer is not None and answer.state == "Pending" and "too late" in answer.message


def test_spent_but_not_answered_is_answered_after_a_restart() -> None:
    # Killed between recording the spend and answering Ready: the check has not moved since.
    answer = admission.decide(pending(ltt=T0), workload("o1", T0), trainjob("o1"), NOW)
    assert answer == admission.Answer("Ready", "opened by dispatch (open o1)")


def test_after_an_eviction_the_spent_open_no_longer_admits() -> None:
    reset = pending("Reset to Pending after eviction. Previously: Ready", "2026-12-01T11:59:30Z")
    answer = admission.decide(reset, workload("o1", T0), trainjob("o1"), NOW)
    assert answer is not None and answer.state == "Rejected"
    assert "never readmitted" in answer.message
    # Rejected is Kueue's from then on (it deactivates the Workload): nothing admits it again.
    rejected = dict(reset, state="Rejected", message=answer.message)
    assert admission.decide(rejected, workload("o1", T0), trainjob("o2"), NOW) is None


def test_not_a_dispatch_submission_is_ready_and_other_states_are_left_alone() -> None:
    other: dict[str, Any] = {"metadata": {"labels": {}, "annotations": {}}}
    assert admission.decide(pending(), workload(), other, NOW) == admission.Answer(
        "Ready", "not a dispatch submission: not gated by dispatch"
    )
    for state in ("Ready", "Retry", "Rejected"):
        assert (
            admission.decide(dict(pending(), state=state), workload(), trainjob("o"), NOW) is None
        )
    assert admission.decide(pending(), workload(), None, NOW) is None


@given(
    opens=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8),
    evict=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_each_open_admits_at_most_once(opens: list[str], evict: list[bool]) -> None:
    """Replaying opens and evictions in any order, an open id never yields two admissions."""
    wl = workload()
    check = pending()
    admitted_by: list[str] = []
    tick = 0
    for open_id, evicted in zip(opens, evict, strict=False):
        for _ in range(2):  # two rounds each: a repeated round must not admit again
            answer = admission.decide(check, wl, trainjob(open_id), NOW)
            if answer is not None and answer.state == "Rejected":
                check = dict(check, state="Rejected")
            if answer is None or answer.state != "Ready":
                continue
            if answer.spend:
                previous = wl["metadata"]["annotations"].get(names.ADMISSION_SPENT)
                wl = {
                    "metadata": {
                        "annotations": {
                            names.ADMISSION_SPENT: admission.spent_annotation(
                                answer.spend, check["lastTransitionTime"], previous
                            )
                        }
                    }
                }
            tick += 1
            check = dict(check, state="Ready", lastTransitionTime=f"2026-12-01T12:00:{tick:02d}Z")
            admitted_by.append(open_id)
        if evicted and check["state"] == "Ready":
            tick += 1
            check = pending(
                "Reset to Pending after eviction. Previously: Ready",
                f"2026-12-01T12:00:{tick:02d}Z",
            )
    assert len(admitted_by) == len(set(admitted_by)), admitted_by


# ---------------------------------------------------------------------------- Lease


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_only_one_candidate_holds_the_lease_and_a_standby_takes_over_when_it_lapses() -> None:
    api, clock = FakeApi(), Clock()
    a = admission.Lease(api, "ns", "l", "a", duration=10, renew_deadline=6, monotonic=clock)
    b = admission.Lease(api, "ns", "l", "b", duration=10, renew_deadline=6, monotonic=clock)
    assert a.round() and a.held()
    assert not b.round() and not b.held()
    clock.t = 5
    assert a.round() and not b.round()
    # a stops renewing: a lapses for itself first, then b takes over.
    clock.t = 12
    assert not a.held()
    assert not b.round()  # b saw a's renewal at 5 only now: it waits the full duration
    clock.t = 23
    assert b.round() and b.held()
    lease = api.get("leases", "ns", "l")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert not a.round()


def test_a_released_lease_is_taken_at_once() -> None:
    api, clock = FakeApi(), Clock()
    a = admission.Lease(api, "ns", "l", "a", duration=10, renew_deadline=6, monotonic=clock)
    b = admission.Lease(api, "ns", "l", "b", duration=10, renew_deadline=6, monotonic=clock)
    assert a.round()
    a.release()
    assert not a.held()
    assert b.round()


def test_renew_deadline_must_be_shorter_than_the_duration() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        admission.Lease(FakeApi(), "ns", "l", "a", duration=5, renew_deadline=5)


# ---------------------------------------------------------------------------- one round


def cluster() -> FakeApi:
    api = FakeApi()
    api.put(
        "admissionchecks",
        None,
        {
            "metadata": {"name": "jobdispatch-admission", "generation": 1},
            "spec": {"controllerName": admission.CONTROLLER_NAME},
        },
    )
    api.put("trainjobs", "dispatch", trainjob("o1"))
    api.put(
        "workloads",
        "dispatch",
        {
            "metadata": {
                "name": "wl",
                "namespace": "dispatch",
                "ownerReferences": [{"kind": "TrainJob", "uid": "u1", "name": "jd-j-1-1"}],
            },
            "status": {"admissionChecks": [pending()]},
        },
    )
    return api


def test_a_round_marks_the_check_active_spends_the_open_and_answers_ready() -> None:
    api = cluster()
    lease = admission.Lease(api, "dispatch", "l", "me")
    assert lease.round()
    ctl = admission.Controller(api, lease, clock=lambda: NOW)
    assert ctl.reconcile() == 1
    wl = api.get("workloads", "dispatch", "wl")
    assert wl is not None
    assert json.loads(wl["metadata"]["annotations"][names.ADMISSION_SPENT])["open"] == "o1"
    (entry,) = wl["status"]["admissionChecks"]
    assert entry["state"] == "Ready" and entry["message"] == "opened by dispatch (open o1)"
    ac = api.get("admissionchecks", None, "jobdispatch-admission")
    assert ac is not None
    assert ac["status"]["conditions"][0]["type"] == "Active"
    assert ctl.reconcile() == 0  # nothing more to say


def test_a_following_controller_reads_its_caches_not_a_list_per_round() -> None:
    """Once its followers have listed, a round lists no Workloads and no TrainJobs: they come
    from the list-watch caches (spec 0012 §3)."""
    api = cluster()
    lease = admission.Lease(api, "dispatch", "l", "me")
    assert lease.round()
    ctl = admission.Controller(api, lease, clock=lambda: NOW)
    ctl.follow()
    try:
        eventually(
            lambda: ctl.workloads.synced.is_set() and ctl.trainjobs.synced.is_set(),
            "both followers listed",
            every=0.01,
        )
        before = api.requests.copy()
        assert ctl.reconcile() == 1
        made = api.requests - before
        assert made["LIST workloads"] == 0 and made["LIST trainjobs"] == 0
        assert made["PATCH workloads/status"] == 1
        ctl.unfollow()
        eventually(
            lambda: not ctl._followers["workloads"].running, "the follower stopped", every=0.01
        )
        before = api.requests.copy()
        ctl.reconcile()
        assert (api.requests - before)["LIST workloads"] == 1, "a stopped follower's cache ages"
    finally:
        ctl.unfollow()


def test_a_follower_writes_nothing() -> None:
    api = cluster()
    assert admission.Lease(api, "dispatch", "l", "leader").round()
    follower = admission.Lease(api, "dispatch", "l", "follower")
    assert not follower.round()
    before = api.get("workloads", "dispatch", "wl")
    assert admission.Controller(api, follower, clock=lambda: NOW).reconcile() == 0
    assert api.get("workloads", "dispatch", "wl") == before


# ---------------------------------------------------------------------------- RBAC and CLI


def test_rbac_prints_the_roles_the_controller_uses(capsys: pytest.CaptureFixture[str]) -> None:
    assert admission.main(["rbac", "--namespace", "ops"]) == 0
    docs = [json.loads(d) for d in capsys.readouterr().out.split("---\n") if d.strip()]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    }
    rules = {
        (r["apiGroups"][0], res): set(r["verbs"])
        for r in kinds["ClusterRole"]["rules"]
        for res in r["resources"]
    }
    assert "patch" in rules[("kueue.x-k8s.io", "workloads/status")]
    assert "patch" in rules[("kueue.x-k8s.io", "admissionchecks/status")]
    assert rules[("trainer.kubeflow.org", "trainjobs")] == {"get", "list", "watch"}
    assert kinds["Role"]["metadata"]["namespace"] == "ops"
    assert kinds["Role"]["rules"][0]["resources"] == ["leases"]


def test_run_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        admission.main(["run"])  # no --lease-namespace
    assert exc.value.code == 2
    assert "--lease-namespace" in capsys.readouterr().err
    assert admission.main(["run", "--lease-namespace", "x", "--interval", "0"]) == 2
    assert (
        admission.main(
            ["run", "--lease-namespace", "x", "--lease-duration", "5", "--renew-deadline", "9"]
        )
        == 2
    )
    assert "renew_deadline" in capsys.readouterr().err


# ---------------------------------------------------------------------------- Kueue mode


def kueue_backend() -> tuple[KubeflowBackend, FakeApi]:
    """Kueue mode on LocalQueue q, whose ClusterQueue lists dispatch's check answered by a live
    controller (the readmission gate stands)."""
    made: tuple[KubeflowBackend, FakeApi] = objects.kueue_backend(
        gated=True, renewed=NOW, priority_class="low"
    )
    return made


def test_kueue_mode_starts_gated_by_admission_gated_by_and_open_writes_the_open() -> None:
    backend, api = kueue_backend()
    ref = backend.start(
        StartRequest(job="j", submission=1, attempt=1, spec=JobSpec(command=("true",)))
    )
    md = api.objects[("trainjobs", "dispatch", "jd-j-1-1")]["metadata"]
    assert md["labels"][names.QUEUE_NAME] == "q" and md["labels"][names.PRIORITY_CLASS] == "low"
    assert md["annotations"][names.ADMISSION_GATED_BY] == "jobdispatch.dev/admission"
    backend.open(ref, CallMeta(deadline=NOW + timedelta(minutes=1)))
    tj = api.objects[("trainjobs", "dispatch", "jd-j-1-1")]
    assert names.ADMISSION_GATED_BY not in tj["metadata"]["annotations"]
    assert tj["spec"]["suspend"] is True  # Kueue's to lift
    opened = json.loads(tj["metadata"]["annotations"][names.OPEN])
    assert opened["deadline"] == (NOW + timedelta(minutes=1)).isoformat()
    assert backend.inspect(ref).state is ObjectState.PENDING
    # Suspended again by Kueue (an eviction): the next open is a new one.
    backend.open(ref, CallMeta(deadline=NOW + timedelta(minutes=1)))
    again = json.loads(
        api.objects[("trainjobs", "dispatch", "jd-j-1-1")]["metadata"]["annotations"][names.OPEN]
    )
    assert again["id"] != opened["id"]
    # Admitted (Kueue unsuspended it): an open changes nothing.
    api.objects[("trainjobs", "dispatch", "jd-j-1-1")]["spec"]["suspend"] = False
    before = api.requests.total()
    backend.open(ref)
    assert api.requests.total() == before + 1  # the read only


def test_kueue_mode_holds_deactivate_the_workload_and_release_reactivates() -> None:
    """Kueue owns suspend: a hold is the instance annotation and Workload.spec.active=false; an
    open under the hold keeps Kueue's gate; the release reactivates and makes the held open."""
    backend, api = kueue_backend()
    ref = backend.start(
        StartRequest(job="j", submission=1, attempt=1, spec=JobSpec(command=("true",)))
    )
    key = ("trainjobs", "dispatch", "jd-j-1-1")
    api.objects[key]["spec"]["suspend"] = True  # Kueue's webhook suspends it at creation
    uid = api.objects[key]["metadata"].setdefault("uid", "u-1")
    api.create(
        "workloads",
        "dispatch",
        {
            "metadata": {
                "name": "trainjob-jd-j-1-1-abc",
                "ownerReferences": [{"kind": "TrainJob", "uid": uid}],
            },
            "spec": {"active": True},
            "status": {},
        },
    )
    wl_key = ("workloads", "dispatch", "trainjob-jd-j-1-1-abc")
    soon = NOW + timedelta(minutes=1)
    facts = probe.ClusterFacts(
        groups={"trainer.kubeflow.org": ("v1alpha1",), "jobset.x-k8s.io": ("v1alpha2",)},
        allowed=dict.fromkeys(probe.NEEDED, True),
        runtime_found=True,
    )
    assert probe.capabilities(facts, {}, kueue_mode=True)[Capability.HOLD].answer is Tristate.YES
    refused = attrs.evolve(facts, allowed={**facts.allowed, "patch workloads": False})
    hold_no = probe.capabilities(refused, {}, kueue_mode=True)[Capability.HOLD]
    assert hold_no.answer is Tristate.NO and "patch workloads" in hold_no.detail
    backend.hold(ref, HoldMeta(instance=7, deadline=soon))
    assert api.objects[wl_key]["spec"]["active"] is False
    obs = backend.inspect(ref)
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, 7)
    backend.open(ref, CallMeta(deadline=soon))
    annotations = api.objects[key]["metadata"]["annotations"]
    assert annotations[names.GATE] == "open" and names.OPEN not in annotations
    assert annotations[names.ADMISSION_GATED_BY] == "jobdispatch.dev/admission"
    backend.release(ref, HoldMeta(instance=8, deadline=soon))  # not the standing instance
    assert api.objects[wl_key]["spec"]["active"] is False
    backend.release(ref, HoldMeta(instance=7, deadline=soon))
    annotations = api.objects[key]["metadata"]["annotations"]
    assert api.objects[wl_key]["spec"]["active"] is True and names.HOLD not in annotations
    assert names.ADMISSION_GATED_BY not in annotations and names.OPEN in annotations
    with pytest.raises(Rejected):
        backend.hold(ref, HoldMeta(instance=9, deadline=NOW - timedelta(seconds=1)))


def test_kueue_mode_plans_its_requeues_as_the_supervisors_and_says_why() -> None:
    """Kueue requeues a preempted or pods-ready-timed-out Workload by itself, but dispatch's
    admission check holds the readmission: the plan gives those rules to the supervisor, and
    its support says it is Kueue's requeuing; other rules answer as without Kueue."""
    from jobdispatch.plan import make_plan
    from jobdispatch.types import Action, CauseKind, Enforcer, RecoveryPolicy, Rule, Tristate

    backend, _ = kueue_backend()
    rules = (
        Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=2),
        Rule(on=(CauseKind.NO_CAPACITY,), action=Action.REQUEUE, budget=1),
        Rule(on=(CauseKind.NON_ZERO_EXIT,), action=Action.RESUBMIT, budget=1),
    )
    spec = JobSpec(command=("true",), recovery=RecoveryPolicy(rules=rules))
    preempted, requeue, exit_rule = backend.rules(spec, spec.recovery)
    assert preempted.native.answer is Tristate.NO and "Kueue requeues on preempted" in (
        preempted.native.detail
    )
    assert "backoffLimitCount" in preempted.native.detail
    assert preempted.perform.answer is Tristate.YES
    assert requeue.native.answer is Tristate.NO and requeue.perform.answer is Tristate.NO
    assert "Kueue" not in exit_rule.native.detail
    plan = make_plan(backend, None, spec, supervised=True, accept_unenforced=(1,))
    assert [a.enforcer for a in plan.rules] == [
        Enforcer.SUPERVISOR,
        Enforcer.NOBODY,
        Enforcer.SUPERVISOR,
    ]
    assert "admission check holds the readmission" in plan.rules[0].support.native.detail
