"""A supervised job under real Kueue v0.19.2 (tools/kube/up, spec 0012 §7): a high-priority
TrainJob preempts a supervised low-priority one in LocalQueue ``jobdispatch-gated`` (whose
ClusterQueue has the 8 GPUs and dispatch's admission check), and the low job's resubmit rule
recovers it once the quota returns. The evicted TrainJob is never readmitted behind the
supervisor's back: its Workload is watched throughout and is never admitted again (dispatch's
check rejects its readmission), and the next submission runs only after dispatch opened it.

Control plane only (``-m kube``); the admission controller runs as its console module in a
subprocess under the admin kubeconfig (its own RBAC is tested in the plugin's tests). Every wait
is on a condition with a generous deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jobdispatch
import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch.types import Resources
from jobdispatch_kubeflow.testing import create_preemptor, kubectl, remove_jobs
from jobdispatch_supervise import Supervisor

pytestmark = pytest.mark.kube

QUEUE = "jobdispatch-gated"
CHECK = "jobdispatch-admission"
WAIT = 240.0


@pytest.fixture
def kueue(tmp_path: Path) -> Iterator[Any]:
    """The backend in Kueue mode on the gated queue, its driver, and the admission controller."""
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import (
        KubeDriver,
        cluster_problem,
        gated,
        require,
        settings,
    )

    require(cluster_problem())
    namespace = os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")
    lease = f"jd-e2e-adm-{uuid.uuid4().hex[:8]}"
    log = (tmp_path / "admission.log").open("ab")
    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobdispatch_kubeflow.admission",
            "run",
            "--kubeconfig",
            os.environ["KUBECONFIG"],
            "--lease-namespace",
            namespace,
            "--lease-name",
            lease,
            "--interval",
            "0.5",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    backend = KubeflowBackend(settings(kueue=Kueue(queue=QUEUE, priority_class="jobdispatch-low")))
    driver = KubeDriver(backend)
    made: list[str] = []
    try:
        gated(backend)  # the plan reads the gate: wait for the controller to answer
        yield backend, driver, made, namespace
    finally:
        remove_jobs(backend, made, "end-to-end test over")
        driver.cleanup()
        backend.close()
        controller.terminate()
        controller.wait(timeout=60)
        log.close()
        kubectl("-n", namespace, "delete", "lease", lease, "--ignore-not-found")


def high_priority(namespace: str) -> str:
    """A TrainJob that is not dispatch's, asking the queue's 8 GPUs at high priority."""
    return create_preemptor(
        namespace,
        QUEUE,
        prefix="kqhigh",
        nodes=1,
        command=["sleep", "600"],
        resources={"limits": {"nvidia.com/gpu": "8"}},
    )


class WorkloadWatch:
    """Samples a TrainJob's Workload every half second: what it showed, in order."""

    def __init__(self, backend: Any, namespace: str, trainjob: str) -> None:
        self.backend, self.namespace, self.trainjob = backend, namespace, trainjob
        self.seen: list[tuple[dict[str, tuple[str, str]], dict[str, str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        uid = None
        while not self._stop.is_set():
            try:
                tj = self.backend.api.get("trainjobs", self.namespace, self.trainjob)
                uid = (tj or {}).get("metadata", {}).get("uid", uid)
                items, _ = self.backend.api.list("workloads", self.namespace)
            except Exception:  # a slow API server: sample again
                time.sleep(0.5)
                continue
            for wl in items:
                owners = wl["metadata"].get("ownerReferences") or []
                if uid and any(o.get("uid") == uid for o in owners):
                    status = wl.get("status") or {}
                    conds = {
                        c["type"]: (c["status"], c.get("reason", ""))
                        for c in status.get("conditions") or []
                    }
                    checks = {
                        c["name"]: f"{c.get('state')}: {c.get('message', '')}"
                        for c in status.get("admissionChecks") or []
                    }
                    self.seen.append((conds, checks))
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def test_a_preempted_low_priority_job_is_recovered_by_its_rule_when_quota_returns(
    kueue: Any,
) -> None:
    backend, driver, made, namespace = kueue
    spec = JobSpec(
        name="e2e-kueue",
        command=("sleep", "600"),
        resources=Resources(gpus_per_node=8, cpus_per_proc=1),
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
        ),
    )
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    plan = cluster.operator.submit(spec, by=Actor.human("e2e"), supervised=True)
    job_id = job_of(plan)
    made.append(job_id)
    # The plan says the preemption rule is the supervisor's, naming Kueue's own requeuing.
    assert "Kueue requeues on preempted" in plan.rules[0].support.native.detail
    sup = Supervisor(backend, store, poll=0.5, lease_ttl=timedelta(seconds=5), holder="s0")
    threading.Thread(target=sup.serve, daemon=True).start()
    high = None
    watch = None
    try:

        def running(n: int) -> Any:
            status = cluster.observer.get(job_id)
            if len(status.submissions) >= n and status.state is State.RUNNING:
                sub = status.submissions[n - 1]
                if sub.executions and sub.canonical is not None:
                    return sub.canonical
            return None

        first = eventually(lambda: running(1), "submission 1 running", within=WAIT, every=0.5)
        watch = WorkloadWatch(backend, namespace, first.id.split("/")[1])
        high = high_priority(namespace)

        def preempted_and_resubmitted() -> Any:
            status = cluster.observer.get(job_id)
            if len(status.submissions) < 2:
                return None
            ends = [e.cause for e in status.submissions[0].executions if e.cause]
            return status if ends else None

        status = eventually(
            preempted_and_resubmitted,
            "the preemption recorded and resubmitted",
            within=WAIT,
            every=0.5,
        )
        [cause] = [e.cause for e in status.submissions[0].executions if e.cause]
        assert cause.kind is CauseKind.PREEMPTED, cause
        assert "InClusterQueue" in cause.detail, cause

        # The quota is the high job's until it goes: submission 2, opened by dispatch, waits
        # in Kueue for it.
        def waiting_for_quota() -> bool:
            objs = [o for o in backend.find(job_id).objects if o.ref != first]
            return any("insufficient unused quota" in o.detail for o in objs)

        eventually(waiting_for_quota, "submission 2 waiting for the quota", within=WAIT, every=0.5)
        kubectl("-n", namespace, "delete", "trainjob", high, "--wait=false")
        high = None
        second = eventually(
            lambda: running(2),
            "submission 2 running once the quota returned",
            within=WAIT,
            every=0.5,
        )
        assert second != first
        driver.complete(second)
        done = eventually(
            lambda: cluster.observer.get(job_id),
            "the job settling",
            holds=lambda s: s.settled,
            within=WAIT,
            every=0.5,
        )
        assert done.state is State.SUCCEEDED, done
        one, two = done.submissions
        assert [e.cause.kind for e in one.executions if e.cause] == [CauseKind.PREEMPTED]
        assert [e.cause.kind for e in two.executions if e.cause] == [CauseKind.NONE]
    finally:
        sup.stop()
        if watch is not None:
            watch.stop()
        if high is not None:
            kubectl("-n", namespace, "delete", "trainjob", high, "--ignore-not-found")
    # The evicted Workload: admitted once, evicted (Preempted, InClusterQueue), and never
    # admitted again; dispatch's check rejected its readmission.
    assert watch is not None and watch.seen
    admitted = [conds.get("Admitted", ("", ""))[0] == "True" for conds, _ in watch.seen]
    evicted_at = next(
        i for i, (conds, _) in enumerate(watch.seen) if conds.get("Evicted", ("", ""))[0] == "True"
    )
    # (Evicting, Kueue shows Evicted=True while Admitted is still True for a moment.)
    released = next(i for i in range(evicted_at, len(admitted)) if not admitted[i])
    assert not any(admitted[released:]), watch.seen[released:]
    assert any(
        checks.get(CHECK, "").startswith("Rejected") and "never readmitted" in checks[CHECK]
        for _, checks in watch.seen[evicted_at:]
    ), watch.seen[evicted_at:]
    # The record: submission 1's object was opened once, never again after its preemption
    # (its readmission was the supervisor's to decide, and its rule resubmitted instead).
    from jobdispatch.records.events import Observed, OpenDecided

    record = store.read(job_id).events
    assert any(
        isinstance(e, Observed) and e.obs.ref == first and "never readmitted" in e.obs.detail
        for e in record
    ), "the record shows the readmission refused"
    opens = [e.ref.id for e in record if isinstance(e, OpenDecided)]
    assert opens.count(first.id) == 1, opens
    assert second.id in opens, opens
