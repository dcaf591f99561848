"""The classifier over API-shaped objects: every ending the research names, read through the
real chain (TrainJob, JobSet, Job, Pod, Node, Event)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.types import Cause, CauseKind, ObjectState, Provenance
from jobdispatch_kubeflow.classify import Chain, observe, pod_cause
from objects import (
    T0,
    T1,
    Obj,
    cond,
    event,
    job,
    jobset,
    node,
    nodes,
    pod,
    running,
    terminated,
    trainjob,
    waiting,
)

FAILED = [cond("Failed", "FailedJobs", "jobset failed: job jd-j1-1-1-node-0 failed")]
HEALTHY = nodes(node("kwok-node-1"), node("kwok-node-2"))


def ended(chain: Chain) -> Cause:
    obs = observe(chain)
    assert obs.state is ObjectState.ENDED, obs
    assert obs.executions, obs
    cause = obs.executions[-1].cause
    assert cause is not None
    return cause


# ---------------------------------------------------------------------------- live states


def test_a_suspended_trainjob_with_our_gate_closed_is_gated() -> None:
    obs = observe(Chain(trainjob=trainjob(suspend=True, gate="closed")))
    assert obs.state is ObjectState.GATED
    assert obs.executions == ()


def test_a_held_trainjob_shows_its_instance_exactly() -> None:
    obs = observe(Chain(trainjob=trainjob(suspend=True, gate="open", hold=41)))
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, 41)


def test_a_hold_over_a_closed_gate_says_so() -> None:
    obs = observe(Chain(trainjob=trainjob(suspend=True, gate="closed", hold=3)))
    assert obs.state is ObjectState.HELD
    assert "before its gate was lifted" in obs.detail


def test_a_suspension_that_is_not_ours_is_a_hold_without_instance() -> None:
    obs = observe(Chain(trainjob=trainjob(suspend=True, gate="open")))
    assert (obs.state, obs.hold_instance) == (ObjectState.HELD, None)
    assert "other than dispatch" in obs.detail


def test_opened_without_pods_is_pending() -> None:
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset()))
    assert obs.state is ObjectState.PENDING


def test_an_unschedulable_pod_keeps_the_object_pending_and_names_no_capacity() -> None:
    p = pod(
        phase="Pending",
        node=None,
        containers=[],
        conditions=[
            cond(
                "PodScheduled",
                "Unschedulable",
                "0/3 nodes are available: 3 Insufficient cpu.",
                "False",
            )
        ],
    )
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[p]))
    assert obs.state is ObjectState.PENDING
    assert "no-capacity" in obs.detail and "Insufficient cpu" in obs.detail


def test_a_pod_that_cannot_pull_its_image_is_pending_with_launch_failed_in_the_detail() -> None:
    p = pod(phase="Pending", containers=[waiting("ImagePullBackOff", "Back-off pulling image")])
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[p], nodes=HEALTHY))
    assert obs.state is ObjectState.PENDING
    assert "launch-failed" in obs.detail and "ImagePullBackOff" in obs.detail


def test_a_running_pod_is_a_running_execution_zero_with_its_node() -> None:
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pod()], nodes=HEALTHY))
    assert obs.state is ObjectState.RUNNING
    (e,) = obs.executions
    assert (e.index, e.state, e.cause, e.nodes) == (0, ObjectState.RUNNING, None, ("kwok-node-1",))
    assert e.started_at is not None


def test_a_running_pod_on_a_not_ready_node_reports_the_node_lost() -> None:
    n = nodes(node("kwok-node-1", ready="Unknown", reason="NodeStatusUnknown"))
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pod()], nodes=n))
    assert obs.state is ObjectState.RUNNING
    assert obs.lost_nodes == ("kwok-node-1",)


def test_a_running_pod_whose_node_was_deleted_reports_the_node_lost() -> None:
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pod()], nodes={}))
    assert obs.lost_nodes == ("kwok-node-1",)


def test_unread_nodes_prove_nothing() -> None:
    obs = observe(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pod()], nodes=None))
    assert obs.lost_nodes == ()


# ---------------------------------------------------------------------------- endings


def test_complete_is_success_with_exit_zero() -> None:
    tj = trainjob(conditions=[cond("Complete", "AllJobsCompleted", "jobset completed")])
    p = pod(phase="Succeeded", containers=[terminated(0, "Completed")])
    cause = ended(Chain(trainjob=tj, jobset=jobset(), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NONE, 0)


def test_complete_after_the_pods_are_gone_is_still_one_successful_execution() -> None:
    tj = trainjob(conditions=[cond("Complete", "AllJobsCompleted")])
    obs = observe(Chain(trainjob=tj))
    assert [e.cause.kind for e in obs.executions if e.cause] == [CauseKind.NONE]


def test_a_run_whose_pods_were_deleted_started_when_its_job_did() -> None:
    """A scheduler preemption deletes the pod at once, and its times with it: the run's start
    is then its Job's ``startTime`` (the goodput check needs a start for every ended run)."""
    tj = trainjob(conditions=FAILED)
    started = job(conditions=[cond("Failed", "BackoffLimitExceeded")])
    started["status"]["startTime"] = T0
    obs = observe(Chain(trainjob=tj, jobs=[started], nodes=HEALTHY))
    (run,) = obs.executions
    assert run.started_at is not None and run.started_at.isoformat().startswith("2026-12-01T10:00")
    assert observe(Chain(trainjob=tj, nodes=HEALTHY)).executions[0].started_at is None


def test_a_non_zero_exit_keeps_its_code() -> None:
    p = pod(phase="Failed", containers=[terminated(3)])
    cause = ended(
        Chain(trainjob=trainjob(conditions=FAILED), jobset=jobset(), pods=[p], nodes=HEALTHY)
    )
    assert (cause.kind, cause.provenance, cause.exit_code, cause.signal) == (
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        3,
        None,
    )


def test_a_signal_exit_reports_the_signal() -> None:
    p = pod(phase="Failed", containers=[terminated(139)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code, cause.signal) == (CauseKind.NON_ZERO_EXIT, 139, 11)


def test_oomkilled_is_out_of_memory_137() -> None:
    p = pod(phase="Failed", containers=[terminated(137, "OOMKilled")])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.provenance, cause.exit_code, cause.signal) == (
        CauseKind.OUT_OF_MEMORY,
        Provenance.APPLICATION,
        137,
        9,
    )


def test_an_oom_seen_only_in_last_state_still_counts() -> None:
    p = pod(phase="Failed", containers=[terminated(137, "OOMKilled", last=True)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.OUT_OF_MEMORY


def test_an_oom_in_one_rank_wins_over_the_exits_of_its_peers() -> None:
    oom = pod(
        "p-0",
        phase="Failed",
        containers=[terminated(137, "OOMKilled", finished="2026-12-01T10:06:00Z")],
    )
    peer = pod(
        "p-1", phase="Failed", containers=[terminated(1, finished="2026-12-01T10:05:30Z")], index=1
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[peer, oom], nodes=HEALTHY))
    assert cause.kind is CauseKind.OUT_OF_MEMORY


def test_the_earliest_exit_is_the_one_reported() -> None:
    late = pod("p-0", phase="Failed", containers=[terminated(143, finished="2026-12-01T10:07:00Z")])
    first = pod(
        "p-1", phase="Failed", containers=[terminated(2, finished="2026-12-01T10:06:00Z")], index=1
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[late, first], nodes=HEALTHY))
    assert cause.exit_code == 2


@pytest.mark.parametrize(
    ("reason", "kind", "provenance"),
    [
        ("PreemptionByScheduler", CauseKind.PREEMPTED, Provenance.SCHEDULER),
        ("EvictionByEvictionAPI", CauseKind.PREEMPTED, Provenance.ACTOR),
        ("DeletionByTaintManager", CauseKind.NODE_LOST, Provenance.SCHEDULER),
        ("DeletionByPodGC", CauseKind.NODE_LOST, Provenance.SCHEDULER),
    ],
)
def test_disruption_target_reasons(reason: str, kind: CauseKind, provenance: Provenance) -> None:
    p = pod(
        phase="Failed",
        containers=[terminated(137)],
        conditions=[cond("DisruptionTarget", reason, "disrupted")],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.provenance) == (kind, provenance)
    assert cause.exit_code is None, "a disruption's 137 is not the application's exit"


def test_a_disruption_condition_that_was_cleared_does_not_count() -> None:
    p = pod(
        phase="Failed",
        containers=[terminated(1)],
        conditions=[cond("DisruptionTarget", "PreemptionByScheduler", status="False")],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.NON_ZERO_EXIT


def test_node_pressure_eviction_is_preempted() -> None:
    p = pod(
        phase="Failed",
        containers=[terminated(137)],
        reason="Evicted",
        message="The node was low on resource: memory.",
        conditions=[cond("DisruptionTarget", "TerminationByKubelet", "node pressure")],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.SCHEDULER)


def test_graceful_node_shutdown_is_node_lost() -> None:
    p = pod(
        phase="Failed",
        reason="Terminated",
        message="Pod was terminated in response to imminent node shutdown.",
        conditions=[cond("DisruptionTarget", "TerminationByKubelet")],
        containers=[terminated(143)],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.NODE_LOST


def test_a_failed_pod_on_a_deleted_node_is_node_lost() -> None:
    # What a node lost under a running pod leaves: the container never reported ending.
    p = pod(phase="Failed", containers=[running()], node="kwok-node-2")
    cause = ended(
        Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=nodes(node("kwok-node-1")))
    )
    assert cause.kind is CauseKind.NODE_LOST
    assert "kwok-node-2 was deleted" in cause.detail


def test_a_failed_pod_on_a_not_ready_node_is_node_lost() -> None:
    p = pod(phase="Failed", containers=[terminated(1)])
    n = nodes(node("kwok-node-1", ready="False", reason="KubeletNotReady"))
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=n))
    assert cause.kind is CauseKind.NODE_LOST


def test_an_exit_before_the_node_was_deleted_is_the_exit() -> None:
    """Issue 35 item 3: exit 3, then an autoscaler deletes the emptied node; until PodGC
    removes the pod, the exit is still the ending (a node-lost rule must not rerun it)."""
    p = pod(phase="Failed", containers=[terminated(3)], node="kwok-node-2")
    chain = Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=nodes(node()))
    cause = ended(chain)
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)
    assert observe(chain).lost_nodes == ()


def test_an_exit_before_the_node_went_not_ready_is_the_exit() -> None:
    p = pod(phase="Failed", containers=[terminated(3, finished=T0)])
    n = nodes(node("kwok-node-1", ready="False", reason="KubeletNotReady"))
    n["kwok-node-1"]["status"]["conditions"][0]["lastTransitionTime"] = T1
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=n))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


def test_a_node_disruption_after_the_exit_leaves_the_exit() -> None:
    p = pod(
        phase="Failed",
        containers=[terminated(3, finished=T0)],
        conditions=[cond("DisruptionTarget", "DeletionByPodGC", "node gone")],  # at T1
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


def test_the_trainjob_deadline_is_a_time_limit() -> None:
    tj = trainjob(conditions=[cond("Failed", "DeadlineExceeded", "TrainJob exceeded its deadline")])
    cause = ended(Chain(trainjob=tj, pods=[pod(deleting=True)], nodes=HEALTHY))
    assert (cause.kind, cause.provenance) == (CauseKind.TIME_LIMIT, Provenance.SCHEDULER)


def test_a_job_deadline_is_a_time_limit() -> None:
    j = job(
        conditions=[
            cond("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        ]
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), jobs=[j]))
    assert cause.kind is CauseKind.TIME_LIMIT


def test_a_pod_deadline_is_a_time_limit() -> None:
    p = pod(phase="Failed", reason="DeadlineExceeded", containers=[terminated(137)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.TIME_LIMIT


def test_a_deadline_before_any_pod_was_scheduled_is_no_capacity() -> None:
    tj = trainjob(conditions=[cond("Failed", "DeadlineExceeded")])
    p = pod(
        phase="Pending",
        node=None,
        containers=[],
        conditions=[cond("PodScheduled", "Unschedulable", "0/3 nodes are available", "False")],
    )
    obs = observe(Chain(trainjob=tj, pods=[p]))
    (e,) = obs.executions
    assert e.cause is not None and e.cause.kind is CauseKind.NO_CAPACITY


def test_a_deadline_over_an_image_that_never_pulled_is_launch_failed() -> None:
    tj = trainjob(conditions=[cond("Failed", "DeadlineExceeded")])
    p = pod(phase="Pending", containers=[waiting("ErrImagePull", "not found")])
    cause = ended(Chain(trainjob=tj, pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)


@pytest.mark.parametrize(
    "reason", ["CreateContainerConfigError", "InvalidImageName", "ImagePullBackOff"]
)
def test_container_config_and_image_errors_are_launch_failed(reason: str) -> None:
    p = pod(phase="Failed", containers=[waiting(reason)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.LAUNCH_FAILED


def test_container_cannot_run_is_launch_failed_not_its_exit_code() -> None:
    p = pod(phase="Failed", containers=[terminated(128, "ContainerCannotRun")])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.LAUNCH_FAILED


def test_a_kubelet_admission_refusal_is_launch_failed() -> None:
    p = pod(
        phase="Failed",
        reason="OutOfnvidia.com/gpu",
        message="Node didn't have enough resource",
        containers=[],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.kind is CauseKind.LAUNCH_FAILED


def test_a_runtime_the_trainer_does_not_support_is_launch_failed() -> None:
    tj = trainjob(conditions=[cond("Failed", "TrainingRuntimeNotSupported", "unsupported")])
    obs = observe(Chain(trainjob=tj))
    assert obs.executions[-1].cause is not None
    assert obs.executions[-1].cause.kind is CauseKind.LAUNCH_FAILED


def test_a_failure_with_no_evidence_left_is_unknown_with_what_was_read() -> None:
    tj = trainjob(conditions=FAILED, jobs_status=[{"name": "node", "failed": 1}])
    chain = Chain(
        trainjob=tj,
        events=[event("BackoffLimitExceeded", "Job has reached the specified backoff limit")],
    )
    cause = ended(chain)
    assert cause.kind is CauseKind.UNKNOWN
    assert "FailedJobs" in cause.detail and "BackoffLimitExceeded" in cause.detail


# ---------------------------------------------------------------------------- stop and restarts


def test_a_deleted_trainjob_runs_until_its_pods_are_gone_then_is_cancelled_by_an_actor() -> None:
    tj = trainjob(deleting=True, stop="conformance: stop")
    obs = observe(Chain(trainjob=tj, pods=[pod(deleting=True)], nodes=HEALTHY))
    assert obs.state is ObjectState.RUNNING, "its process may still run"
    assert "clean-up pending: 1 pods remain" in obs.detail
    assert obs.pods_left == 1
    gone = observe(Chain(trainjob=tj, pods=[], jobset=None))
    # With the pods gone, the run's start is only known from jobsStatus; here nothing shows it
    # ran, so it ends without an execution. With a terminal pod still listed, it ran:
    done = observe(Chain(trainjob=tj, pods=[pod(phase="Failed", containers=[terminated(143)])]))
    assert gone.state is ObjectState.ENDED and done.state is ObjectState.ENDED
    cause = done.executions[-1].cause
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.CANCELLED, Provenance.ACTOR)
    assert "conformance: stop" in cause.detail
    assert done.pods_left == 0


def test_a_deleted_trainjob_with_no_pods_left_says_clean_up_is_clear() -> None:
    obs = observe(Chain(trainjob=trainjob(deleting=True, stop="x"), pods=[]))
    assert "clean-up clear" in obs.detail


def test_a_trainjob_deleted_by_someone_else_is_cancelled_and_says_so() -> None:
    gone = pod(deleting=True, phase="Failed", containers=[terminated(143)])
    obs = observe(Chain(trainjob=trainjob(deleting=True), pods=[gone], nodes=HEALTHY))
    cause = obs.executions[-1].cause
    assert cause is not None and cause.kind is CauseKind.CANCELLED
    assert "someone other than dispatch" in cause.detail


def test_a_gated_trainjob_stopped_ends_without_an_execution() -> None:
    obs = observe(Chain(trainjob=trainjob(suspend=True, gate="closed", deleting=True)))
    assert (obs.state, obs.executions) == (ObjectState.ENDED, ())


def test_a_success_deleted_afterwards_stays_a_success() -> None:
    tj = trainjob(deleting=True, conditions=[cond("Complete", "AllJobsCompleted")])
    assert ended(Chain(trainjob=tj)).kind is CauseKind.NONE


def test_a_jobset_restart_is_a_new_execution_and_the_old_one_keeps_what_is_left() -> None:
    js = jobset(
        restarts=1, conditions=[cond("RestartingJobSet", "FailurePolicy_restart", "restarting")]
    )
    old = pod(
        "p-old", attempt=0, phase="Failed", containers=[terminated(137, "OOMKilled")], deleting=True
    )
    new = pod("p-new", attempt=1)
    obs = observe(Chain(trainjob=trainjob(), jobset=js, pods=[old, new], nodes=HEALTHY))
    assert obs.state is ObjectState.RUNNING
    assert [e.index for e in obs.executions] == [0, 1]
    first = obs.executions[0].cause
    assert first is not None and first.kind is CauseKind.OUT_OF_MEMORY
    assert obs.executions[1].state is ObjectState.RUNNING


def test_a_restart_whose_old_pods_are_gone_is_unknown_and_says_the_evidence_was_deleted() -> None:
    obs = observe(
        Chain(trainjob=trainjob(), jobset=jobset(restarts=1), pods=[pod(attempt=1)], nodes=HEALTHY)
    )
    first = obs.executions[0].cause
    assert first is not None and first.kind is CauseKind.UNKNOWN
    assert "deleted with their evidence" in first.detail


# ---------------------------------------------------------------------------- invariants


@given(
    suspend=st.booleans(),
    gate=st.sampled_from(["open", "closed", None]),
    hold=st.one_of(st.none(), st.integers(0, 10**9)),
    deleting=st.booleans(),
    terminal=st.sampled_from([None, "Complete", "Failed"]),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", None]),
    restarts=st.integers(0, 3),
)
def test_every_observation_is_coherent(
    suspend: bool,
    gate: str | None,
    hold: int | None,
    deleting: bool,
    terminal: str | None,
    phase: str | None,
    restarts: int,
) -> None:
    """Whatever the objects say: an ended execution always has a cause, indices are 0..n-1 in
    order, only the last may be live, and a hold instance reads back exactly."""
    conds = [cond(terminal, "X")] if terminal else None
    tj = trainjob(suspend=suspend, gate=gate, hold=hold, deleting=deleting, conditions=conds)
    pods = (
        []
        if phase is None
        else [
            pod(
                attempt=restarts,
                phase=phase,
                containers=[terminated(1)] if phase == "Failed" else None,
            )
        ]
    )
    obs = observe(Chain(trainjob=tj, jobset=jobset(restarts=restarts), pods=pods, nodes=HEALTHY))
    assert [e.index for e in obs.executions] == list(range(len(obs.executions)))
    for e in obs.executions[:-1]:
        assert e.state is ObjectState.ENDED
    for e in obs.executions:
        if e.state is ObjectState.ENDED:
            assert e.cause is not None
    if obs.state is ObjectState.ENDED and obs.executions:
        assert obs.executions[-1].state is ObjectState.ENDED
    assert obs.hold_instance == hold


def test_pod_cause_of_a_healthy_running_pod_is_none() -> None:
    assert pod_cause(pod(), HEALTHY) is None


def test_a_stopped_run_whose_pods_are_all_gone_is_still_an_execution_cancelled() -> None:
    tj = trainjob(
        deleting=True, stop="ops", jobs_status=[{"name": "node", "ready": 1, "active": 1}]
    )
    obs = observe(Chain(trainjob=tj))
    assert obs.state is ObjectState.ENDED
    cause = obs.executions[-1].cause
    assert cause is not None and cause.kind is CauseKind.CANCELLED


def test_a_job_failed_by_its_pod_failure_policy_keeps_the_exit_code_when_the_pods_are_gone() -> (
    None
):
    message = (
        "Container node for pod dispatch/jd-j1-1-1-node-0-0-abcde failed with exit code 3 "
        "matching FailJob rule at index 2"
    )
    j = job(conditions=[cond("Failed", "PodFailurePolicy", message)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), jobs=[j]))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


@pytest.mark.parametrize(
    "message",
    [
        "Container node for pod dispatch/p failed with exit code 137 matching FailJob rule "
        "at index 1",
        "Pod dispatch/p has condition DisruptionTarget matching FailJob rule at index 0",
    ],
)
def test_a_job_message_that_does_not_decide_stays_unknown(message: str) -> None:
    j = job(conditions=[cond("Failed", "PodFailurePolicy", message)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), jobs=[j]))
    assert cause.kind is CauseKind.UNKNOWN
    assert message in cause.detail


# ---------------------------------------------------------------------------- pinned evidence


def test_an_evicted_pod_is_pinned_and_the_failure_after_it_is_gone_reads_the_pin() -> None:
    from jobdispatch_kubeflow.classify import pins

    # As the control plane showed it: still Running, deletionTimestamp set, DisruptionTarget.
    evicted = pod(
        deleting=True,
        conditions=[cond("DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting")],
    )
    live = trainjob()
    annotations = pins(Chain(trainjob=live, jobset=jobset(), pods=[evicted], nodes=HEALTHY))
    (key,) = annotations
    assert key == "jobdispatch.dev/evidence-0"
    pinned_tj = trainjob(conditions=FAILED)
    pinned_tj["metadata"]["annotations"].update(annotations)
    j = job(
        conditions=[
            cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        ]
    )
    cause = ended(Chain(trainjob=pinned_tj, jobs=[j]))
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR)
    assert "pinned from pod" in cause.detail
    assert pins(Chain(trainjob=pinned_tj, pods=[evicted])) == {}, "an ended TrainJob pins nothing"


def test_a_pin_stands_over_the_exits_of_peers_left_behind() -> None:
    from jobdispatch_kubeflow.classify import pins

    evicted = pod("p-0", deleting=True, conditions=[cond("DisruptionTarget", "DeletionByPodGC")])
    tj = trainjob(conditions=FAILED)
    tj["metadata"]["annotations"].update(
        pins(Chain(trainjob=trainjob(), pods=[evicted], nodes=HEALTHY))
    )
    peer = pod("p-1", phase="Failed", containers=[terminated(1)], index=1)
    assert ended(Chain(trainjob=tj, pods=[peer], nodes=HEALTHY)).kind is CauseKind.NODE_LOST


def test_a_healthy_pod_on_a_node_not_ready_for_a_moment_is_not_pinned() -> None:
    from jobdispatch_kubeflow.classify import pins

    n = nodes(node("kwok-node-1", ready="Unknown"))
    assert pins(Chain(trainjob=trainjob(), pods=[pod()], nodes=n)) == {}
    # A pull being retried is no ending: only the launch pin, read for a run never started.
    pulling = pod(phase="Pending", containers=[waiting("ErrImagePull")])
    pinned = pins(Chain(trainjob=trainjob(), pods=[pulling], nodes=HEALTHY))
    assert list(pinned) == ["jobdispatch.dev/evidence-0-launch"]


def test_a_malformed_pin_is_ignored() -> None:
    from jobdispatch_kubeflow.classify import pinned

    tj = trainjob()
    tj["metadata"]["annotations"]["jobdispatch.dev/evidence-0"] = "{not json"
    assert pinned(tj, 0) == []


# ---------------------------------------------------------------------------- pinned placement


def _with_uid(n: Obj, uid: str) -> Obj:
    return {**n, "metadata": {**n["metadata"], "uid": uid}}


def _placed(
    tj: Obj, pods: list[Obj], node_map: dict[str, Obj], jobset_obj: Obj | None = None
) -> Obj:
    """``tj`` with the placement pins a look at ``pods`` on ``node_map`` writes."""
    from jobdispatch_kubeflow.classify import placement_pins

    chain = Chain(trainjob=tj, jobset=jobset_obj or jobset(), pods=pods, nodes=node_map)
    tj["metadata"]["annotations"].update(placement_pins(chain))
    return tj


def test_a_running_pod_pins_its_node_once_and_a_pod_bound_later_adds_its_own() -> None:
    from jobdispatch_kubeflow.classify import placement, placement_pins

    n = nodes(_with_uid(node("kwok-node-1"), "u-1"), _with_uid(node("kwok-node-2"), "u-2"))
    waiting_pod = pod("p-1", phase="Pending", node=None, containers=[], index=1)
    tj = _placed(trainjob(), [pod("p-0"), waiting_pod], n)
    assert placement(tj, 0) == {"kwok-node-1": "u-1"}
    assert placement_pins(Chain(trainjob=tj, pods=[pod("p-0"), waiting_pod], nodes=n)) == {}
    both = [pod("p-0"), pod("p-1", node="kwok-node-2", index=1)]
    tj = _placed(tj, both, n)
    assert placement(tj, 0) == {"kwok-node-1": "u-1", "kwok-node-2": "u-2"}
    assert placement_pins(Chain(trainjob=tj, pods=both, nodes=n)) == {}


def test_no_placement_is_pinned_without_the_nodes_for_a_pod_not_started_or_once_ended() -> None:
    from jobdispatch_kubeflow.classify import placement_pins

    assert placement_pins(Chain(trainjob=trainjob(), pods=[pod()], nodes=None)) == {}
    bound_not_started = pod(phase="Pending", containers=[waiting("ContainerCreating")])
    assert placement_pins(Chain(trainjob=trainjob(), pods=[bound_not_started], nodes=HEALTHY)) == {}
    done = trainjob(conditions=FAILED)
    assert placement_pins(Chain(trainjob=done, pods=[pod()], nodes=HEALTHY)) == {}


@pytest.mark.parametrize(
    ("nodes_now", "words"),
    [
        (nodes(node("kwok-node-2")), "node kwok-node-1 was deleted"),
        (nodes(_with_uid(node("kwok-node-1"), "u-9")), "made again (uid u-1 is gone)"),
    ],
)
def test_a_failed_run_whose_pods_went_with_its_node_is_node_lost(
    nodes_now: dict[str, Obj], words: str
) -> None:
    tj = _placed(trainjob(), [pod()], nodes(_with_uid(node("kwok-node-1"), "u-1")))
    tj["status"] = {"conditions": FAILED}
    backoff = job(conditions=[cond("Failed", "BackoffLimitExceeded", "backoff limit")])
    cause = ended(Chain(trainjob=tj, jobset=jobset(), jobs=[backoff], nodes=nodes_now))
    assert (cause.kind, cause.provenance) == (CauseKind.NODE_LOST, Provenance.SCHEDULER)
    assert words in cause.detail and cause.exit_code is None


def test_a_pinned_placement_proves_nothing_while_its_node_stands_or_the_nodes_are_unread() -> None:
    placed_on = nodes(_with_uid(node("kwok-node-1"), "u-1"))
    tj = _placed(trainjob(), [pod()], placed_on)
    tj["status"] = {"conditions": FAILED}
    assert ended(Chain(trainjob=tj, jobset=jobset(), nodes=placed_on)).kind is CauseKind.UNKNOWN
    assert ended(Chain(trainjob=tj, jobset=jobset(), nodes=None)).kind is CauseKind.UNKNOWN


def test_the_evidence_a_pod_left_comes_before_a_placement() -> None:
    """A run that failed by its own exit, whose node an autoscaler removed afterwards, keeps
    its exit: placement is read only when nothing else is left."""
    tj = _placed(trainjob(), [pod()], HEALTHY)
    tj["status"] = {"conditions": FAILED}
    failed = pod(phase="Failed", containers=[terminated(3)])
    cause = ended(Chain(trainjob=tj, jobset=jobset(), pods=[failed], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


def test_an_earlier_run_restarted_after_its_node_went_is_node_lost() -> None:
    disrupted = cond(
        "RestartingJobSet", "FailurePolicy_dispatch-restart-0", "restarting", status="False"
    )
    tj = _placed(trainjob(), [pod(attempt=0)], HEALTHY)
    js = jobset(restarts=1, conditions=[disrupted])
    now = nodes(node("kwok-node-2"))
    obs = observe(
        Chain(trainjob=tj, jobset=js, pods=[pod(attempt=1, node="kwok-node-2")], nodes=now)
    )
    first = obs.executions[0].cause
    assert first is not None and first.kind is CauseKind.NODE_LOST, first


def test_a_malformed_placement_is_ignored() -> None:
    from jobdispatch_kubeflow.classify import placement

    for raw in ("{not json", "[1, 2]"):
        tj = trainjob()
        tj["metadata"]["annotations"]["jobdispatch.dev/placement-0"] = raw
        assert placement(tj, 0) == {}


def test_nodes_are_wanted_for_a_bound_pod_or_an_unfinished_placement() -> None:
    from jobdispatch_kubeflow.classify import wants_nodes

    assert wants_nodes([trainjob()], [pod()])
    assert not wants_nodes([trainjob()], [pod(node=None, phase="Pending", containers=[])])
    tj = _placed(trainjob(), [pod()], HEALTHY)
    assert wants_nodes([tj], [])
    tj["status"] = {"conditions": [cond("Complete", "AllJobsCompleted")]}
    assert not wants_nodes([tj], [])


# ---------------------------------------------------------------------------- captured objects

_FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"


def _captured(name: str) -> Any:
    import json

    return json.loads((_FIXTURES / name).read_text())


def test_the_captured_oomkilled_pod_and_its_job_read_as_out_of_memory() -> None:
    pod_obj = _captured("pod-oomkilled-kwok.json")
    pod_obj["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "jd-j1-1-1"
    n = _captured("node-kwok-ready.json")
    chain = Chain(
        trainjob=trainjob(conditions=FAILED),
        jobs=[_captured("job-failed-backoff-limit.json")],
        pods=[pod_obj],
        nodes={n["metadata"]["name"]: n},
    )
    cause = ended(chain)
    assert (cause.kind, cause.exit_code) == (CauseKind.OUT_OF_MEMORY, 137)


def test_the_captured_evicted_pod_is_pinned_as_preempted_by_an_actor() -> None:
    from jobdispatch_kubeflow.classify import pins

    evicted = _captured("pod-evicted-terminating.json")
    n = _captured("node-kwok-ready.json")
    cause = pod_cause(evicted, {n["metadata"]["name"]: n})
    assert cause is not None
    assert (cause.kind, cause.provenance) == (CauseKind.PREEMPTED, Provenance.ACTOR)
    assert pins(Chain(trainjob=trainjob(), pods=[evicted], nodes={n["metadata"]["name"]: n}))


def test_the_captured_kwok_node_is_ready() -> None:
    n = _captured("node-kwok-ready.json")
    p = pod(node=n["metadata"]["name"])
    obs = observe(
        Chain(trainjob=trainjob(), jobset=jobset(), pods=[p], nodes={n["metadata"]["name"]: n})
    )
    assert obs.lost_nodes == ()


# ------------------------------------------------------------------------ torchrun, real node


def summary(rank: int, code: int, at: str = "2026-12-02_09:39:10") -> str:
    """The tail of torchrun's output when a worker failed, as the real node's pods end with it
    (their termination message under ``FallbackToLogsOnError``)."""
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "/scripts/real_node_ddp.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n"
        f"  time      : {at}\n"
        "  host      : jd-x-1-1-node-0-1.jd-x-1-1.dispatch.svc.cluster.local\n"
        f"  rank      : {rank} (local_rank: 0)\n"
        f"  exitcode  : {code} (pid: 8)\n"
        "  error_file: <N/A>\n"
        "============================================================\n"
    )


def folded(
    rank: int, code: int, at: str, *, reason: str = "Error", last: bool = True
) -> dict[str, Any]:
    """A torchrun container that exited 1 for its worker, finished when its peers failed."""
    status = terminated(1, reason, finished="2026-12-02T09:39:40Z", last=last)
    where = "lastState" if last else "state"
    status[where]["terminated"]["message"] = summary(rank, code, at)
    return status


def test_a_workers_code_is_read_through_torchrun_and_the_fold_is_named() -> None:
    # Both torchruns exit 1 in the same second; rank 1's worker failed 30 s before rank 0's.
    p0 = pod("p-0", phase="Failed", containers=[folded(0, 1, "2026-12-02_09:39:40", last=False)])
    p1 = pod("p-1", phase="Failed", containers=[folded(1, 3, "2026-12-02_09:39:10")], index=1)
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p0, p1], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code, cause.signal) == (CauseKind.NON_ZERO_EXIT, 3, None)
    assert "torchrun exited 1 for worker rank 1, which exited 3" in cause.detail


def test_a_worker_killed_by_a_signal_reads_as_the_signal() -> None:
    p = pod("p-1", phase="Failed", containers=[folded(1, -9, "2026-12-02_09:39:10")])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.exit_code, cause.signal) == (137, 9)


def test_a_container_without_a_summary_keeps_its_own_code() -> None:
    p = pod("p-1", phase="Failed", containers=[terminated(1)])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.exit_code == 1
    assert "torchrun" not in cause.detail


@given(
    rank=st.integers(0, 4096),
    code=st.integers(-64, 255).filter(lambda c: c != 0),
    clock=st.times().map(lambda t: t.strftime("%H:%M:%S")),
)
def test_torchrun_summaries_are_read_back(rank: int, code: int, clock: str) -> None:
    from jobdispatch_kubeflow.classify import torchrun_failure

    got = torchrun_failure({"message": summary(rank, code, f"2026-12-02_{clock}")})
    assert got is not None
    assert (got.rank, got.code, got.at) == (
        rank,
        128 - code if code < 0 else code,
        f"2026-12-02T{clock}Z",
    )


def test_pods_deleted_together_pin_the_oom_not_the_peer_listed_first() -> None:
    """On the real node the Job fails every rank's pod at once: the pin is the OOM-killed
    worker's, not the peer's exit that the list happens to show first."""
    from jobdispatch_kubeflow.classify import pins

    peer = pod("p-0", deleting=True, containers=[folded(0, 1, "2026-12-02_09:39:40", last=False)])
    oom = pod(
        "p-1",
        deleting=True,
        containers=[folded(1, -9, "2026-12-02_09:39:10", reason="OOMKilled")],
        index=1,
    )
    (value,) = pins(
        Chain(trainjob=trainjob(), jobset=jobset(), pods=[peer, oom], nodes=HEALTHY)
    ).values()
    assert '"out-of-memory"' in value and '"pod": "p-1"' in value, value


def test_pods_deleted_together_pin_the_earliest_failure() -> None:
    from jobdispatch_kubeflow.classify import pins

    late = pod("p-0", deleting=True, containers=[folded(0, 1, "2026-12-02_09:39:40", last=False)])
    first = pod("p-1", deleting=True, containers=[folded(1, 3, "2026-12-02_09:39:10")], index=1)
    (value,) = pins(
        Chain(trainjob=trainjob(), jobset=jobset(), pods=[late, first], nodes=HEALTHY)
    ).values()
    assert '"exit_code": 3' in value and '"pod": "p-1"' in value, value


def test_a_peer_restarted_in_place_with_the_earlier_failure_is_pinned_over_the_dying_one() -> None:
    """As CI's real node showed it: rank 1's worker failed first and its container restarted in
    place (``OnFailure``), so its pod still runs when rank 0's, failed later, is seen dying."""
    from jobdispatch_kubeflow.classify import pins

    dying_peer = pod(
        "p-0", deleting=True, containers=[folded(0, 1, "2026-12-02_09:39:40", last=False)]
    )
    running = pod("p-1", containers=[folded(1, 3, "2026-12-02_09:39:10")], index=1)
    chain = Chain(trainjob=trainjob(), jobset=jobset(), pods=[dying_peer, running], nodes=HEALTHY)
    (value,) = pins(chain).values()
    assert '"exit_code": 3' in value and '"pod": "p-1"' in value, value
    assert pins(Chain(trainjob=trainjob(), jobset=jobset(), pods=[running], nodes=HEALTHY)) == {}, (
        "a restarted pod alone is no ending: nothing is pinned while no pod is dying"
    )


def _pinned_with(annotations: dict[str, str], **kw: Any) -> dict[str, Any]:
    tj = trainjob(**kw)
    tj["metadata"]["annotations"].update(annotations)
    return tj


def test_a_pin_is_replaced_by_an_earlier_failure_seen_later_and_never_by_an_equal_one() -> None:
    from jobdispatch_kubeflow.classify import pins

    late = pod("p-0", deleting=True, containers=[folded(0, 1, "2026-12-02_09:39:40", last=False)])
    first = pod("p-1", deleting=True, containers=[folded(1, 3, "2026-12-02_09:39:10")], index=1)
    seen_first = pins(Chain(trainjob=trainjob(), jobset=jobset(), pods=[late], nodes=HEALTHY))
    assert '"pod": "p-0"' in next(iter(seen_first.values()))
    tj = _pinned_with(seen_first)
    assert pins(Chain(trainjob=tj, jobset=jobset(), pods=[late], nodes=HEALTHY)) == {}, (
        "the same evidence again rewrites nothing"
    )
    (value,) = pins(Chain(trainjob=tj, jobset=jobset(), pods=[late, first], nodes=HEALTHY)).values()
    assert '"exit_code": 3' in value and '"pod": "p-1"' in value, value
    tj = _pinned_with({"jobdispatch.dev/evidence-0": value})
    assert pins(Chain(trainjob=tj, jobset=jobset(), pods=[late, first], nodes=HEALTHY)) == {}
    over = _pinned_with({"jobdispatch.dev/evidence-0": value}, conditions=FAILED)
    cause = ended(Chain(trainjob=over, nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3), cause


def test_a_pin_written_without_its_failure_time_is_kept() -> None:
    """Pins written before they kept their failure time are never replaced: nothing ranks them."""
    from jobdispatch_kubeflow.classify import pins

    old = json.dumps(
        {"kind": "non-zero-exit", "provenance": "application", "detail": "d", "pod": "p-0"}
    )
    first = pod("p-1", deleting=True, containers=[folded(1, 3, "2026-12-02_09:39:10")], index=1)
    tj = _pinned_with({"jobdispatch.dev/evidence-0": old})
    assert pins(Chain(trainjob=tj, jobset=jobset(), pods=[first], nodes=HEALTHY)) == {}


def test_a_pull_backing_off_is_pinned_and_read_when_the_deadline_ends_a_run_never_started() -> None:
    """On the real node an image nobody serves is retried until the TrainJob's deadline, which
    deletes the pods as it fails the TrainJob: the back-off pinned before is the cause."""
    from jobdispatch_kubeflow.classify import pins

    pulling = pod(phase="Pending", containers=[waiting("ImagePullBackOff", "no such host")])
    annotations = pins(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pulling], nodes=HEALTHY))
    (key,) = annotations
    assert key == "jobdispatch.dev/evidence-0-launch"
    tj = trainjob(conditions=[cond("Failed", "DeadlineExceeded", "TrainJob exceeded its deadline")])
    tj["metadata"]["annotations"].update(annotations)
    cause = ended(Chain(trainjob=tj, nodes=HEALTHY))
    assert cause.kind is CauseKind.LAUNCH_FAILED, cause
    assert "ImagePullBackOff" in cause.detail


def test_a_pinned_pull_back_off_is_ignored_once_the_run_started() -> None:
    from jobdispatch_kubeflow.classify import pins

    pulling = pod(phase="Pending", containers=[waiting("ImagePullBackOff")])
    tj = trainjob(conditions=FAILED)
    tj["metadata"]["annotations"].update(
        pins(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pulling], nodes=HEALTHY))
    )
    exited = pod(phase="Failed", containers=[terminated(3)])
    cause = ended(Chain(trainjob=tj, jobset=jobset(), pods=[exited], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


def test_a_first_pull_error_is_pinned_and_read_only_for_a_run_never_started() -> None:
    """A loaded node may show only ``ErrImagePull`` before the deadline deletes the pod (the CI
    run that read ``time-limit``): the failed pull is pinned from its first failure."""
    from jobdispatch_kubeflow.classify import pins

    pulling = pod(phase="Pending", containers=[waiting("ErrImagePull", "no such host")])
    annotations = pins(Chain(trainjob=trainjob(), jobset=jobset(), pods=[pulling], nodes=HEALTHY))
    assert list(annotations) == ["jobdispatch.dev/evidence-0-launch"]
    tj = trainjob(conditions=[cond("Failed", "DeadlineExceeded", "TrainJob exceeded its deadline")])
    tj["metadata"]["annotations"].update(annotations)
    cause = ended(Chain(trainjob=tj, nodes=HEALTHY))
    assert cause.kind is CauseKind.LAUNCH_FAILED, cause
    assert "ErrImagePull" in cause.detail
    started = trainjob(conditions=FAILED)
    started["metadata"]["annotations"].update(annotations)
    exited = pod(phase="Failed", containers=[terminated(3)])
    cause = ended(Chain(trainjob=started, jobset=jobset(), pods=[exited], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)


def test_a_worker_oom_killed_under_torchrun_is_out_of_memory_with_the_workers_signal() -> None:
    """cgroup v1 kills the worker alone: torchrun exits 1, the container shows OOMKilled."""
    p = pod(
        "p-1",
        phase="Failed",
        containers=[folded(1, -9, "2026-12-02_09:39:10", reason="OOMKilled", last=False)],
    )
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert (cause.kind, cause.exit_code, cause.signal) == (CauseKind.OUT_OF_MEMORY, 137, 9)
    assert "worker rank 1, which exited 137" in cause.detail


def test_a_container_restarted_in_place_says_so() -> None:
    """JobSet's pods restart ``OnFailure``: the kubelet reran the failed container once before
    the Job failed (seen on the real node); the detail counts it."""
    p = pod("p-1", phase="Failed", containers=[folded(1, 3, "2026-12-02_09:39:10")])
    cause = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[p], nodes=HEALTHY))
    assert cause.detail.endswith("; restarted in place 1 time"), cause.detail
    once = pod("p-2", phase="Failed", containers=[terminated(3)])
    plain = ended(Chain(trainjob=trainjob(conditions=FAILED), pods=[once], nodes=HEALTHY))
    assert "restarted" not in plain.detail
