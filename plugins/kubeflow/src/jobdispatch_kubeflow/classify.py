"""What a TrainJob and the objects under it say: its state, its executions and their causes.

Pure: :func:`observe` reads API objects (plain dicts, shaped exactly as the API server returns
them) and returns an observation. It does no I/O and takes no clock, so every rule is tested over
object fixtures. The evidence is read top-down, as classification.md §4.2 proposes: TrainJob,
then JobSet, then its Jobs, then their Pods, the Nodes the pods were bound to, and the Events
about them. The TrainJob says *that* a run ended; only the pods say *why*.

What it reads and what it decides are kept apart: :func:`read` gathers the evidence of one
chain into a value, and first-match tables of rows (``jobdispatch.firstmatch``) decide from it:
:data:`STATES` the object's state, :data:`RUN_CAUSES` why a failed run ended, :data:`POD_CAUSES`
what one pod shows. docs/specs/0010-kubeflow-adapter.md §5 carries those tables as the code reads
them (a repository test compares them), with the reasons and where the research was corrected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs
from jobdispatch.firstmatch import Row, Table, always, cause_cells, cause_row
from jobdispatch.spi import ExecutionObs
from jobdispatch.types import Actor, Cause, CauseKind, ObjectState, Provenance

from jobdispatch_kubeflow import names

__all__ = [
    "POD_CAUSES",
    "RUN_CAUSES",
    "STATES",
    "Chain",
    "Decided",
    "Observation",
    "PodEvidence",
    "Reading",
    "RunEvidence",
    "dying",
    "observe",
    "pinned",
    "pins",
    "placement",
    "placement_pins",
    "pod_cause",
    "read",
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
                found.append(
                    dict(term, container=cs.get("name", ""), restarts=cs.get("restartCount") or 0)
                )
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


@attrs.frozen(kw_only=True)
class PodEvidence:
    """What the table of pod causes reads of one pod: the pod, the nodes (None when they were
    not listed), and what is read from them once (every container termination, the pod's last
    ``DisruptionTarget=True`` condition, its status reason and phase)."""

    pod: Obj
    nodes: Mapping[str, Obj] | None
    terminations: Sequence[Mapping[str, Any]]
    disruption: Obj | None
    reason: str
    phase: Any

    @classmethod
    def of(cls, pod: Obj, nodes: Mapping[str, Obj] | None = None) -> PodEvidence:
        disruption = None
        for cond in _get(pod, "status", "conditions") or ():
            if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
                disruption = cond
        return cls(
            pod=pod,
            nodes=nodes,
            terminations=_terminations(pod),
            disruption=disruption,
            reason=_get(pod, "status", "reason") or "",
            phase=_get(pod, "status", "phase"),
        )

    @property
    def disrupted_by(self) -> str | None:
        """The ``DisruptionTarget`` condition's reason, None without the condition."""
        return None if self.disruption is None else str(self.disruption.get("reason", ""))

    @property
    def disruption_text(self) -> str:
        d = self.disruption or {}
        return f"DisruptionTarget {self.disrupted_by}: {d.get('message', '')}".rstrip(": ")

    @property
    def oom(self) -> Mapping[str, Any] | None:
        """The first termination the kernel's OOM killer caused."""
        return next((t for t in self.terminations if t.get("reason") == "OOMKilled"), None)

    @property
    def node_gone(self) -> str | None:
        """Why the pod's node is lost, when that is the pod's ending (not a pod that succeeded
        before its node went, unless it is being deleted)."""
        gone = _node_gone(self.pod, self.nodes)
        if gone is not None and (
            self.phase not in ("Succeeded",) or _get(self.pod, "metadata", "deletionTimestamp")
        ):
            return gone
        return None

    @property
    def failed_exits(self) -> list[Mapping[str, Any]]:
        return [t for t in self.terminations if int(t.get("exitCode", 0)) != 0]


def _oom_killed(e: PodEvidence) -> Cause:
    term = e.oom
    assert term is not None
    code = int(term.get("exitCode", 137))
    detail = f"container {term['container']} OOMKilled"
    folded = torchrun_failure(term)
    if folded is not None and folded.code != 0:
        # cgroup v1 kills the worker alone; torchrun then exits 1 and the runtime still reports
        # the container OOMKilled (seen on the real node).
        detail += (
            f": torchrun exited {code} for worker rank {folded.rank}, which exited {folded.code}"
        )
        code = folded.code
    return Cause(
        CauseKind.OUT_OF_MEMORY,
        Provenance.APPLICATION,
        detail=detail + _restarted(term),
        exit_code=code,
        signal=_signal_of(code) or 9,
    )


def _exited(code: int, detail: str) -> Cause:
    """The application's non-zero exit ``code`` (a signal when it is 128 + the signal)."""
    return Cause(
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
        detail=detail,
        exit_code=code,
        signal=_signal_of(code),
    )


def _disrupted(*reasons: str) -> Callable[[PodEvidence], bool]:
    return lambda e: e.disrupted_by in reasons


#: ``DisruptionTarget`` reasons that say the pod's node went.
NODE_DISRUPTIONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})


def _exited_before_node_went(e: PodEvidence) -> bool:
    """A pod that failed on a container's own non-zero exit before its node went: the exit is
    the pod's ending, and whatever happened to the node afterwards is not. An autoscaler
    removing an emptied node does exactly this, and until PodGC removes the pod (about 60 s on
    the control plane) the node would otherwise read as the cause.

    "Before" as far as the evidence tells: a node not Ready since after the last container's
    ``finishedAt``; a node deleted (it leaves no time behind, but the exit code was reported
    by its kubelet while it was there, and a node lost under a running pod leaves the
    container running, the pod failed by PodGC with its own ``DisruptionTarget``); a
    ``DisruptionTarget`` of the node's (taint manager, PodGC) set strictly after the exit."""
    if e.phase != "Failed" or not e.failed_exits:
        return False
    ended = max(str(t.get("finishedAt") or "") for t in e.terminations)
    if e.disruption is not None:
        went = str(e.disruption.get("lastTransitionTime") or "")
        return e.disrupted_by in NODE_DISRUPTIONS and bool(ended) and went > ended
    node_name = _get(e.pod, "spec", "nodeName")
    if not node_name or e.nodes is None:
        return False
    node = e.nodes.get(node_name)
    if node is None:
        return True
    for cond in _get(node, "status", "conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            return bool(ended) and str(cond.get("lastTransitionTime") or "") > ended
    return False


#: torchrun's failure summary, which it prints last when a worker fails ("Root Cause (first
#: observed failure)", then ``time``, ``rank`` and ``exitcode`` lines); with the container's
#: ``terminationMessagePolicy: FallbackToLogsOnError`` it is the termination message.
_TORCHRUN_ROOT = re.compile(
    r"Root Cause \(first observed failure\):.*?"
    r"time\s*:\s*(?P<time>[0-9]{4}-[0-9]{2}-[0-9]{2})_(?P<clock>[0-9:]{8}).*?"
    r"rank\s*:\s*(?P<rank>[0-9]+).*?"
    r"exitcode\s*:\s*(?P<code>-?[0-9]+)",
    re.DOTALL,
)


@attrs.frozen
class TorchrunFailure:
    """A worker's failure as torchrun recorded it: torchrun itself exits 1 for any of them."""

    rank: int
    #: The worker's own code; a signal when it is 128 + the signal (torchrun writes -N).
    code: int
    #: When torchrun saw the worker fail, as an RFC 3339 UTC time (the container's clock is
    #: UTC): torchrun may exit much later, when its peers fail, so ``finishedAt`` misleads.
    at: str


def torchrun_failure(term: Mapping[str, Any]) -> TorchrunFailure | None:
    """What torchrun's failure summary in a termination's message says, or None."""
    m = _TORCHRUN_ROOT.search(str(term.get("message") or ""))
    if m is None:
        return None
    code = int(m["code"])
    return TorchrunFailure(
        rank=int(m["rank"]), code=128 - code if code < 0 else code, at=f"{m['time']}T{m['clock']}Z"
    )


def _failure_time(term: Mapping[str, Any]) -> str:
    """When the termination's failure happened: torchrun's record of its worker, else the
    container's ``finishedAt``."""
    folded = torchrun_failure(term)
    return folded.at if folded else str(term.get("finishedAt") or "~")


def _restarted(term: Mapping[str, Any]) -> str:
    """What a detail adds for a container the kubelet restarted in place (``OnFailure``)."""
    n = int(term.get("restarts") or 0)
    return f"; restarted in place {n} time{'s' if n != 1 else ''}" if n else ""


def _first_exit(e: PodEvidence) -> Cause:
    first = min(e.failed_exits, key=_failure_time)
    code = int(first["exitCode"])
    detail = f"container {first['container']} {first.get('reason', 'Error')}"
    folded = torchrun_failure(first)
    if folded is not None and folded.code != 0:
        detail += (
            f": torchrun exited {code} for worker rank {folded.rank}, which exited "
            f"{folded.code} (torchrun folds every worker's failure into 1; the worker's code "
            "is read from its failure summary, the termination message)"
        )
        code = folded.code
    return _exited(code, detail + _restarted(first))


K, P = CauseKind, Provenance
#: Who deleted a TrainJob that dispatch did not stop: someone outside dispatch (kubectl, the
#: Kubeflow SDK's ``delete_job``, another controller); the API server does not say who.
OUTSIDE = Actor.human("outside dispatch (the TrainJob was deleted through the API)")
#: Who evicts through the eviction API: a drain, an autoscaler or a descheduler.
EVICTION_API = Actor.human("eviction API (drain, autoscaler or descheduler)")

#: The cause one failed (or failing) pod shows by itself, first match wins; None when it shows
#: none. Why this order: an OOM kill is the job's own (no disruption makes a container exceed
#: its limit); a disruption condition explains a 137 or 143 that would otherwise read as the
#: application's; a lost node explains a pod the kubelet never reported on; launch problems
#: come before exit codes, since a container that never started has none. Spec 0010 §5 shows
#: this table, made from these rows by tests/repo/test_classification_tables.py.
POD_CAUSES: Table[PodEvidence, Cause | None] = Table(
    "kubeflow-pod-causes",
    ("pod evidence", "cause", "provenance"),
    (
        Row(
            "oom-killed",
            "a container, `state` or `lastState`, terminated `OOMKilled`",
            lambda e: e.oom is not None,
            _oom_killed,
            cause_cells(K.OUT_OF_MEMORY, P.APPLICATION, "its exit code, 137, and signal 9"),
        ),
        cause_row(
            "preempted-by-scheduler",
            "`DisruptionTarget=True` `PreemptionByScheduler`",
            _disrupted("PreemptionByScheduler"),
            K.PREEMPTED,
            P.SCHEDULER,
            lambda e: e.disruption_text,
        ),
        Row(
            "evicted-by-api",
            "`DisruptionTarget=True` `EvictionByEvictionAPI`",
            _disrupted("EvictionByEvictionAPI"),
            lambda e: Cause(
                CauseKind.PREEMPTED, Provenance.ACTOR, detail=e.disruption_text, actor=EVICTION_API
            ),
            cause_cells(K.PREEMPTED, P.ACTOR, "drain, autoscaler or descheduler"),
        ),
        Row(
            "exited-before-node-went",
            "pod `Failed` on a container's non-zero exit, then its node deleted, not Ready since "
            "after the last `finishedAt`, or `DisruptionTarget=True` `DeletionByTaintManager` "
            "or `DeletionByPodGC` set after it: the exit came first",
            _exited_before_node_went,
            _first_exit,
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, "the earliest failed exit"),
        ),
        cause_row(
            "deleted-with-node",
            "`DisruptionTarget=True` `DeletionByTaintManager` or `DeletionByPodGC`",
            _disrupted("DeletionByTaintManager", "DeletionByPodGC"),
            K.NODE_LOST,
            P.SCHEDULER,
            lambda e: e.disruption_text,
        ),
        cause_row(
            "kubelet-node-shutdown",
            "`DisruptionTarget=True` `TerminationByKubelet`, pod reason `Terminated`, "
            "`NodeShutdown` or `NodeLost`",
            lambda e: e.disrupted_by == "TerminationByKubelet" and e.reason in NODE_POD_REASONS,
            K.NODE_LOST,
            P.SCHEDULER,
            lambda e: e.disruption_text,
        ),
        cause_row(
            "kubelet-termination",
            "`DisruptionTarget=True` `TerminationByKubelet`, any other pod reason (`Evicted`: "
            "node pressure)",
            _disrupted("TerminationByKubelet"),
            K.PREEMPTED,
            P.SCHEDULER,
            lambda e: f"{e.disruption_text} ({e.reason})",
        ),
        cause_row(
            "node-reason",
            "pod reason `Terminated`, `NodeShutdown` or `NodeLost`",
            lambda e: e.reason in NODE_POD_REASONS,
            K.NODE_LOST,
            P.SCHEDULER,
            lambda e: f"pod reason {e.reason}",
        ),
        cause_row(
            "evicted",
            "pod reason `Evicted` without the condition",
            lambda e: e.reason == "Evicted",
            K.PREEMPTED,
            P.SCHEDULER,
            lambda e: f"evicted: {_get(e.pod, 'status', 'message') or ''}",
        ),
        cause_row(
            "pod-deadline",
            "pod reason `DeadlineExceeded`",
            lambda e: e.reason == "DeadlineExceeded",
            K.TIME_LIMIT,
            P.SCHEDULER,
            "pod deadline exceeded",
        ),
        cause_row(
            "node-gone",
            "the pod's node deleted or not Ready (nodes listed), unless the pod succeeded "
            "and is not being deleted",
            lambda e: e.node_gone is not None,
            K.NODE_LOST,
            P.SCHEDULER,
            lambda e: e.node_gone or "",
        ),
        cause_row(
            "cannot-launch",
            "a container waiting "
            + ", ".join(f"`{r}`" for r in sorted(LAUNCH_WAITING))
            + "; terminated "
            + ", ".join(f"`{r}`" for r in sorted(LAUNCH_TERMINATED))
            + "; pod reason `OutOf*`, "
            + ", ".join(f"`{r}`" for r in sorted(LAUNCH_POD_REASONS)),
            lambda e: _launch_problem(e.pod) is not None,
            K.LAUNCH_FAILED,
            P.SCHEDULER,
            lambda e: _launch_problem(e.pod) or "",
        ),
        Row(
            "non-zero-exit",
            "a container terminated with a non-zero exit, the earliest `finishedAt`",
            lambda e: bool(e.failed_exits),
            _first_exit,
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, "its code; signal = code − 128 above 128"),
        ),
        Row("none", "none of these", always, lambda _: None, ("none shown", "—")),
    ),
)


def pod_cause(pod: Obj, nodes: Mapping[str, Obj] | None = None) -> Cause | None:
    """The cause a failed (or failing) pod shows by itself (the first row of
    :data:`POD_CAUSES` it matches), or None when it shows none."""
    return POD_CAUSES(PodEvidence.of(pod, nodes))


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


@attrs.frozen(kw_only=True)
class RunEvidence:
    """What the table of run causes reads of one failed run: the chain, the run's pods still
    there, whether it started, its JobSet attempt, and what is read from them once (the
    TrainJob's or else the JobSet's ``Failed`` condition, each pod's own cause, and every cause
    found: the pods' and the one an earlier look pinned)."""

    chain: Chain
    pods: Sequence[Obj]
    ran: bool
    attempt: int
    failed: Obj
    causes: Sequence[tuple[Obj, Cause | None]]
    found: Sequence[Cause]

    @classmethod
    def of(cls, chain: Chain, pods: Sequence[Obj], ran: bool, attempt: int = 0) -> RunEvidence:
        failed = _condition(chain.trainjob, "Failed") or _condition(chain.jobset, "Failed") or {}
        causes = [(pod, pod_cause(pod, chain.nodes)) for pod in pods]
        found = [c for _, c in causes if c is not None]
        found.extend(pinned(chain.trainjob, attempt))
        if not ran:
            found.extend(pinned_launch(chain.trainjob, attempt))
        return cls(
            chain=chain,
            pods=pods,
            ran=ran,
            attempt=attempt,
            failed=failed,
            causes=causes,
            found=found,
        )

    @property
    def reason(self) -> str:
        return str(self.failed.get("reason", ""))

    def first(self, kind: CauseKind) -> Cause | None:
        """The first cause found of ``kind``."""
        return next((c for c in self.found if c.kind is kind), None)

    @property
    def unschedulable(self) -> str | None:
        """Why the first unschedulable pod could not be placed."""
        return next((m for m in (_unschedulable(p) for p in self.pods) if m), None)

    @property
    def exits(self) -> list[tuple[Obj, Cause]]:
        """Non-zero exits of the pods there, or else the pinned one."""
        exits = [
            (p, c) for p, c in self.causes if c is not None and c.kind is CauseKind.NON_ZERO_EXIT
        ]
        return exits or [({}, c) for c in self.found if c.kind is CauseKind.NON_ZERO_EXIT]

    @property
    def job_message(self) -> Cause | None:
        for job in self.chain.jobs:
            from_job = _job_message_cause(_condition(job, "Failed"))
            if from_job is not None:
                return from_job
        return None

    @property
    def placed_node_lost(self) -> Cause | None:
        index = execution_index(_kueue_trail(self.chain.trainjob), self.attempt)
        return placed_node_lost(self.chain, index)


def _read_row(
    name: str,
    evidence: str,
    read: Callable[[RunEvidence], Cause | None],
    gives: tuple[str, ...],
) -> Row[RunEvidence, Cause]:
    """A row whose cause is one the evidence already holds: it matches when ``read`` finds one."""

    def cause(e: RunEvidence) -> Cause:
        found = read(e)
        assert found is not None
        return found

    return Row(name, evidence, lambda e: read(e) is not None, cause, gives)


def _found(kind: CauseKind) -> Row[RunEvidence, Cause]:
    return _read_row(
        f"pod-{kind}",
        f"a pod's cause (or the pinned one) {kind}, the first found",
        lambda e: e.first(kind),
        (f"{kind} (that cause)", "that cause's"),
    )


def _deadline_before_start(e: RunEvidence) -> bool:
    return e.reason == "DeadlineExceeded" and not e.ran


def _job_deadline(e: RunEvidence) -> bool:
    return any(
        str((_condition(job, "Failed") or {}).get("reason", "")) == "DeadlineExceeded"
        for job in e.chain.jobs
    )


#: Why a run that failed ended, first match wins: TrainJob and JobSet reasons first where they
#: decide, then the pods (their own causes, by :data:`POD_CAUSES`, and what an earlier look
#: pinned of pods since deleted), then the Jobs, else unknown with every piece of evidence in
#: the detail. Spec 0010 §5 shows this table, made from these rows by
#: tests/repo/test_classification_tables.py.
RUN_CAUSES: Table[RunEvidence, Cause] = Table(
    "kubeflow-run-causes",
    ("evidence", "cause", "provenance"),
    (
        cause_row(
            "creation-failed",
            "TrainJob (else JobSet) `Failed` reason "
            + ", ".join(f"`{r}`" for r in sorted(CREATION_FAILED))
            + "; or JobSet `JobCreationFailed`",
            lambda e: (
                e.reason in CREATION_FAILED
                or _condition(e.chain.jobset, "JobCreationFailed") is not None
            ),
            K.LAUNCH_FAILED,
            P.SCHEDULER,
            lambda e: _describe(e.failed),
        ),
        _found(K.OUT_OF_MEMORY),
        _found(K.PREEMPTED),
        _found(K.NODE_LOST),
        _read_row(
            "deadline-cannot-launch",
            "TrainJob `DeadlineExceeded` before any pod started, a pod that cannot launch",
            lambda e: e.first(K.LAUNCH_FAILED) if _deadline_before_start(e) else None,
            cause_cells(K.LAUNCH_FAILED, P.SCHEDULER),
        ),
        cause_row(
            "deadline-unschedulable",
            "TrainJob `DeadlineExceeded` before any pod started, a pod unschedulable",
            lambda e: _deadline_before_start(e) and e.unschedulable is not None,
            K.NO_CAPACITY,
            P.SCHEDULER,
            lambda e: f"never scheduled before the deadline: {e.unschedulable}",
        ),
        cause_row(
            "deadline",
            "TrainJob (else JobSet) `Failed` reason `DeadlineExceeded`",
            lambda e: e.reason == "DeadlineExceeded",
            K.TIME_LIMIT,
            P.SCHEDULER,
            lambda e: _describe(e.failed),
        ),
        cause_row(
            "job-deadline",
            "a Job `Failed` reason `DeadlineExceeded`",
            _job_deadline,
            K.TIME_LIMIT,
            P.SCHEDULER,
            "Job deadline exceeded",
        ),
        _found(K.TIME_LIMIT),
        _found(K.LAUNCH_FAILED),
        Row(
            "earliest-exit",
            "a pod's non-zero exit (else the pinned one): the pod that failed first",
            lambda e: bool(e.exits),
            lambda e: min(e.exits, key=lambda pc: _first_failure(pc[0]))[1],
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, "its code"),
        ),
        _read_row(
            "job-message",
            'the pods gone, a Job failed `PodFailurePolicy` whose message says "failed with '
            'exit code N matching FailJob rule" (N ≠ 137)',
            lambda e: e.job_message,
            cause_cells(K.NON_ZERO_EXIT, P.APPLICATION, "N"),
        ),
        _read_row(
            "placed-node-lost",
            "the pods gone, a node the run was pinned on (§5, pinned placement) deleted, or "
            "another node by its name (a different uid)",
            lambda e: e.placed_node_lost,
            cause_cells(K.NODE_LOST, P.SCHEDULER),
        ),
        cause_row(
            "unknown",
            "none of these",
            always,
            K.UNKNOWN,
            P.NONE,
            lambda e: _evidence(e.chain, e.pods),
            note="the detail lists every condition, pod phase and warning event read",
        ),
    ),
)


def _failure_cause(chain: Chain, pods: Sequence[Obj], ran: bool, attempt: int = 0) -> Cause:
    """Why a run that failed ended: the first row of :data:`RUN_CAUSES` it matches."""
    return RUN_CAUSES(RunEvidence.of(chain, pods, ran, attempt))


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
    return _exited(int(m["code"]), f"from the Job's failure: {failed.get('message')}")


# ---------------------------------------------------------------------------- pinned evidence

#: Causes worth pinning, the ones a pod shows and loses when it is deleted, in the order
#: :data:`RUN_CAUSES` reads them (when several pods show one, the first kind is pinned).
_PIN_ORDER = (
    CauseKind.OUT_OF_MEMORY,
    CauseKind.PREEMPTED,
    CauseKind.NODE_LOST,
    CauseKind.TIME_LIMIT,
    CauseKind.LAUNCH_FAILED,
    CauseKind.NON_ZERO_EXIT,
)
_PINNED_KINDS = frozenset(_PIN_ORDER)
#: Causes a pod still running can show: a container that failed and was restarted in place.
_RESTARTED_KINDS = frozenset((CauseKind.OUT_OF_MEMORY, CauseKind.NON_ZERO_EXIT))


def _pin_key(attempt: int) -> str:
    return f"{names.EVIDENCE}-{attempt}"


def _launch_key(attempt: int) -> str:
    return f"{names.EVIDENCE}-{attempt}-launch"


#: Waiting reasons of a container whose launch the kubelet tried and failed (a pull that
#: failed, and the back-off after it) or can never try: evidence worth keeping, since the
#: TrainJob's deadline deletes the pods at once. A failed pull is kept from its first failure:
#: on a loaded node the back-off may not be shown before the deadline, and the pin is read
#: only for a run that never started.
_LAUNCH_PINNED_WAITING = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)


def pinned(trainjob: Obj, attempt: int) -> list[Cause]:
    """The cause an earlier look pinned on the TrainJob for ``attempt`` (see :func:`pins`)."""
    return _read_pin(trainjob, _pin_key(attempt))


def pinned_launch(trainjob: Obj, attempt: int) -> list[Cause]:
    """The launch failure an earlier look pinned for ``attempt`` while its image pull was being
    retried (see :func:`pins`): evidence only for a run that never started."""
    return _read_pin(trainjob, _launch_key(attempt))


def _read_pin(trainjob: Obj, key: str) -> list[Cause]:
    raw = (_get(trainjob, "metadata", "annotations") or {}).get(key)
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


def _pin_value(pod: Obj, cause: Cause, at: str | None = None) -> str:
    value = {
        "kind": str(cause.kind),
        "provenance": str(cause.provenance),
        "detail": cause.detail,
        "exit_code": cause.exit_code,
        "signal": cause.signal,
        "actor": cause.actor.id if cause.actor else None,
        "pod": _pod_name(pod),
    }
    if at is not None:
        value["at"] = at
    return json.dumps(value, sort_keys=True)


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
    annotations = _get(tj, "metadata", "annotations") or {}
    if not annotations.get(_launch_key(attempt)):
        # On a real node a pull that cannot succeed is retried until the TrainJob's deadline,
        # which deletes the pods with their evidence as it fails the TrainJob; read only for a
        # run that never started, so a pull that recovers misleads nobody.
        for pod in chain.pods:
            if _attempt(pod) != attempt:
                continue
            for cs in _statuses(pod):
                if (_get(cs, "state", "waiting") or {}).get("reason") in _LAUNCH_PINNED_WAITING:
                    cause = pod_cause(pod, chain.nodes)
                    if cause is not None and cause.kind is CauseKind.LAUNCH_FAILED:
                        return {_launch_key(attempt): _pin_value(pod, cause)}
    candidates: list[tuple[Obj, Cause]] = []
    restarted: list[tuple[Obj, Cause]] = []
    for pod in chain.pods:
        if _attempt(pod) != attempt:
            continue
        cause = pod_cause(pod, chain.nodes)
        if cause is None or cause.kind not in _PINNED_KINDS:
            continue
        if not dying(pod):
            if cause.kind in _RESTARTED_KINDS:
                restarted.append((pod, cause))
            continue
        if cause.kind is CauseKind.LAUNCH_FAILED and _get(pod, "status", "phase") != "Failed":
            continue  # a pull still being retried is not an ending yet
        candidates.append((pod, cause))
    if not candidates:
        return {}
    # The pod the run causes would name: the first kind in their order, then the earliest
    # failure. On a real node every rank's pod is deleted at once when the Job fails, and the
    # first seen is often a peer that failed because of it; the pod whose worker failed first
    # may still be running, its container restarted in place (``OnFailure``), and is seen
    # dying only later. So such pods are weighed too, and a pin is replaced by one that ranks
    # strictly earlier: a later look corrects an early one, and an equal one never churns.
    pod, cause = min((*candidates, *restarted), key=lambda pc: _pin_rank(pc[0], pc[1]))
    rank = _pin_rank(pod, cause)
    held = _held_rank(annotations.get(_pin_key(attempt)))
    if held is not None and held <= rank:
        return {}
    return {_pin_key(attempt): _pin_value(pod, cause, rank[1])}


def _pin_rank(pod: Obj, cause: Cause) -> tuple[int, str]:
    """Where a pod's cause stands among candidates for the pin: its kind's place in
    :data:`_PIN_ORDER`, then when it failed ("~", after every time, when it shows none)."""
    return (_PIN_ORDER.index(cause.kind), _first_failure(pod))


def _held_rank(raw: str | None) -> tuple[int, str] | None:
    """The rank of the pin already written, None when there is none. A pin unreadable, or
    written before pins kept their failure time, ranks first: it is never replaced."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return (_PIN_ORDER.index(CauseKind(data["kind"])), str(data["at"]))
    except (ValueError, KeyError, TypeError):
        return (-1, "")


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


def needed_nodes(trainjobs: Iterable[Obj], pods: Iterable[Obj]) -> set[str]:
    """The names of the nodes an observation must read when :func:`wants_nodes` says so: every
    node a pod is bound to, and every node pinned in the placement of a TrainJob that has not
    succeeded. Nothing else of the cluster's nodes is ever read."""
    wanted = {str(n) for n in (_get(p, "spec", "nodeName") for p in pods) if n}
    for tj in trainjobs:
        if _condition(tj, "Complete"):
            continue
        for key, value in (_get(tj, "metadata", "annotations") or {}).items():
            if not key.startswith(names.PLACEMENT):
                continue
            try:
                pinned = json.loads(value)
            except ValueError:
                continue
            if isinstance(pinned, dict):
                wanted.update(str(n) for n in pinned)
    return wanted


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
    times = [_failure_time(t) for t in _terminations(pod) if t.get("exitCode")]
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
        actor=OUTSIDE,
    )


def _span(pods: Sequence[Obj]) -> tuple[datetime | None, datetime | None, tuple[str, ...]]:
    starts = [t for t in (_time(_get(p, "status", "startTime")) for p in pods) if t]
    ends = [t for p in pods for t in (_time(x.get("finishedAt")) for x in _terminations(p)) if t]
    nodes = tuple(sorted({n for n in (_get(p, "spec", "nodeName") for p in pods) if n}))
    return (min(starts) if starts else None), (max(ends) if ends else None), nodes


def _jobs_started(jobs: Sequence[Obj], attempt: int) -> datetime | None:
    """When the Jobs of restart attempt ``attempt`` started (the earliest ``startTime``):
    the start of a run whose pods were deleted with their own times. An upper bound on the
    wait before it ran: a Job starts when its pods are made, before they are scheduled."""
    starts = [
        t
        for j in jobs
        if (_get(j, "metadata", "labels") or {}).get(names.RESTART_ATTEMPT, "0") == str(attempt)
        and (t := _time(_get(j, "status", "startTime")))
    ]
    return min(starts) if starts else None


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


def _workload_condition(workload: Obj, kind: str) -> Obj | None:
    """A Workload's condition of type ``kind``, whatever its status."""
    for c in _get(workload, "status", "conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


def _said(c: Obj | None) -> str:
    return f"{c.get('reason', '')}: {c.get('message', '')}" if c else ""


def _deactivated_view(evicted: Obj | None) -> KueueView:
    """A Workload with ``spec.active=false``: held, with the cause its eviction names."""
    why = _said(evicted) if evicted else "spec.active=false"
    message = str(evicted.get("message", "")) if evicted else ""
    named: tuple[CauseKind, str] | None = None
    if evicted and "RequeuingLimitExceeded" in message:
        named = (CauseKind.NO_CAPACITY, "deactivated by Kueue, requeuing limit exceeded")
    elif evicted and "MaximumExecutionTimeExceeded" in message:
        named = (CauseKind.TIME_LIMIT, "deactivated by Kueue, maximum execution time")
    elif evicted and evicted.get("reason") == "AdmissionCheck":
        named = (CauseKind.NO_CAPACITY, "deactivated: an admission check rejected it")
    if named is not None:
        return KueueView(ObjectState.HELD, named[0], Provenance.SCHEDULER, f"{named[1]} ({why})")
    return KueueView(ObjectState.HELD, None, Provenance.ACTOR, f"deactivated in Kueue ({why})")


def _readmission_view(workload: Obj, check: str, open_id: str | None) -> KueueView | None:
    """Pending while dispatch's check holds the readmission, None when it does not."""
    for c in _get(workload, "status", "admissionChecks") or ():
        if (
            c.get("name") == check
            and c.get("state") == "Pending"
            and "waits" in str(c.get("message", ""))
        ):
            if open_id is not None and f"open {open_id} " not in str(c.get("message", "")):
                return KueueView(
                    ObjectState.PENDING, None, None, "opened again: waiting for its check"
                )
            # Requeued with quota reserved again, Kueue has turned Evicted (and Preempted) False:
            # their reasons still name the last eviction.
            was = _workload_condition(workload, "Evicted")
            how = _workload_condition(workload, "Preempted")
            last = f"; last eviction {_said(was)}" if was else ""
            if how and was and was.get("reason") == "Preempted":
                last += f" ({how.get('reason')})"
            # Pending, not gated: dispatch's gate was lifted, and a core that read it gated would
            # open it again (a lost open, as it thinks) behind its recovery rule. Nothing
            # readmits it but an explicit open (spec 0012 §7, and §9 for what is still open).
            return KueueView(
                ObjectState.PENDING,
                None,
                None,
                f"readmission gated by dispatch: {c.get('message')}{last}",
            )
    return None


#: What a Workload evicted for each of these reasons shows while Kueue keeps it: its state, the
#: cause, the provenance, and the words before Kueue's own reason and message.
_EVICTION_VIEWS: dict[str, tuple[ObjectState, CauseKind | None, Provenance, str]] = {
    "PodsReadyTimeout": (
        ObjectState.PENDING,
        CauseKind.NO_CAPACITY,
        Provenance.SCHEDULER,
        "evicted by Kueue: pods not ready in time",
    ),
    "AdmissionCheck": (
        ObjectState.PENDING,
        CauseKind.NO_CAPACITY,
        Provenance.SCHEDULER,
        "evicted by Kueue: an admission check asked a retry",
    ),
    "NodeFailures": (
        ObjectState.PENDING,
        CauseKind.NODE_LOST,
        Provenance.SCHEDULER,
        "evicted by Kueue",
    ),
    "ClusterQueueStopped": (ObjectState.HELD, None, Provenance.ACTOR, "its queue was stopped"),
    "LocalQueueStopped": (ObjectState.HELD, None, Provenance.ACTOR, "its queue was stopped"),
}


def _evicted_view(workload: Obj, evicted: Obj) -> KueueView:
    """A Workload Kueue evicted (``Evicted=True``), by the eviction's reason."""
    S, K, P = ObjectState, CauseKind, Provenance
    reason = evicted.get("reason")
    if reason == "Preempted":
        how = _workload_condition(workload, "Preempted")
        return KueueView(
            S.PENDING,
            K.PREEMPTED,
            P.SCHEDULER,
            f"preempted by Kueue ({how.get('reason') if how else 'unknown'}): "
            f"{evicted.get('message', '')}",
        )
    if reason in _EVICTION_VIEWS:
        state, kind, provenance, words = _EVICTION_VIEWS[reason]
        return KueueView(state, kind, provenance, f"{words} ({_said(evicted)})")
    return KueueView(S.PENDING, None, P.SCHEDULER, f"evicted by Kueue ({_said(evicted)})")


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
    evicted = _workload_condition(workload, "Evicted")
    evicted = evicted if evicted and evicted.get("status") == "True" else None
    reserved = _workload_condition(workload, "QuotaReserved")
    admitted = _workload_condition(workload, "Admitted")
    S, K, P = ObjectState, CauseKind, Provenance
    if _get(workload, "spec", "active") is False:
        return _deactivated_view(evicted)
    readmission = _readmission_view(workload, check, open_id)
    if readmission is not None:
        return readmission
    if admitted and admitted.get("status") == "True":
        return KueueView(S.PENDING, None, None, "admitted by Kueue, starting")
    if (
        reserved
        and reserved.get("status") == "False"
        and reserved.get("reason") == "AdmissionGated"
    ):
        if not gated_by:
            return KueueView(S.PENDING, None, None, "admission gate lifted; Kueue has not seen it")
        return KueueView(S.GATED, None, None, f"admission gated ({_said(reserved)})")
    if (
        reserved
        and reserved.get("status") == "False"
        and _NEVER_FITS.search(str(reserved.get("message", "")))
    ):
        return KueueView(
            S.PENDING,
            K.NO_CAPACITY,
            P.SCHEDULER,
            f"never fits its ClusterQueue ({_said(reserved)})",
        )
    if evicted is not None:
        return _evicted_view(workload, evicted)
    if reserved and reserved.get("status") == "False":
        return KueueView(
            S.PENDING, K.NO_CAPACITY, P.SCHEDULER, f"waiting for quota ({_said(reserved)})"
        )
    return KueueView(
        S.PENDING, None, None, f"queued in Kueue ({_said(reserved) or 'no conditions yet'})"
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


@attrs.frozen(kw_only=True)
class Reading:
    """What :func:`observe` reads of one TrainJob's chain before it decides anything: the
    evidence the table of states (:data:`STATES`) and the executions are made from."""

    chain: Chain
    annotations: Mapping[str, str]
    by_attempt: Mapping[int, Sequence[Obj]]
    #: The JobSet attempt running now, and its pods.
    current: int
    pods_now: Sequence[Obj]
    #: Whether the current attempt ran (a pod started, or the counts or a stop say so).
    ran_now: bool
    succeeded: Obj | None
    failed: Obj | None
    deleting: bool
    #: Pods whose processes may still run (not yet Succeeded or Failed).
    live: int
    kueue_mode: bool
    #: The runs Kueue's evictions ended (Kueue mode), see :func:`kueue_runs`.
    trail: Sequence[Mapping[str, Any]]
    restart_cond: Obj | None

    @property
    def hold(self) -> int | None:
        return _hold(self.annotations)

    @property
    def suspended(self) -> bool:
        return bool(_get(self.chain.trainjob, "spec", "suspend"))

    @property
    def gate_closed(self) -> bool:
        return self.annotations.get(names.GATE) == "closed"

    @property
    def queue(self) -> str:
        return str(_get(self.chain.trainjob, "metadata", "labels")[names.QUEUE_NAME])


def read(chain: Chain) -> Reading:
    """Gather the evidence of ``chain`` for :func:`observe`. Pure."""
    tj = chain.trainjob
    annotations: Mapping[str, str] = _get(tj, "metadata", "annotations") or {}
    restarts = int(_get(chain.jobset, "status", "restarts") or 0)
    by_attempt: dict[int, list[Obj]] = {}
    for pod in chain.pods:
        by_attempt.setdefault(_attempt(pod), []).append(pod)
    current = max([restarts, *by_attempt])
    pods_now = by_attempt.get(current, [])
    succeeded = _condition(tj, "Complete") or _condition(chain.jobset, "Completed")
    failed = _condition(tj, "Failed") or _condition(chain.jobset, "Failed")
    deleting = bool(_get(tj, "metadata", "deletionTimestamp"))
    jobs_status = _get(tj, "status", "jobsStatus") or ()
    counted = sum(int(j.get("succeeded") or 0) + int(j.get("failed") or 0) for j in jobs_status)
    ready = sum(int(j.get("ready") or 0) for j in jobs_status)
    ran_now = (
        any(_started(p) for p in pods_now)
        # With the pods gone, the TrainJob's copy of the JobSet's counts is the evidence left
        # that the run started (it was ready, or finished pods).
        or (((succeeded or failed) is not None or deleting) and counted + ready > 0)
        # Stop wrote down that a run was going, whose pods may be gone before anyone looks.
        or (deleting and annotations.get(names.STOPPED_RUN) == str(current))
    )
    # Kueue mode: runs its evictions ended (their pods deleted by the suspend), then the
    # JobSet's attempts shifted past them (spec 0012 §6).
    kueue_mode = names.QUEUE_NAME in (_get(tj, "metadata", "labels") or {})
    return Reading(
        chain=chain,
        annotations=annotations,
        by_attempt=by_attempt,
        current=current,
        pods_now=pods_now,
        ran_now=ran_now,
        succeeded=succeeded,
        failed=failed,
        deleting=deleting,
        live=sum(
            1 for p in chain.pods if _get(p, "status", "phase") not in ("Succeeded", "Failed")
        ),
        kueue_mode=kueue_mode,
        trail=kueue_runs(chain, current) if kueue_mode else [],
        restart_cond=_condition(chain.jobset, "RestartingJobSet"),
    )


def _evicted_runs(r: Reading) -> list[ExecutionObs]:
    """The runs Kueue's evictions ended, from the trail."""
    executions = []
    for entry in r.trail:
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
    return executions


def _earlier_cause(r: Reading, i: int, pods: Sequence[Obj]) -> Cause:
    """The cause of attempt ``i`` before the current one: what its pods (or a pin) show, else
    the rule that restarted it, else a pinned node lost, else unknown, saying its evidence was
    deleted with its pods."""
    chain = r.chain
    earlier = _failure_cause(chain, pods, True, i) if pods or pinned(chain.trainjob, i) else None
    if (earlier is None or earlier.kind is CauseKind.UNKNOWN) and i == r.current - 1:
        earlier = _restart_rule_cause(chain.jobset)
    if earlier is None or earlier.kind is CauseKind.UNKNOWN:
        earlier = placed_node_lost(chain, execution_index(r.trail, i)) or earlier
    if earlier is None or earlier.kind is CauseKind.UNKNOWN:
        detail = (
            f"the JobSet restarted after this run; its pods were deleted with their "
            f"evidence. {_describe(r.restart_cond)}".strip()
        )
        if earlier is not None:
            detail = f"{earlier.detail}; {detail}"
        earlier = Cause(CauseKind.UNKNOWN, Provenance.NONE, detail=detail)
    return earlier


def _ended_runs(r: Reading) -> list[ExecutionObs]:
    """Every execution before the current one: Kueue's evicted runs, then earlier attempts."""
    executions = _evicted_runs(r)
    for i in range(r.current):
        pods = r.by_attempt.get(i, [])
        start, end, nodes = _span(pods)
        executions.append(
            ExecutionObs(
                index=execution_index(r.trail, i),
                state=ObjectState.ENDED,
                cause=_earlier_cause(r, i, pods),
                started_at=start,
                ended_at=end,
                nodes=nodes,
            )
        )
    return executions


@attrs.frozen(kw_only=True)
class Decided:
    """What the table of states yields: the object's state, the current run's cause, details,
    whether the current run is an execution, and when it ended if its pods do not say."""

    state: ObjectState
    cause: Cause | None = None
    details: tuple[str, ...] = ()
    ran: bool
    ended_at: datetime | None = None


def _not_ended(r: Reading, state: ObjectState, *details: str) -> Decided:
    """A TrainJob that has not ended or been deleted: the pods of the current attempt add what
    keeps them from running, and only a running object has a current execution."""
    notes = list(details)
    if state in (ObjectState.HELD, ObjectState.GATED) and r.ran_now and r.pods_now:
        # Suspension deletes the pods; until they are gone the run is ending.
        notes.append(f"suspended; {len(r.pods_now)} pods still terminating")
    for pod in r.pods_now:
        why = _unschedulable(pod)
        if why:
            notes.append(f"pod {_pod_name(pod)} unschedulable (no-capacity): {why}")
        launch = _launch_problem(pod)
        if launch:
            notes.append(f"pod {_pod_name(pod)} cannot launch (launch-failed): {launch}")
    ran = r.ran_now if state is ObjectState.RUNNING else False
    return Decided(state=state, details=tuple(notes), ran=ran)


def _complete(r: Reading) -> Decided:
    done = r.succeeded or {}
    return Decided(
        state=ObjectState.ENDED,
        cause=Cause(CauseKind.NONE, Provenance.NONE, detail=_describe(done), exit_code=0),
        ran=True,
        ended_at=_time(done.get("lastTransitionTime")),
    )


def _failed(r: Reading) -> Decided:
    # A failed TrainJob always ended a run, even one that never started (a launch failure, no
    # capacity before the deadline): its cause must not be lost.
    return Decided(
        state=ObjectState.ENDED,
        cause=_failure_cause(r.chain, r.pods_now, r.ran_now, r.current),
        ran=True,
        ended_at=_time((r.failed or {}).get("lastTransitionTime")),
    )


def _deleted(r: Reading) -> Decided:
    cause = _stop_cause(r.chain) if r.ran_now else None
    return Decided(state=ObjectState.ENDED, cause=cause, ran=r.ran_now)


def _held(r: Reading) -> Decided:
    if r.gate_closed:
        return _not_ended(r, ObjectState.HELD, "held before its gate was lifted")
    return _not_ended(r, ObjectState.HELD)


def _never_readmitted_in_kueue(r: Reading) -> bool:
    workload = r.chain.workload
    return bool(r.trail) and workload is not None and _never_readmitted(workload)


def _kueue_ended(r: Reading) -> Decided:
    # Evicted after its admission, and dispatch's check rejected the readmission (spec 0012
    # §9): the object's run is over; the supervisor's rule decides.
    last = r.trail[-1]
    return _not_ended(
        r,
        ObjectState.ENDED,
        f"Kueue LocalQueue {r.queue}: evicted, never readmitted "
        f"(execution {last['index']}: {last.get('kind')})",
    )


def _kueue_waiting(r: Reading) -> Decided:
    assert r.chain.workload is not None
    view = kueue_view(
        r.chain.workload,
        gated_by=r.annotations.get(names.ADMISSION_GATED_BY),
        open_id=_open_id(r.annotations.get(names.OPEN)),
    )
    kind = f" ({view.cause.value})" if view.cause else ""
    return _not_ended(r, view.state, f"Kueue LocalQueue {r.queue}{kind}: {view.detail}")


def _in_kueue(r: Reading) -> bool:
    """Kueue mode (spec 0012): Kueue suspends until it admits, and again when it evicts;
    opened by dispatch, the TrainJob waits in its LocalQueue, and its Workload says why."""
    return r.suspended and r.kueue_mode


S = ObjectState

#: The state of a TrainJob, first match wins. Spec 0010 §5 shows this table, made from these
#: rows by tests/repo/test_classification_tables.py.
STATES: Table[Reading, Decided] = Table(
    "kubeflow-states",
    ("evidence", "state"),
    (
        Row(
            "complete",
            "TrainJob `Complete` (or JobSet `Completed`)",
            lambda r: r.succeeded is not None,
            _complete,
            ("ended, success (exit 0)",),
        ),
        Row(
            "failed",
            "TrainJob `Failed` (or JobSet `Failed`)",
            lambda r: r.failed is not None,
            _failed,
            ("ended, the cause from the run causes below",),
        ),
        Row(
            "stopping",
            "`deletionTimestamp`, the run started and a pod may still run",
            lambda r: r.deleting and r.ran_now and r.live > 0,
            lambda r: Decided(state=S.RUNNING, ran=r.ran_now),
            ("running: the run ends when its last pod is gone",),
        ),
        Row(
            "deleted",
            "`deletionTimestamp`",
            lambda r: r.deleting,
            _deleted,
            ("ended; cancelled (§4) if the run started",),
        ),
        Row(
            "held",
            "our hold annotation",
            lambda r: r.hold is not None,
            _held,
            ("held, with its instance",),
        ),
        Row(
            "gated",
            "`suspend` and `gate: closed`",
            lambda r: r.suspended and r.gate_closed,
            lambda r: _not_ended(r, S.GATED),
            ("gated",),
        ),
        Row(
            "kueue-no-workload",
            "`suspend`, Kueue mode, no Workload yet",
            lambda r: _in_kueue(r) and r.chain.workload is None,
            lambda r: _not_ended(
                r, S.PENDING, f"queued in Kueue LocalQueue {r.queue}: no Workload yet"
            ),
            ("pending",),
        ),
        Row(
            "kueue-never-readmitted",
            "`suspend`, Kueue mode, evicted after a run and dispatch's check rejected its "
            "readmission (spec 0012 §9)",
            lambda r: _in_kueue(r) and _never_readmitted_in_kueue(r),
            _kueue_ended,
            ("ended",),
        ),
        Row(
            "kueue",
            "`suspend`, Kueue mode",
            _in_kueue,
            _kueue_waiting,
            ("what the Workload says (spec 0012 §5)",),
        ),
        Row(
            "suspended",
            "`suspend`, gate open, no hold of ours",
            lambda r: r.suspended,
            lambda r: _not_ended(
                r, S.HELD, "suspended by someone other than dispatch (Kueue or a user)"
            ),
            ('held, no instance ("not dispatch")',),
        ),
        Row(
            "running",
            "a pod of the current attempt started",
            lambda r: r.ran_now,
            lambda r: _not_ended(r, S.RUNNING),
            ("running",),
        ),
        Row(
            "pending",
            "otherwise",
            always,
            lambda r: _not_ended(r, S.PENDING),
            (
                "pending; the detail names unschedulable pods (no-capacity) and pods that "
                "cannot launch (launch-failed)",
            ),
        ),
    ),
)


def observe(chain: Chain) -> Observation:
    """State, executions and causes of one TrainJob, from ``chain`` alone: what it reads
    (:func:`read`), then what it decides (:data:`STATES`, :data:`RUN_CAUSES`).

    Executions are the JobSet's restart attempts: attempt *i* is execution *i* (the pods carry
    ``jobset.sigs.k8s.io/restart-attempt``, the JobSet counts ``status.restarts``). A restart
    deletes the earlier attempt's pods, so an earlier execution whose pods are gone ends with
    cause unknown and the restart condition in its detail: its evidence was destroyed, and no
    cause is guessed.
    """
    r = read(chain)
    executions = _ended_runs(r)
    start, end, nodes = _span(r.pods_now)
    lost = tuple(
        sorted(
            {
                g.split(" ")[1]
                for p in r.pods_now
                if (g := _node_gone(p, chain.nodes))
                and not _exited_before_node_went(PodEvidence.of(p, chain.nodes))
            }
        )
    )
    decided = STATES(r)
    state, cause = decided.state, decided.cause
    end = end or decided.ended_at
    details = list(decided.details)
    if r.deleting:
        details.append(
            f"deleted; clean-up pending: {r.live} pods remain"
            if r.live
            else "deleted; clean-up clear"
        )
    if decided.ran:
        # A run whose pods are gone (a scheduler preemption deletes them at once) still
        # started when its Jobs did: the Job keeps ``status.startTime``.
        start = start or _jobs_started(chain.jobs, r.current)
        executions.append(
            ExecutionObs(
                index=execution_index(r.trail, r.current),
                state=ObjectState.ENDED if state is ObjectState.ENDED else ObjectState.RUNNING,
                cause=cause,
                started_at=start,
                ended_at=end if state is ObjectState.ENDED else None,
                nodes=nodes,
            )
        )
    if r.restart_cond is not None:
        details.append(_describe(r.restart_cond))
    if cause is not None and cause.detail:
        details.insert(0, str(cause))
    return Observation(
        name=str(_get(chain.trainjob, "metadata", "name")),
        state=state,
        executions=tuple(sorted(executions, key=lambda e: e.index)),
        hold_instance=r.hold,
        lost_nodes=lost if state is not ObjectState.ENDED else (),
        detail="; ".join(details),
        pods_left=r.live,
    )
