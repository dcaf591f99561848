"""What a TrainJob and the objects under it say: its state, its executions and their causes.

Pure: :func:`observe` reads API objects (plain dicts, shaped exactly as the API server returns
them) and returns an observation. It does no I/O and takes no clock, so every rule is tested over
object fixtures. The evidence is read top-down, as classification.md §4.2 proposes: TrainJob,
then JobSet, then its Jobs, then their Pods, the Nodes the pods were bound to, and the Events
about them. The TrainJob says *that* a run ended; only the pods say *why*.

docs/specs/0010-kubeflow-adapter.md §5 gives each rule and where the research was corrected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs
from jobdispatch.spi import ExecutionObs
from jobdispatch.types import Actor, Cause, CauseKind, ObjectState, Provenance

from jobdispatch_kubeflow import names

__all__ = [
    "Chain",
    "Observation",
    "dying",
    "observe",
    "pinned",
    "pins",
    "placement",
    "placement_pins",
    "pod_cause",
    "wants_nodes",
]

Obj = Mapping[str, Any]

#: Container waiting reasons that mean the container could not be started at all.
LAUNCH_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
#: Container terminated reasons that mean the runtime never started the process.
LAUNCH_TERMINATED = frozenset({"ContainerCannotRun", "StartError"})
#: Pod status reasons of a kubelet admission refusal (the pod never ran on the node).
LAUNCH_POD_REASONS = frozenset({"UnexpectedAdmissionError", "NodeAffinity", "NodeAffinityError"})
#: Pod status reasons the kubelet sets when the node shut down or was lost.
NODE_POD_REASONS = frozenset({"Terminated", "NodeShutdown", "NodeLost"})
#: TrainJob or JobSet condition reasons that mean its resources could never be made.
CREATION_FAILED = frozenset(
    {
        "TrainingRuntimeNotSupported",
        "JobCreationFailed",
        "HeadlessServiceCreationFailed",
        "PVCCreationFailed",
    }
)


@attrs.frozen(kw_only=True)
class Chain:
    """Every object the evidence of one TrainJob lives in.

    ``nodes`` is None when the nodes were not read (absence of a node then proves nothing);
    a mapping, even empty, means every node was listed.
    """

    trainjob: Obj
    jobset: Obj | None = None
    jobs: Sequence[Obj] = ()
    pods: Sequence[Obj] = ()
    nodes: Mapping[str, Obj] | None = None
    events: Sequence[Obj] = ()
    #: The TrainJob's Kueue Workload (Kueue mode), None when there is none (yet).
    workload: Obj | None = None


@attrs.frozen(kw_only=True)
class Observation:
    """What :func:`observe` concludes, field for field what an ObjectObs shows."""

    name: str
    state: ObjectState
    executions: tuple[ExecutionObs, ...] = ()
    hold_instance: int | None = None
    lost_nodes: tuple[str, ...] = ()
    detail: str = ""
    #: Pods of the object whose processes may still run (not Succeeded or Failed): a stop's
    #: clean-up is pending while any is left.
    pods_left: int = 0


# ---------------------------------------------------------------------------- small readers


def _get(obj: Obj | None, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _condition(obj: Obj | None, kind: str) -> Obj | None:
    for cond in _get(obj, "status", "conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def _describe(cond: Obj | None) -> str:
    if cond is None:
        return ""
    text = f"{cond.get('type')}={cond.get('reason', '')}"
    if cond.get("message"):
        text += f" ({cond['message']})"
    return text


def _attempt(pod: Obj) -> int:
    value = (_get(pod, "metadata", "labels") or {}).get(names.RESTART_ATTEMPT, "0")
    try:
        return int(value)
    except ValueError:
        return 0


def _statuses(pod: Obj) -> list[Obj]:
    status = _get(pod, "status") or {}
    return [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]


def _terminations(pod: Obj) -> list[dict[str, Any]]:
    """Every termination a pod's containers show, current and last (a container restarted in
    place under ``OnFailure`` keeps its OOM only in ``lastState``)."""
    found = []
    for cs in _statuses(pod):
        for where in ("state", "lastState"):
            term = _get(cs, where, "terminated")
            if term:
                found.append(dict(term, container=cs.get("name", "")))
    return found


def _started(pod: Obj) -> bool:
    """Whether the pod ran anything: a container running or terminated, or a terminal phase
    reached after binding (a pod failed by the kubelet's admission never ran, but its run is
    still the one that ended)."""
    phase = _get(pod, "status", "phase")
    if phase == "Running":
        return True
    for cs in _statuses(pod):
        state = cs.get("state") or {}
        if "running" in state or "terminated" in state or _get(cs, "lastState", "terminated"):
            return True
    return phase in ("Succeeded", "Failed") and bool(_get(pod, "spec", "nodeName"))


def _unschedulable(pod: Obj) -> str | None:
    for cond in _get(pod, "status", "conditions") or ():
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return str(cond.get("message", "unschedulable"))
    return None


def _launch_problem(pod: Obj) -> str | None:
    for cs in _statuses(pod):
        waiting = _get(cs, "state", "waiting") or {}
        if waiting.get("reason") in LAUNCH_WAITING:
            msg = waiting.get("message", "")
            return f"container {cs.get('name')}: {waiting['reason']}" + (f" ({msg})" if msg else "")
    for term in _terminations(pod):
        if term.get("reason") in LAUNCH_TERMINATED:
            return f"container {term['container']}: {term['reason']}"
    reason = _get(pod, "status", "reason") or ""
    if reason in LAUNCH_POD_REASONS or reason.startswith("OutOf"):
        return f"the kubelet refused the pod: {reason} ({_get(pod, 'status', 'message') or ''})"
    return None


def _node_gone(pod: Obj, nodes: Mapping[str, Obj] | None) -> str | None:
    """Why the node under ``pod`` is lost (deleted, or not Ready), or None."""
    node_name = _get(pod, "spec", "nodeName")
    if not node_name or nodes is None:
        return None
    node = nodes.get(node_name)
    if node is None:
        return f"node {node_name} was deleted"
    for cond in _get(node, "status", "conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            why = cond.get("reason") or cond.get("status")
            return f"node {node_name} is not Ready ({why})"
    return None


# ---------------------------------------------------------------------------- one pod's cause


def _signal_of(code: int) -> int | None:
    return code - 128 if 128 < code < 160 else None


def pod_cause(pod: Obj, nodes: Mapping[str, Obj] | None = None) -> Cause | None:
    """The cause a failed (or failing) pod shows by itself, or None when it shows none.

    Order matters, and each step says why: an OOM kill is the job's own (no disruption makes a
    container exceed its limit); a disruption condition explains a 137 or 143 that would
    otherwise read as the application's; a lost node explains a pod the kubelet never reported
    on; launch problems come before exit codes, since a container that never started has none.
    """
    for term in _terminations(pod):
        if term.get("reason") == "OOMKilled":
            code = int(term.get("exitCode", 137))
            return Cause(
                CauseKind.OUT_OF_MEMORY,
                Provenance.APPLICATION,
                detail=f"container {term['container']} OOMKilled",
                exit_code=code,
                signal=_signal_of(code) or 9,
            )
    disruption = None
    for cond in _get(pod, "status", "conditions") or ():
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            disruption = cond
    reason = _get(pod, "status", "reason") or ""
    if disruption is not None:
        why = str(disruption.get("reason", ""))
        text = f"DisruptionTarget {why}: {disruption.get('message', '')}".rstrip(": ")
        if why == "PreemptionByScheduler":
            return Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER, detail=text)
        if why == "EvictionByEvictionAPI":
            return Cause(
                CauseKind.PREEMPTED,
                Provenance.ACTOR,
                detail=text,
                actor=Actor.human("eviction API (drain, autoscaler or descheduler)"),
            )
        if why in ("DeletionByTaintManager", "DeletionByPodGC"):
            return Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, detail=text)
        if why == "TerminationByKubelet":
            if reason in NODE_POD_REASONS:
                return Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, detail=text)
            return Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER, detail=f"{text} ({reason})")
    if reason in NODE_POD_REASONS:
        return Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, detail=f"pod reason {reason}")
    if reason == "Evicted":
        msg = _get(pod, "status", "message") or ""
        return Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER, detail=f"evicted: {msg}")
    if reason == "DeadlineExceeded":
        return Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER, detail="pod deadline exceeded")
    gone = _node_gone(pod, nodes)
    phase = _get(pod, "status", "phase")
    if gone is not None and (
        phase not in ("Succeeded",) or _get(pod, "metadata", "deletionTimestamp")
    ):
        return Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, detail=gone)
    launch = _launch_problem(pod)
    if launch is not None:
        return Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, detail=launch)
    failed = [t for t in _terminations(pod) if int(t.get("exitCode", 0)) != 0]
    if failed:
        first = min(failed, key=lambda t: str(t.get("finishedAt") or ""))
        code = int(first["exitCode"])
        return Cause(
            CauseKind.NON_ZERO_EXIT,
            Provenance.APPLICATION,
            detail=f"container {first['container']} {first.get('reason', 'Error')}",
            exit_code=code,
            signal=_signal_of(code),
        )
    return None


# ---------------------------------------------------------------------------- the object


def _pod_name(pod: Obj) -> str:
    return str(_get(pod, "metadata", "name") or "?")


def _evidence(chain: Chain, pods: Iterable[Obj]) -> str:
    """Everything read, for the detail of a cause the evidence does not decide."""
    parts = [
        _describe(_condition(chain.trainjob, "Failed")),
        _describe(_condition(chain.jobset, "Failed")),
    ]
    for job in chain.jobs:
        failed = _condition(job, "Failed")
        if failed:
            parts.append(f"Job {_get(job, 'metadata', 'name')}: {_describe(failed)}")
    for pod in pods:
        phase = _get(pod, "status", "phase")
        parts.append(f"pod {_pod_name(pod)} {phase} {_get(pod, 'status', 'reason') or ''}".strip())
    for event in chain.events:
        if event.get("type") == "Warning":
            parts.append(f"event {event.get('reason')}: {event.get('message', '')}")
    return "; ".join(p for p in parts if p) or "no evidence left (the pods are gone)"


def _failure_cause(chain: Chain, pods: Sequence[Obj], ran: bool, attempt: int = 0) -> Cause:
    """Why a run that failed ended: TrainJob and JobSet reasons first where they decide, then
    the pods (and what an earlier look pinned of pods since deleted), then the Jobs, else
    unknown with every piece of evidence in the detail."""
    failed = _condition(chain.trainjob, "Failed") or _condition(chain.jobset, "Failed") or {}
    reason = str(failed.get("reason", ""))
    if reason in CREATION_FAILED or _condition(chain.jobset, "JobCreationFailed"):
        return Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, detail=_describe(failed))
    causes = [(pod, pod_cause(pod, chain.nodes)) for pod in pods]
    found = [c for _, c in causes if c is not None]
    found.extend(pinned(chain.trainjob, attempt))
    for kind in (CauseKind.OUT_OF_MEMORY, CauseKind.PREEMPTED, CauseKind.NODE_LOST):
        for cause in found:
            if cause.kind is kind:
                return cause
    if reason == "DeadlineExceeded":
        if not ran:
            never = [_unschedulable(p) for p in pods]
            launch = [c for c in found if c.kind is CauseKind.LAUNCH_FAILED]
            if launch:
                return launch[0]
            if any(never):
                msg = next(m for m in never if m)
                return Cause(
                    CauseKind.NO_CAPACITY,
                    Provenance.SCHEDULER,
                    detail=f"never scheduled before the deadline: {msg}",
                )
        return Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER, detail=_describe(failed))
    for job in chain.jobs:
        if str((_condition(job, "Failed") or {}).get("reason", "")) == "DeadlineExceeded":
            return Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER, detail="Job deadline exceeded")
    for kind in (CauseKind.TIME_LIMIT, CauseKind.LAUNCH_FAILED):
        for cause in found:
            if cause.kind is kind:
                return cause
    exits = [(p, c) for p, c in causes if c is not None and c.kind is CauseKind.NON_ZERO_EXIT]
    if not exits:
        exits = [({}, c) for c in found if c.kind is CauseKind.NON_ZERO_EXIT]
    if exits:
        # The earliest failure is the cause; the later ones are its peers reacting to it.
        return min(exits, key=lambda pc: _first_failure(pc[0]))[1]
    for job in chain.jobs:
        from_job = _job_message_cause(_condition(job, "Failed"))
        if from_job is not None:
            return from_job
    lost = placed_node_lost(chain, execution_index(_kueue_trail(chain.trainjob), attempt))
    if lost is not None:
        return lost
    return Cause(CauseKind.UNKNOWN, Provenance.NONE, detail=_evidence(chain, pods))


_EXIT_MESSAGE = re.compile(r"failed with exit code (?P<code>[0-9]+) matching FailJob rule")


def _job_message_cause(failed: Obj | None) -> Cause | None:
    """What a Job's ``PodFailurePolicy`` failure message still says once its pods are gone
    ("Container node for pod ns/p failed with exit code 3 matching FailJob rule at index 2"):
    a non-zero exit with its code. 137 is left undecided (an OOM kill or any SIGKILL), and so is
    a pod condition (one ``DisruptionTarget`` for preemption and node loss alike)."""
    if failed is None or failed.get("reason") != "PodFailurePolicy":
        return None
    m = _EXIT_MESSAGE.search(str(failed.get("message", "")))
    if m is None or int(m["code"]) == 137:
        return None
    code = int(m["code"])
    return Cause(
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        detail=f"from the Job's failure: {failed.get('message')}",
        exit_code=code,
        signal=_signal_of(code),
    )


# ---------------------------------------------------------------------------- pinned evidence

#: Causes worth pinning: the ones a pod shows and loses when it is deleted.
_PINNED_KINDS = frozenset(
    {
        CauseKind.OUT_OF_MEMORY,
        CauseKind.PREEMPTED,
        CauseKind.NODE_LOST,
        CauseKind.NON_ZERO_EXIT,
        CauseKind.TIME_LIMIT,
        CauseKind.LAUNCH_FAILED,
    }
)


def _pin_key(attempt: int) -> str:
    return f"{names.EVIDENCE}-{attempt}"


def pinned(trainjob: Obj, attempt: int) -> list[Cause]:
    """The cause an earlier look pinned on the TrainJob for ``attempt`` (see :func:`pins`)."""
    raw = (_get(trainjob, "metadata", "annotations") or {}).get(_pin_key(attempt))
    if not raw:
        return []
    try:
        data = json.loads(raw)
        kind = CauseKind(data["kind"])
        provenance = Provenance(data["provenance"])
    except (ValueError, KeyError, TypeError):
        return []
    return [
        Cause(
            kind,
            provenance,
            detail=f"pinned from pod {data.get('pod', '?')}: {data.get('detail', '')}",
            exit_code=data.get("exit_code"),
            signal=data.get("signal"),
            actor=Actor.human(str(data["actor"])) if data.get("actor") else None,
        )
    ]


def dying(pod: Obj) -> bool:
    """A pod that has failed or is being deleted or disrupted: what it shows now is an ending,
    not a passing state (a node NotReady for a moment is not pinned)."""
    if _get(pod, "status", "phase") == "Failed" or _get(pod, "metadata", "deletionTimestamp"):
        return True
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in _get(pod, "status", "conditions") or ()
    )


def _current_attempt(chain: Chain) -> int:
    """The JobSet attempt running now: its restart count, or a later attempt's pods."""
    restarts = int(_get(chain.jobset, "status", "restarts") or 0)
    return max([restarts, *(_attempt(p) for p in chain.pods)])


def pins(chain: Chain) -> dict[str, str]:
    """Annotations that pin what a failing pod of the current attempt shows, before it is
    deleted with its evidence (an evicted pod is gone within a second or two; a JobSet restart
    deletes a whole attempt). Pure: the backend writes them. Empty when there is nothing new to
    pin: the TrainJob has ended, or the attempt is pinned already. In Kueue mode a run ended
    by an eviction is pinned first (``names.KUEUE_RUNS``, see :func:`kueue_runs`)."""
    tj = chain.trainjob
    if _condition(tj, "Complete") or _condition(tj, "Failed"):
        return {}
    attempt = _current_attempt(chain)
    runs = kueue_runs(chain, attempt)
    if len(runs) > len(_kueue_trail(tj)):
        return {names.KUEUE_RUNS: json.dumps(runs, sort_keys=True)}
    if (_get(tj, "metadata", "annotations") or {}).get(_pin_key(attempt)):
        return {}
    for pod in chain.pods:
        if _attempt(pod) != attempt or not dying(pod):
            continue
        cause = pod_cause(pod, chain.nodes)
        if cause is None or cause.kind not in _PINNED_KINDS:
            continue
        if cause.kind is CauseKind.LAUNCH_FAILED and _get(pod, "status", "phase") != "Failed":
            continue  # a pull still being retried is not an ending yet
        value = {
            "kind": str(cause.kind),
            "provenance": str(cause.provenance),
            "detail": cause.detail,
            "exit_code": cause.exit_code,
            "signal": cause.signal,
            "actor": cause.actor.id if cause.actor else None,
            "pod": _pod_name(pod),
        }
        return {_pin_key(attempt): json.dumps(value, sort_keys=True)}
    return {}


# ---------------------------------------------------------------------------- pinned placement


def _placement_key(index: int) -> str:
    return f"{names.PLACEMENT}-{index}"


def placement(trainjob: Obj, index: int) -> dict[str, str]:
    """The nodes execution ``index`` ran on, as pinned by :func:`placement_pins`: node name to
    node uid ("" for a node that showed none). Empty when nothing is pinned or the pin is
    unreadable."""
    raw = (_get(trainjob, "metadata", "annotations") or {}).get(_placement_key(index))
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(name): str(uid) for name, uid in data.items()}


def placement_pins(chain: Chain) -> dict[str, str]:
    """The annotation that pins the nodes the current execution's started pods are bound to,
    when that names a node the pin lacks (a pod bound later adds its own); empty otherwise, and
    always once the TrainJob has ended or when the nodes were not listed. Pure: the backend
    writes it, with :func:`pins`.

    Why: a node deleted under a run takes its pods with it (PodGC fails them and the Job
    controller lets them go within a second, seen on the control plane), and the Job's failure
    then says nothing of why. The pinned placement is what is left to show the run's node is
    gone (:func:`placed_node_lost`). Keyed by execution index, not JobSet attempt: in Kueue mode
    a readmitted run keeps the attempt of the run Kueue evicted."""
    tj = chain.trainjob
    if chain.nodes is None or _condition(tj, "Complete") or _condition(tj, "Failed"):
        return {}
    attempt = _current_attempt(chain)
    index = execution_index(_kueue_trail(tj), attempt)
    known = placement(tj, index)
    bound = dict(known)
    for pod in chain.pods:
        name = _get(pod, "spec", "nodeName")
        if _attempt(pod) != attempt or not name or not _started(pod):
            continue
        node = chain.nodes.get(name)
        if node is not None:  # a node gone already is the pod's own evidence (pod_cause)
            bound.setdefault(str(name), str(_get(node, "metadata", "uid") or ""))
    if bound == known:
        return {}
    return {_placement_key(index): json.dumps(bound, sort_keys=True)}


def placed_node_lost(chain: Chain, index: int) -> Cause | None:
    """Node loss for execution ``index`` whose pods are gone with their evidence, when a node
    it was pinned on (:func:`placement_pins`) is no longer there, or is another node by the same
    name (its uid differs). None when nothing is pinned, every pinned node is still there, or
    the nodes were not listed (their absence then proves nothing)."""
    if chain.nodes is None:
        return None
    for name, uid in sorted(placement(chain.trainjob, index).items()):
        node = chain.nodes.get(name)
        now = str(_get(node, "metadata", "uid") or "")
        if node is None:
            gone = f"node {name} was deleted"
        elif uid and now and now != uid:
            gone = f"node {name} was deleted and made again (uid {uid} is gone)"
        else:
            continue
        return Cause(
            CauseKind.NODE_LOST,
            Provenance.SCHEDULER,
            detail=f"{gone}; the run's pods ran there (placement pinned when it ran) and are "
            "gone with their evidence",
        )
    return None


def wants_nodes(trainjobs: Iterable[Obj], pods: Iterable[Obj]) -> bool:
    """Whether an observation must list the nodes: a pod is bound, or a TrainJob that has not
    succeeded has a pinned placement whose nodes may since have gone."""
    if any(_get(p, "spec", "nodeName") for p in pods):
        return True
    return any(
        not _condition(tj, "Complete")
        and any(k.startswith(names.PLACEMENT) for k in _get(tj, "metadata", "annotations") or {})
        for tj in trainjobs
    )


def _restart_rule_cause(jobset: Obj | None) -> Cause | None:
    """The cause of the run before the latest restart, from the failure-policy rule that
    restarted it (``RestartingJobSet`` reason ``FailurePolicy_dispatch-restart-<index>``, whatever
    the condition's status now): the derived runtime's rules name the pod failure they match
    (0010 §6). None for a restart by any other rule."""
    for c in _get(jobset, "status", "conditions") or ():
        if c.get("type") != "RestartingJobSet":
            continue
        m = re.fullmatch(r"FailurePolicy_dispatch-restart-([0-9])", str(c.get("reason", "")))
        if m is None:
            return None
        text = f"restarted by the JobSet failure policy ({_describe(c)})"
        if m[1] == "2":
            return Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, detail=text)
        what = "a DisruptionTarget (preempted or node lost)" if m[1] == "0" else "exit code 137"
        return Cause(CauseKind.UNKNOWN, Provenance.NONE, detail=f"{text}: {what}")
    return None


def _first_failure(pod: Obj) -> str:
    times = [str(t.get("finishedAt") or "~") for t in _terminations(pod) if t.get("exitCode")]
    return min(times, default="~")


def _stop_cause(chain: Chain) -> Cause:
    annotations = _get(chain.trainjob, "metadata", "annotations") or {}
    reason = annotations.get(names.STOP)
    if reason is not None:
        return Cause(
            CauseKind.CANCELLED,
            Provenance.ACTOR,
            detail=f"stopped: {reason}" if reason else "stopped",
            actor=Actor.adapter("kubeflow"),
        )
    return Cause(
        CauseKind.CANCELLED,
        Provenance.ACTOR,
        detail="the TrainJob was deleted by someone other than dispatch",
    )


def _span(pods: Sequence[Obj]) -> tuple[datetime | None, datetime | None, tuple[str, ...]]:
    starts = [t for t in (_time(_get(p, "status", "startTime")) for p in pods) if t]
    ends = [t for p in pods for t in (_time(x.get("finishedAt")) for x in _terminations(p)) if t]
    nodes = tuple(sorted({n for n in (_get(p, "spec", "nodeName") for p in pods) if n}))
    return (min(starts) if starts else None), (max(ends) if ends else None), nodes


def _hold(annotations: Mapping[str, str]) -> int | None:
    value = annotations.get(names.HOLD)
    if value is None or not value.isdigit():
        return None
    return int(value)


def _open_id(value: str | None) -> str | None:
    """The id of the TrainJob's latest open (spec 0012 §3), None when it has none."""
    try:
        return str(json.loads(value)["id"]) if value else None
    except (ValueError, KeyError, TypeError):
        return None


@attrs.frozen
class KueueView:
    """What a Workload's conditions say of a TrainJob Kueue keeps suspended (spec 0012 §5).

    state: the object state it means; cause: the cause the evidence names (of the last eviction,
    or of why it waits), with its provenance, or None; detail: Kueue's own reason and message.
    """

    state: ObjectState
    cause: CauseKind | None
    provenance: Provenance | None
    detail: str


#: QuotaReserved=False messages of a workload that can never fit its ClusterQueue (v0.19.2:
#: "... request (16) > maximum capacity (8)"), as opposed to one waiting for quota in use.
_NEVER_FITS = re.compile(r"maximum capacity|exceeds.*(quota|capacity)", re.IGNORECASE)


def kueue_view(
    workload: Obj,
    check: str = "jobdispatch-admission",
    *,
    gated_by: str | None = None,
    open_id: str | None = None,
) -> KueueView:
    """Read a Workload's conditions, first match wins (classification.md §3.2, as observed).

    Pure. ``check`` is the admission check of dispatch's controller, whose Pending message says
    whether the Workload waits for dispatch's open (the readmission gate). ``gated_by`` and
    ``open_id`` are what the TrainJob says now (its admission-gated-by annotation, its latest
    open): a Workload lags its job, so a gate the job no longer has, or a readmission wait for an
    open already superseded, is the Workload not having caught up, and reads as pending."""

    def cond(kind: str) -> Obj | None:
        for c in _get(workload, "status", "conditions") or ():
            if c.get("type") == kind:
                return dict(c)
        return None

    def said(c: Obj | None) -> str:
        return f"{c.get('reason', '')}: {c.get('message', '')}" if c else ""

    evicted = cond("Evicted")
    evicted = evicted if evicted and evicted.get("status") == "True" else None
    reserved = cond("QuotaReserved")
    admitted = cond("Admitted")
    S, K, P = ObjectState, CauseKind, Provenance
    if _get(workload, "spec", "active") is False:
        why = said(evicted) if evicted else "spec.active=false"
        if evicted and "RequeuingLimitExceeded" in str(evicted.get("message", "")):
            return KueueView(
                S.HELD,
                K.NO_CAPACITY,
                P.SCHEDULER,
                f"deactivated by Kueue, requeuing limit exceeded ({why})",
            )
        if evicted and "MaximumExecutionTimeExceeded" in str(evicted.get("message", "")):
            return KueueView(
                S.HELD,
                K.TIME_LIMIT,
                P.SCHEDULER,
                f"deactivated by Kueue, maximum execution time ({why})",
            )
        if evicted and evicted.get("reason") == "AdmissionCheck":
            return KueueView(
                S.HELD,
                K.NO_CAPACITY,
                P.SCHEDULER,
                f"deactivated: an admission check rejected it ({why})",
            )
        return KueueView(S.HELD, None, P.ACTOR, f"deactivated in Kueue ({why})")
    for c in _get(workload, "status", "admissionChecks") or ():
        if (
            c.get("name") == check
            and c.get("state") == "Pending"
            and "waits" in str(c.get("message", ""))
        ):
            if open_id is not None and f"open {open_id} " not in str(c.get("message", "")):
                return KueueView(S.PENDING, None, None, "opened again: waiting for its check")
            # Requeued with quota reserved again, Kueue has turned Evicted (and Preempted) False:
            # their reasons still name the last eviction.
            was, how = cond("Evicted"), cond("Preempted")
            last = f"; last eviction {said(was)}" if was else ""
            if how and was and was.get("reason") == "Preempted":
                last += f" ({how.get('reason')})"
            # Pending, not gated: dispatch's gate was lifted, and a core that read it gated would
            # open it again (a lost open, as it thinks) behind its recovery rule. Nothing
            # readmits it but an explicit open (spec 0012 §7, and §9 for what is still open).
            return KueueView(
                S.PENDING, None, None, f"readmission gated by dispatch: {c.get('message')}{last}"
            )
    if admitted and admitted.get("status") == "True":
        return KueueView(S.PENDING, None, None, "admitted by Kueue, starting")
    if (
        reserved
        and reserved.get("status") == "False"
        and reserved.get("reason") == "AdmissionGated"
    ):
        if not gated_by:
            return KueueView(S.PENDING, None, None, "admission gate lifted; Kueue has not seen it")
        return KueueView(S.GATED, None, None, f"admission gated ({said(reserved)})")
    if (
        reserved
        and reserved.get("status") == "False"
        and _NEVER_FITS.search(str(reserved.get("message", "")))
    ):
        return KueueView(
            S.PENDING, K.NO_CAPACITY, P.SCHEDULER, f"never fits its ClusterQueue ({said(reserved)})"
        )
    if evicted is not None:
        reason = evicted.get("reason")
        if reason == "Preempted":
            how = cond("Preempted")
            return KueueView(
                S.PENDING,
                K.PREEMPTED,
                P.SCHEDULER,
                f"preempted by Kueue ({how.get('reason') if how else 'unknown'}): "
                f"{evicted.get('message', '')}",
            )
        if reason == "PodsReadyTimeout":
            return KueueView(
                S.PENDING,
                K.NO_CAPACITY,
                P.SCHEDULER,
                f"evicted by Kueue: pods not ready in time ({said(evicted)})",
            )
        if reason == "AdmissionCheck":
            return KueueView(
                S.PENDING,
                K.NO_CAPACITY,
                P.SCHEDULER,
                f"evicted by Kueue: an admission check asked a retry ({said(evicted)})",
            )
        if reason == "NodeFailures":
            return KueueView(
                S.PENDING, K.NODE_LOST, P.SCHEDULER, f"evicted by Kueue ({said(evicted)})"
            )
        if reason in ("ClusterQueueStopped", "LocalQueueStopped"):
            return KueueView(S.HELD, None, P.ACTOR, f"its queue was stopped ({said(evicted)})")
        return KueueView(S.PENDING, None, P.SCHEDULER, f"evicted by Kueue ({said(evicted)})")
    if reserved and reserved.get("status") == "False":
        return KueueView(
            S.PENDING, K.NO_CAPACITY, P.SCHEDULER, f"waiting for quota ({said(reserved)})"
        )
    return KueueView(
        S.PENDING, None, None, f"queued in Kueue ({said(reserved) or 'no conditions yet'})"
    )


def _evictions(workload: Obj) -> dict[str, int]:
    """Kueue's count of the Workload's evictions by reason (``status.schedulingStats``)."""
    out: dict[str, int] = {}
    for e in _get(workload, "status", "schedulingStats", "evictions") or ():
        key = str(e.get("reason", ""))
        out[key] = out.get(key, 0) + int(e.get("count") or 0)
    return out


#: Kueue v0.19.2's words for each preemption reason in an eviction message
#: (``pkg/scheduler/preemption``), most specific first.
_PREEMPTION_WORDS = (
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
)


def eviction_cause(workload: Obj, reason: str | None = None) -> Cause:
    """The cause of the run Kueue's last eviction of ``workload`` ended (spec 0012 §6).

    Pure. ``reason`` is the eviction's reason when known from Kueue's counts (see
    :func:`kueue_runs`): once Kueue requeues the Workload and reserves quota again, its
    ``Evicted`` condition turns False with reason ``QuotaReserved`` and the message "Previously:
    <the eviction's message>" (observed), so the reason is gone from it."""
    conds = {str(c.get("type")): c for c in _get(workload, "status", "conditions") or ()}
    evicted = conds.get("Evicted")
    if evicted is None and reason is None:
        return Cause(CauseKind.UNKNOWN, Provenance.NONE, detail="evicted by Kueue, reason not kept")
    if reason is None:
        reason = str((evicted or {}).get("reason", ""))
    message = str((evicted or {}).get("message", ""))
    preempted_message = str((conds.get("Preempted") or {}).get("message", ""))
    if reason == "Preempted" and preempted_message and preempted_message not in message:
        # A later eviction (dispatch's check rejecting the readmission deactivates it) has
        # overwritten Evicted; the Preempted condition keeps the preemption's words.
        message = f"{preempted_message} (then {message})" if message else preempted_message
    said = f"Kueue Evicted {reason}: {message}"
    K, P = CauseKind, Provenance
    if reason == "Preempted":
        how = str((conds.get("Preempted") or {}).get("reason", ""))
        if not how.startswith("In"):
            # Requeued, the Preempted condition's reason is QuotaReserved too (observed); the
            # message keeps Kueue's words for the preemption's reason.
            how = next((r for words, r in _PREEMPTION_WORDS if words in message), "unknown")
        return Cause(K.PREEMPTED, P.SCHEDULER, detail=f"preempted by Kueue ({how}); {said}")
    if reason == "PodsReadyTimeout":
        return Cause(K.NO_CAPACITY, P.SCHEDULER, detail=f"pods not ready in time; {said}")
    if reason == "AdmissionCheck":
        return Cause(K.NO_CAPACITY, P.SCHEDULER, detail=f"an admission check evicted it; {said}")
    if reason == "NodeFailures":
        return Cause(K.NODE_LOST, P.SCHEDULER, detail=said)
    if "MaximumExecutionTimeExceeded" in message:
        return Cause(K.TIME_LIMIT, P.SCHEDULER, detail=f"maximum execution time; {said}")
    if "RequeuingLimitExceeded" in message:
        return Cause(K.NO_CAPACITY, P.SCHEDULER, detail=f"requeuing limit exceeded; {said}")
    if reason in ("ClusterQueueStopped", "LocalQueueStopped"):
        return Cause(K.PREEMPTED, P.ACTOR, detail=f"its queue was stopped; {said}")
    if reason in ("Deactivated", "InactiveWorkload") or _get(workload, "spec", "active") is False:
        return Cause(K.CANCELLED, P.ACTOR, detail=f"deactivated in Kueue; {said}")
    return Cause(K.UNKNOWN, P.NONE, detail=said)


def _kueue_trail(trainjob: Obj) -> list[dict[str, Any]]:
    """The runs Kueue's evictions ended, as pinned (``names.KUEUE_RUNS``); [] when unreadable."""
    raw = (_get(trainjob, "metadata", "annotations") or {}).get(names.KUEUE_RUNS)
    try:
        trail = json.loads(raw) if raw else []
        return [
            {
                **e,
                "index": int(e["index"]),
                "attempt": int(e["attempt"]),
                "accumulated": int(e["accumulated"]),
            }
            for e in trail
        ]
    except (ValueError, KeyError, TypeError):
        return []


def execution_index(trail: Sequence[Mapping[str, Any]], attempt: int) -> int:
    """The execution index of JobSet attempt ``attempt`` after the evictions in ``trail``.

    A readmitted TrainJob's pods carry the attempt of the run Kueue evicted (JobSet counts no
    restart for a suspend), so each eviction shifts the index by one from there on."""
    index = attempt
    for entry in trail:
        if int(entry["attempt"]) <= attempt:
            index = int(entry["index"]) + 1 + (attempt - int(entry["attempt"]))
    return index


def kueue_runs(chain: Chain, attempt: int) -> list[dict[str, Any]]:
    """The trail of Kueue-ended runs, with the one the Workload shows now if it is not yet in it.

    Pure. Kueue adds an admitted Workload's time to ``accumulatedPastExecutionTimeSeconds``
    when it evicts it (observed: 10 s after a preemption, with no execution-time limit set), so
    a total above the trail's last one means a run ended by eviction since. Two evictions
    between looks are recorded as one, with the later cause."""
    trail = _kueue_trail(chain.trainjob)
    if chain.workload is None:
        return trail
    total = int(_get(chain.workload, "status", "accumulatedPastExecutionTimeSeconds") or 0)
    if total <= (trail[-1]["accumulated"] if trail else 0):
        return trail
    evicted = next(
        (
            c
            for c in _get(chain.workload, "status", "conditions") or ()
            if c.get("type") == "Evicted"
        ),
        None,
    )
    if evicted is None:
        return trail
    counts = _evictions(chain.workload)
    before: Mapping[str, Any] = (trail[-1].get("evictions") or {}) if trail else {}
    risen = [r for r, n in sorted(counts.items()) if n > int(before.get(r) or 0)]
    # The eviction that ended the run, not a deactivation that followed it (Kueue deactivates
    # the Workload when dispatch's check rejects its readmission; spec 0012 §9).
    ran = [r for r in risen if not r.startswith(("Deactivated", "InactiveWorkload"))]
    chosen = ran or risen
    cause = eviction_cause(chain.workload, chosen[-1] if chosen else None)
    entry = {
        "evictions": counts,
        "index": execution_index(trail, attempt),
        "attempt": attempt,
        "accumulated": total,
        "kind": str(cause.kind),
        "provenance": str(cause.provenance),
        "detail": cause.detail,
        "evicted_at": evicted.get("lastTransitionTime"),
    }
    return [*trail, entry]


def _never_readmitted(workload: Obj, check: str = "jobdispatch-admission") -> bool:
    """Whether dispatch's check rejected the Workload's readmission after an eviction."""
    return any(
        c.get("name") == check
        and c.get("state") == "Rejected"
        and "never readmitted" in str(c.get("message", ""))
        for c in _get(workload, "status", "admissionChecks") or ()
    )


def observe(chain: Chain) -> Observation:
    """State, executions and causes of one TrainJob, from ``chain`` alone.

    Executions are the JobSet's restart attempts: attempt *i* is execution *i* (the pods carry
    ``jobset.sigs.k8s.io/restart-attempt``, the JobSet counts ``status.restarts``). A restart
    deletes the earlier attempt's pods, so an earlier execution whose pods are gone ends with
    cause unknown and the restart condition in its detail: its evidence was destroyed, and no
    cause is guessed.
    """
    tj = chain.trainjob
    name = str(_get(tj, "metadata", "name"))
    annotations: Mapping[str, str] = _get(tj, "metadata", "annotations") or {}
    restarts = int(_get(chain.jobset, "status", "restarts") or 0)
    by_attempt: dict[int, list[Obj]] = {}
    for pod in chain.pods:
        by_attempt.setdefault(_attempt(pod), []).append(pod)
    current = max([restarts, *by_attempt])
    pods_now = by_attempt.get(current, [])
    ran_now = any(_started(p) for p in pods_now)
    succeeded = _condition(tj, "Complete") or _condition(chain.jobset, "Completed")
    failed = _condition(tj, "Failed") or _condition(chain.jobset, "Failed")
    deleting = bool(_get(tj, "metadata", "deletionTimestamp"))
    #: Pods whose processes may still run (not yet Succeeded or Failed).
    live = sum(1 for p in chain.pods if _get(p, "status", "phase") not in ("Succeeded", "Failed"))
    jobs_status = _get(tj, "status", "jobsStatus") or ()
    counted = sum(int(j.get("succeeded") or 0) + int(j.get("failed") or 0) for j in jobs_status)
    ready = sum(int(j.get("ready") or 0) for j in jobs_status)
    # With the pods gone, the TrainJob's copy of the JobSet's counts is the evidence left
    # that the run started (it was ready, or finished pods).
    ran_now = ran_now or (((succeeded or failed) is not None or deleting) and counted + ready > 0)
    # Stop wrote down that a run was going, whose pods may be gone before anyone looks.
    ran_now = ran_now or (deleting and annotations.get(names.STOPPED_RUN) == str(current))

    executions: list[ExecutionObs] = []
    # Kueue mode: runs its evictions ended (their pods deleted by the suspend), then the
    # JobSet's attempts shifted past them (spec 0012 §6).
    kueue_mode = names.QUEUE_NAME in (_get(tj, "metadata", "labels") or {})
    trail = kueue_runs(chain, current) if kueue_mode else []
    for entry in trail:
        try:
            ended = Cause(
                CauseKind(entry["kind"]),
                Provenance(entry["provenance"]),
                detail=str(entry.get("detail", "")),
            )
        except (ValueError, KeyError):
            ended = Cause(CauseKind.UNKNOWN, Provenance.NONE, detail="unreadable Kueue trail")
        executions.append(
            ExecutionObs(
                index=int(entry["index"]),
                state=ObjectState.ENDED,
                cause=ended,
                ended_at=_time(entry.get("evicted_at")),
            )
        )
    restart_cond = _condition(chain.jobset, "RestartingJobSet")
    for i in range(current):
        pods = by_attempt.get(i, [])
        earlier = (
            _failure_cause(chain, pods, True, i) if pods or pinned(chain.trainjob, i) else None
        )
        if (earlier is None or earlier.kind is CauseKind.UNKNOWN) and i == current - 1:
            earlier = _restart_rule_cause(chain.jobset)
        if earlier is None or earlier.kind is CauseKind.UNKNOWN:
            earlier = placed_node_lost(chain, execution_index(trail, i)) or earlier
        if earlier is None or earlier.kind is CauseKind.UNKNOWN:
            detail = (
                f"the JobSet restarted after this run; its pods were deleted with their "
                f"evidence. {_describe(restart_cond)}".strip()
            )
            if earlier is not None:
                detail = f"{earlier.detail}; {detail}"
            earlier = Cause(CauseKind.UNKNOWN, Provenance.NONE, detail=detail)
        start, end, nodes = _span(pods)
        executions.append(
            ExecutionObs(
                index=execution_index(trail, i),
                state=ObjectState.ENDED,
                cause=earlier,
                started_at=start,
                ended_at=end,
                nodes=nodes,
            )
        )

    start, end, nodes = _span(pods_now)
    lost = tuple(
        sorted({g.split(" ")[1] for g in (_node_gone(p, chain.nodes) for p in pods_now) if g})
    )
    details: list[str] = []
    state: ObjectState
    cause: Cause | None = None
    if succeeded is not None:
        state = ObjectState.ENDED
        cause = Cause(CauseKind.NONE, Provenance.NONE, detail=_describe(succeeded), exit_code=0)
        ran_now = True
        end = end or _time(succeeded.get("lastTransitionTime"))
    elif failed is not None:
        state = ObjectState.ENDED
        cause = _failure_cause(chain, pods_now, ran_now, current)
        end = end or _time(failed.get("lastTransitionTime"))
        # A failed TrainJob always ended a run, even one that never started (a launch
        # failure, no capacity before the deadline): its cause must not be lost.
        ran_now = True
    elif deleting and ran_now and live:
        # Stopped, but its processes may still run: the run ends when its last pod is gone.
        state = ObjectState.RUNNING
    elif deleting:
        state = ObjectState.ENDED
        if ran_now:
            cause = _stop_cause(chain)
    else:
        hold = _hold(annotations)
        suspended = bool(_get(tj, "spec", "suspend"))
        gate_closed = annotations.get(names.GATE) == "closed"
        if hold is not None:
            state = ObjectState.HELD
            if gate_closed:
                details.append("held before its gate was lifted")
        elif suspended and gate_closed:
            state = ObjectState.GATED
        elif suspended and names.QUEUE_NAME in (_get(tj, "metadata", "labels") or {}):
            # Kueue mode (spec 0012): Kueue suspends until it admits, and again when it
            # evicts; opened by dispatch, the TrainJob waits in its LocalQueue, and its
            # Workload says why.
            queue = _get(tj, "metadata", "labels")[names.QUEUE_NAME]
            if chain.workload is None:
                state = ObjectState.PENDING
                details.append(f"queued in Kueue LocalQueue {queue}: no Workload yet")
            elif trail and _never_readmitted(chain.workload):
                # Evicted after its admission, and dispatch's check rejected the readmission
                # (spec 0012 §9): the object's run is over; the supervisor's rule decides.
                state = ObjectState.ENDED
                details.append(
                    f"Kueue LocalQueue {queue}: evicted, never readmitted "
                    f"(execution {trail[-1]['index']}: {trail[-1].get('kind')})"
                )
            else:
                view = kueue_view(
                    chain.workload,
                    gated_by=annotations.get(names.ADMISSION_GATED_BY),
                    open_id=_open_id(annotations.get(names.OPEN)),
                )
                state = view.state
                kind = f" ({view.cause.value})" if view.cause else ""
                details.append(f"Kueue LocalQueue {queue}{kind}: {view.detail}")
        elif suspended:
            state = ObjectState.HELD
            details.append("suspended by someone other than dispatch (Kueue or a user)")
        elif ran_now:
            state = ObjectState.RUNNING
        else:
            state = ObjectState.PENDING
        if state in (ObjectState.HELD, ObjectState.GATED) and ran_now and pods_now:
            # Suspension deletes the pods; until they are gone the run is ending.
            details.append(f"suspended; {len(pods_now)} pods still terminating")
        for pod in pods_now:
            why = _unschedulable(pod)
            if why:
                details.append(f"pod {_pod_name(pod)} unschedulable (no-capacity): {why}")
            launch = _launch_problem(pod)
            if launch:
                details.append(f"pod {_pod_name(pod)} cannot launch (launch-failed): {launch}")
        if state is not ObjectState.RUNNING:
            ran_now = False
    if deleting:
        details.append(
            f"deleted; clean-up pending: {live} pods remain" if live else "deleted; clean-up clear"
        )
    if ran_now:
        executions.append(
            ExecutionObs(
                index=execution_index(trail, current),
                state=ObjectState.ENDED if state is ObjectState.ENDED else ObjectState.RUNNING,
                cause=cause,
                started_at=start,
                ended_at=end if state is ObjectState.ENDED else None,
                nodes=nodes,
            )
        )
    if restart_cond is not None:
        details.append(_describe(restart_cond))
    if cause is not None and cause.detail:
        details.insert(0, str(cause))
    return Observation(
        name=name,
        state=state,
        executions=tuple(sorted(executions, key=lambda e: e.index)),
        hold_instance=_hold(annotations),
        lost_nodes=lost if state is not ObjectState.ENDED else (),
        detail="; ".join(details),
        pods_left=live,
    )
