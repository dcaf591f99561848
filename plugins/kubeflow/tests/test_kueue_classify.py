"""Reading Kueue Workloads (spec 0012 §5): the conditions captured from real Kueue v0.19.2 on the
control plane (tests/fixtures/kueue-*.json), and variants of them for the reasons the plane
was not driven to."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import objects
import pytest
from jobdispatch.types import CauseKind, ObjectState, Provenance
from jobdispatch_kubeflow import names
from jobdispatch_kubeflow.classify import Chain, kueue_view, observe

FIXTURES = Path(__file__).parent / "fixtures"


def captured(name: str) -> Any:
    return json.loads((FIXTURES / f"kueue-workload-{name}.json").read_text())


def with_evicted(reason: str, message: str = "m", *, active: bool | None = None) -> Any:
    wl = captured("admitted")
    wl["status"]["conditions"] = [
        {"type": "Evicted", "status": "True", "reason": reason, "message": message},
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "x"},
    ]
    if active is not None:
        wl["spec"]["active"] = active
    return wl


def test_a_captured_preemption_is_preempted_with_kueues_reason() -> None:
    wl = captured("preempted-deactivated")
    del wl["spec"]["active"]  # as it was before the capture deactivated it
    view = kueue_view(wl)
    assert (view.state, view.cause, view.provenance) == (
        ObjectState.PENDING,
        CauseKind.PREEMPTED,
        Provenance.SCHEDULER,
    )
    assert "InClusterQueue" in view.detail and "Preempted to accommodate" in view.detail


def test_a_captured_deactivation_is_a_hold() -> None:
    view = kueue_view(captured("preempted-deactivated"))
    assert view.state is ObjectState.HELD and view.provenance is Provenance.ACTOR


def test_a_captured_workload_that_never_fits_is_no_capacity() -> None:
    view = kueue_view(captured("never-fits"))
    assert (view.state, view.cause) == (ObjectState.PENDING, CauseKind.NO_CAPACITY)
    assert "never fits" in view.detail and "maximum capacity (8)" in view.detail


def test_waiting_for_quota_is_told_from_never_fitting() -> None:
    wl = captured("never-fits")
    wl["status"]["conditions"][0]["message"] = (
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu "
        "in flavor jobdispatch-default, 8 more needed"
    )
    view = kueue_view(wl)
    assert view.cause is CauseKind.NO_CAPACITY and "waiting for quota" in view.detail


@pytest.mark.parametrize(
    ("reason", "message", "active", "state", "cause"),
    [
        (
            "PodsReadyTimeout",
            "Exceeded the PodsReady timeout",
            None,
            ObjectState.PENDING,
            CauseKind.NO_CAPACITY,
        ),
        (
            "AdmissionCheck",
            "At least one admission check is false",
            None,
            ObjectState.PENDING,
            CauseKind.NO_CAPACITY,
        ),
        ("AdmissionCheck", "rejected", False, ObjectState.HELD, CauseKind.NO_CAPACITY),
        (
            "Deactivated",
            "The workload is deactivated due to RequeuingLimitExceeded",
            False,
            ObjectState.HELD,
            CauseKind.NO_CAPACITY,
        ),
        (
            "Deactivated",
            "deactivated due to MaximumExecutionTimeExceeded",
            False,
            ObjectState.HELD,
            CauseKind.TIME_LIMIT,
        ),
        ("Deactivated", "The workload is deactivated", False, ObjectState.HELD, None),
        ("NodeFailures", "node lost", None, ObjectState.PENDING, CauseKind.NODE_LOST),
        ("ClusterQueueStopped", "stopped", None, ObjectState.HELD, None),
    ],
)
def test_evictions_are_told_apart(
    reason: str, message: str, active: bool | None, state: ObjectState, cause: CauseKind | None
) -> None:
    view = kueue_view(with_evicted(reason, message, active=active))
    assert (view.state, view.cause) == (state, cause), view
    assert reason in view.detail


def test_a_readmission_waiting_for_dispatch_is_pending_not_gated() -> None:
    """Regression: read as gated, the core took it for an open lost and opened it again after
    OPEN_RETRY, readmitting it behind its recovery rule."""
    wl = captured("preempted-deactivated")
    del wl["spec"]["active"]
    wl["status"]["admissionChecks"] = [
        {
            "name": "jobdispatch-admission",
            "state": "Pending",
            "message": "evicted after the admission open o1 allowed: readmission waits for "
            "dispatch's next open",
        }
    ]
    # Requeued with its quota reserved again, as the plane showed: Evicted and Preempted False.
    for c in wl["status"]["conditions"]:
        if c["type"] in ("Evicted", "Preempted"):
            c["status"] = "False"
    view = kueue_view(wl)
    assert view.state is ObjectState.PENDING
    assert "readmission gated" in view.detail
    assert "last eviction Preempted: Preempted to accommodate" in view.detail
    assert "(InClusterQueue)" in view.detail


def test_observe_reads_the_workload_of_a_suspended_opened_trainjob() -> None:
    tj = {
        "metadata": {
            "name": "jd-j-1-1",
            "uid": "u",
            "labels": {names.JOB: "j", names.QUEUE_NAME: "q"},
            "annotations": {names.GATE: "open"},
        },
        "spec": {"suspend": True},
    }
    wl = captured("never-fits")
    obs = observe(Chain(trainjob=copy.deepcopy(tj), workload=wl))
    assert obs.state is ObjectState.PENDING
    assert "(no-capacity): never fits" in obs.detail
    assert observe(Chain(trainjob=tj)).detail.startswith("queued in Kueue LocalQueue q")


def test_a_workload_lagging_its_opened_trainjob_reads_pending_not_gated() -> None:
    """Regression (the Kueue-flavoured conformance run): just after open removed the gate, the
    Workload still said AdmissionGated, and the opened object read as gated."""
    wl = captured("never-fits")
    wl["status"]["conditions"] = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "AdmissionGated",
            "message": "Admission is gated",
        }
    ]
    assert kueue_view(wl, gated_by="jobdispatch.dev/admission").state is ObjectState.GATED
    assert kueue_view(wl, gated_by=None).state is ObjectState.PENDING
    # Likewise a readmission wait for an open that a newer open has superseded.
    wl["status"]["admissionChecks"] = [
        {
            "name": "jobdispatch-admission",
            "state": "Pending",
            "message": "evicted after the admission open o1 allowed: readmission waits",
        }
    ]
    assert "readmission gated" in kueue_view(wl, open_id="o1").detail
    assert "opened again" in kueue_view(wl, open_id="o2").detail


# ---------------------------------------------------------------- runs ended by an eviction


def _kueue_trainjob(annotations: dict[str, str] | None = None, *, suspend: bool = True) -> Any:
    return {
        "metadata": {
            "name": "jd-j1-1-1",
            "uid": "u",
            "labels": {names.JOB: "j1", names.QUEUE_NAME: "jobdispatch-gated"},
            "annotations": {names.GATE: "open", **(annotations or {})},
        },
        "spec": {"suspend": suspend},
    }


def test_a_preempted_run_is_an_ended_execution_and_the_readmission_a_new_one() -> None:
    """Kueue's suspend deletes the pods and JobSet counts no restart: the run the captured
    preemption ended is execution 0, pinned on the TrainJob, and the readmitted run (pods of
    attempt 0 again) is execution 1."""
    from jobdispatch_kubeflow.classify import pins

    wl = captured("preempted-deactivated")
    del wl["spec"]["active"]
    tj = _kueue_trainjob()
    chain = Chain(trainjob=tj, workload=wl)
    obs = observe(chain)
    assert obs.state is ObjectState.PENDING
    [ended] = obs.executions
    assert ended.index == 0 and ended.state is ObjectState.ENDED and ended.cause is not None
    assert (ended.cause.kind, ended.cause.provenance) == (CauseKind.PREEMPTED, Provenance.SCHEDULER)
    assert (
        "InClusterQueue" in ended.cause.detail and "Preempted to accommodate" in ended.cause.detail
    )
    pinned_now = pins(chain)
    assert set(pinned_now) == {names.KUEUE_RUNS}
    # The pin written, the same Workload adds nothing, and the readmitted run is execution 1.
    tj["metadata"]["annotations"].update(pinned_now)
    assert pins(Chain(trainjob=tj, workload=wl)) == {}
    running_tj = copy.deepcopy(tj)
    running_tj["spec"]["suspend"] = False
    again = observe(Chain(trainjob=running_tj, pods=[objects.pod()]))
    assert again.state is ObjectState.RUNNING
    assert [(e.index, e.state) for e in again.executions] == [
        (0, ObjectState.ENDED),
        (1, ObjectState.RUNNING),
    ]
    # A second eviction (more time accumulated) ends execution 1, and the next run is 2.
    wl2 = copy.deepcopy(wl)
    wl2["status"]["accumulatedPastExecutionTimeSeconds"] = 25
    second = Chain(trainjob=tj, workload=wl2)
    tj["metadata"]["annotations"].update(pins(second))
    running_tj["metadata"]["annotations"] = dict(tj["metadata"]["annotations"])
    third = observe(Chain(trainjob=running_tj, pods=[objects.pod()]))
    assert [e.index for e in third.executions] == [0, 1, 2]
    assert third.executions[1].cause is not None
    assert third.executions[1].cause.kind is CauseKind.PREEMPTED


def test_an_admitted_workload_never_evicted_records_no_kueue_run() -> None:
    wl = captured("admitted")
    obs = observe(Chain(trainjob=_kueue_trainjob(suspend=False), pods=[objects.pod()], workload=wl))
    assert [e.index for e in obs.executions] == [0]


@pytest.mark.parametrize(
    ("reason", "message", "active", "kind", "provenance"),
    [
        ("PodsReadyTimeout", "m", None, CauseKind.NO_CAPACITY, Provenance.SCHEDULER),
        ("AdmissionCheck", "m", None, CauseKind.NO_CAPACITY, Provenance.SCHEDULER),
        ("NodeFailures", "m", None, CauseKind.NODE_LOST, Provenance.SCHEDULER),
        (
            "Deactivated",
            "x RequeuingLimitExceeded",
            False,
            CauseKind.NO_CAPACITY,
            Provenance.SCHEDULER,
        ),
        (
            "Deactivated",
            "x MaximumExecutionTimeExceeded",
            False,
            CauseKind.TIME_LIMIT,
            Provenance.SCHEDULER,
        ),
        ("Deactivated", "by a user", False, CauseKind.CANCELLED, Provenance.ACTOR),
        ("ClusterQueueStopped", "m", None, CauseKind.PREEMPTED, Provenance.ACTOR),
        ("SomethingNew", "m", None, CauseKind.UNKNOWN, Provenance.NONE),
    ],
)
def test_evictions_end_their_run_with_their_cause(
    reason: str, message: str, active: bool | None, kind: CauseKind, provenance: Provenance
) -> None:
    wl = with_evicted(reason, message, active=active)
    wl["status"]["accumulatedPastExecutionTimeSeconds"] = 3
    obs = observe(Chain(trainjob=_kueue_trainjob(), workload=wl))
    [ended] = obs.executions
    assert ended.cause is not None and (ended.cause.kind, ended.cause.provenance) == (
        kind,
        provenance,
    )
    assert reason in ended.cause.detail


def test_a_requeued_workload_still_names_the_preemption_from_kueues_counts() -> None:
    """Regression (the real plane): requeued with quota reserved again, the Workload's Evicted
    turned False, reason QuotaReserved, "Previously: Preempted to accommodate ...", and the run
    read as ended unknown; Kueue's eviction counts keep the reason."""
    wl = captured("preempted-deactivated")
    del wl["spec"]["active"]
    for c in wl["status"]["conditions"]:
        if c["type"] == "Evicted":
            c.update(status="False", reason="QuotaReserved", message="Previously: " + c["message"])
        if c["type"] == "Preempted":  # observed: its reason goes to QuotaReserved too
            c.update(status="False", reason="QuotaReserved")
    [ended] = observe(Chain(trainjob=_kueue_trainjob(), workload=wl)).executions
    assert ended.cause is not None and ended.cause.kind is CauseKind.PREEMPTED, ended
    assert "InClusterQueue" in ended.cause.detail and "Previously: Preempted" in ended.cause.detail


def test_an_evicted_object_whose_readmission_dispatch_rejected_has_ended() -> None:
    """Regression (the supervised end-to-end on the plane): read live, the evicted object never
    ended for the core, which decides on an end only once the object is done, while dispatch's
    check waited for the supervisor. Rejected by the check, the object has ended."""
    wl = captured("preempted-deactivated")
    wl["status"]["admissionChecks"] = [
        {
            "name": "jobdispatch-admission",
            "state": "Rejected",
            "message": "evicted after the admission open o1 allowed: never readmitted; "
            "dispatch decides its recovery",
        }
    ]
    obs = observe(Chain(trainjob=_kueue_trainjob(), workload=wl))
    assert obs.state is ObjectState.ENDED, obs
    [ended] = obs.executions
    assert ended.cause is not None and ended.cause.kind is CauseKind.PREEMPTED
    assert "never readmitted" in obs.detail
    # Without a run on record (nothing admitted) the same Workload is not an end of a run.
    wl["status"]["accumulatedPastExecutionTimeSeconds"] = 0
    assert observe(Chain(trainjob=_kueue_trainjob(), workload=wl)).state is not ObjectState.ENDED


def test_a_deactivation_after_the_preemption_does_not_hide_it() -> None:
    """Regression (the real plane): first read after dispatch's check had rejected the
    readmission, Evicted said Deactivated and both counts had risen; the run read cancelled."""
    wl = captured("preempted-deactivated")
    for c in wl["status"]["conditions"]:
        if c["type"] == "Evicted":
            c.update(status="True", reason="DeactivatedDueToAdmissionCheck", message="rejected")
    wl["status"]["schedulingStats"]["evictions"].append(
        {"count": 1, "reason": "DeactivatedDueToAdmissionCheck", "underlyingCause": ""}
    )
    [ended] = observe(Chain(trainjob=_kueue_trainjob(), workload=wl)).executions
    assert ended.cause is not None and ended.cause.kind is CauseKind.PREEMPTED, ended
    assert "InClusterQueue" in ended.cause.detail and "Preempted to accommodate" in (
        ended.cause.detail
    )
