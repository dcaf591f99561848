"""Supervised jobs on the real Kubernetes control plane (tools/kube/up), through the Kubeflow
adapter: an evicted pod resumed by its resubmit rule, a lost node, a hold and a release, a
cancel with its receipt, and two supervisors racing without ever opening a duplicate TrainJob.
Each runs twice: over the in-memory API with its controllers' stand-in, and on the control
plane.

kwok plays every kubelet: a pod runs until the test annotates it (``dispatch.test/exit-code``),
or until its node is deleted. Without the control plane every test skips with the reason;
under JOBDISPATCH_REQUIRE_SERVICES=1 they fail instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import jobdispatch
import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Rule, State
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually, job_of
from jobdispatch_kubeflow.fake import TEST_RUNTIME_OBJECT
from jobdispatch_supervise import Supervisor


@pytest.fixture(
    params=[
        "stand-in",
        pytest.param("control plane", marks=pytest.mark.kube),
    ]
)
def kube(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The adapter with its driver: over the in-memory API and its controllers' stand-in
    (jobdispatch_kubeflow.fake, always), and over the real control plane (skipped, or failed
    under REQUIRE_SERVICES, when it is not running)."""
    from jobdispatch_kubeflow import KubeflowBackend, Settings, probe
    from jobdispatch_kubeflow.config import Runtime
    from jobdispatch_kubeflow.testing import remove_jobs

    if request.param == "stand-in":
        from jobdispatch_kubeflow.fake import FakeCluster, FakeDriver

        probe.forget()
        cluster = FakeCluster()
        cluster.put("clustertrainingruntimes", None, FAKE_RUNTIME)
        backend = KubeflowBackend(
            Settings(namespace="dispatch", runtime=Runtime(name="dispatch-torch-test")),
            api=cluster,
        )
        driver = FakeDriver(backend)
    else:
        from jobdispatch_kubeflow.testing import KubeDriver, cluster_problem, require, settings

        require(cluster_problem())
        backend = KubeflowBackend(settings())
        driver = KubeDriver(backend)
    made: list[str] = []
    yield backend, driver, made
    remove_jobs(backend, made, "end-to-end test over")
    if hasattr(driver, "cleanup"):
        driver.cleanup()
    backend.close()


FAKE_RUNTIME = TEST_RUNTIME_OBJECT


def supervised(backend: Any, spec: JobSpec, *, holders: int = 1) -> tuple[Any, str, list[Any]]:
    """A store, the job submitted to it and ``holders`` supervisors serving it."""
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    job_id = job_of(cluster.operator.submit(spec, by=Actor.human("e2e"), supervised=True))
    sups = [serving(backend, store, f"s{i}") for i in range(holders)]
    return cluster, job_id, sups


#: Each serving supervisor's thread, so a test can wait until one has stopped.
THREADS: dict[int, threading.Thread] = {}


def serving(backend: Any, store: Any, holder: str) -> Supervisor:
    """A supervisor serving ``store`` in a thread of its own."""
    sup = Supervisor(backend, store, poll=0.5, lease_ttl=timedelta(seconds=5), holder=holder)
    THREADS[id(sup)] = thread = threading.Thread(target=sup.serve, daemon=True)
    thread.start()
    return sup


def running_submission(cluster: Any, job: str, n: int) -> Any:
    def ok() -> Any:
        status = cluster.observer.get(job)
        if len(status.submissions) >= n and status.submissions[n - 1].executions:
            sub = status.submissions[n - 1]
            if status.state is State.RUNNING and sub.canonical is not None:
                return sub.canonical
        return None

    return eventually(ok, f"submission {n} of {job} running", every=0.5)


def rule(cause: CauseKind) -> RecoveryPolicy:
    return RecoveryPolicy(rules=[Rule(on=[cause], action=Action.RESUBMIT, budget=1)])


def recovered(kube: Any, cause: CauseKind, end: Callable[[Any, Any], None]) -> None:
    backend, driver, made = kube
    spec = JobSpec(name=f"e2e-{cause}", command=("sleep", "600"), recovery=rule(cause))
    cluster, job_id, sups = supervised(backend, spec)
    made.append(job_id)
    try:
        first = running_submission(cluster, job_id, 1)
        end(driver, first)
        second = running_submission(cluster, job_id, 2)
        driver.complete(second)
        done = eventually(
            lambda: cluster.observer.get(job_id),
            "the job settling",
            holds=lambda s: s.settled,
            every=0.5,
        )
        assert done.state is State.SUCCEEDED, done
        one, two = done.submissions
        assert [e.cause.kind for e in one.executions if e.cause] == [cause]
        assert [e.cause.kind for e in two.executions if e.cause] == [CauseKind.NONE]
    finally:
        for sup in sups:
            sup.stop()


def test_an_evicted_pod_is_resumed_by_its_resubmit_rule(kube: Any) -> None:
    recovered(kube, CauseKind.PREEMPTED, lambda driver, ref: driver.evict(ref))


def test_a_lost_node_is_resumed_by_its_resubmit_rule(kube: Any) -> None:
    recovered(kube, CauseKind.NODE_LOST, lambda driver, ref: driver.lose_node(ref))


def test_a_hold_keeps_the_trainjob_suspended_until_released(kube: Any) -> None:
    backend, driver, made = kube
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    plan = cluster.operator.submit(
        JobSpec(name="e2e-hold", command=("sleep", "600")), by=Actor.human("e2e"), supervised=True
    )
    job_id = job_of(plan)
    made.append(job_id)
    cluster.operator.hold(job_id, by=Actor.human("e2e"), reason="wait for data")
    sup = Supervisor(backend, store, poll=0.5)
    threading.Thread(target=sup.serve, daemon=True).start()
    try:
        eventually(
            lambda: cluster.observer.get(job_id).state is State.HELD, "the job held", every=0.5
        )
        time.sleep(5)
        for obs in backend.find(job_id).objects:
            assert obs.state in (jobdispatch.ObjectState.GATED, jobdispatch.ObjectState.HELD), obs
            assert not obs.executions, "a held job must not run"
        cluster.operator.release(job_id, by=Actor.human("e2e"))
        ref = running_submission(cluster, job_id, 1)
        driver.complete(ref)
        done = eventually(
            lambda: cluster.observer.get(job_id), "success", holds=lambda s: s.settled, every=0.5
        )
        assert done.state is State.SUCCEEDED, done
    finally:
        sup.stop()


def test_a_cancel_gives_its_receipt_and_the_trainjob_keeps_it(kube: Any) -> None:
    backend, _, made = kube
    cluster, job_id, sups = supervised(
        backend, JobSpec(name="e2e-cancel", command=("sleep", "600"))
    )
    made.append(job_id)
    try:
        ref = running_submission(cluster, job_id, 1)
        # The supervisor is stopped (and waited for) first, so the operator's own stop reaches
        # the TrainJob alone; a supervisor started afterwards settles the job, its clean-up
        # stopping, under its own reason, anything it still finds live. (With both running,
        # whichever stop came first named the end: the clean-up's, "the job has its outcome",
        # once in a CI run.)
        for sup in sups:
            sup.stop()
            THREADS[id(sup)].join(timeout=120)
            assert not THREADS[id(sup)].is_alive(), "the supervisor did not stop"
        receipt = cluster.operator.cancel(job_id, by=Actor.human("e2e"), reason="not needed")
        assert receipt.committed
        obs = eventually(
            lambda: backend.inspect(ref),
            "the TrainJob ended",
            holds=lambda o: o.state is jobdispatch.ObjectState.ENDED,
            every=0.5,
        )
        cause = obs.executions[-1].cause
        assert cause is not None and cause.kind is CauseKind.CANCELLED
        assert "not needed" in cause.detail
        sups.append(serving(backend, sups[0].store, "after"))
        eventually(lambda: cluster.observer.get(job_id).settled, "the record cancelled", every=0.5)
        assert cluster.observer.get(job_id).state is State.CANCELLED
        # Whatever the clean-up did afterwards, the TrainJob keeps the cancel's reason.
        kept = backend.inspect(ref).executions[-1].cause
        assert kept is not None and "not needed" in kept.detail, kept
    finally:
        for sup in sups:
            sup.stop()


def test_two_supervisors_racing_never_open_a_duplicate_trainjob(kube: Any) -> None:
    backend, driver, made = kube
    spec = JobSpec(
        name="e2e-race", command=("sleep", "600"), recovery=rule(CauseKind.NON_ZERO_EXIT)
    )
    cluster, job_id, sups = supervised(backend, spec, holders=2)
    made.append(job_id)
    try:
        first = running_submission(cluster, job_id, 1)
        driver.fail(first, 3)
        second = running_submission(cluster, job_id, 2)
        driver.complete(second)
        done = eventually(
            lambda: cluster.observer.get(job_id), "success", holds=lambda s: s.settled, every=0.5
        )
        assert done.state is State.SUCCEEDED, done
        objects = backend.find(job_id).objects
        opened: dict[int, list[str]] = {}
        for obs in objects:
            ident = obs.identity
            assert ident is not None
            if obs.executions:
                opened.setdefault(ident[1], []).append(obs.name)
        assert all(len(names) == 1 for names in opened.values()), opened
        assert sorted(opened) == [1, 2]
    finally:
        for sup in sups:
            sup.stop()
