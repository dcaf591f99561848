"""Supervised jobs on the real node (``tools/kube/up --real-node``): real containers, a real
torchrun rendezvous across two pods, real exit codes and OOM kills, through the Kubeflow adapter.

The node's pods run Debian's python3-torch image; the runtime ``dispatch-torch-real`` makes them
tolerate the node's taint, select it, and mount two host folders: ``/scripts`` (where these tests
put tests/real_node_ddp.py) and ``/checkpoints``, which every execution of a job reaches, so a
resubmitted execution resumes from what the evicted one saved.

Without the real node every test skips with the reason; under JOBDISPATCH_REQUIRE_SERVICES=1
(.ci/run, which starts it) they fail instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import jobdispatch
import pytest
from jobdispatch import Action, Actor, CauseKind, JobSpec, RecoveryPolicy, Resources, Rule, State
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.testing import eventually
from jobdispatch_kubeflow.testing import create_preemptor, kubectl, real_node_problem
from jobdispatch_supervise import Supervisor

pytestmark = pytest.mark.kube

SCRIPT = Path(__file__).with_name("real_node_ddp.py")
#: Generous: two pods each import torch (about 10 s on a quiet machine) on 2 loaded cores.
DEADLINE = 600.0


@contextlib.contextmanager
def real_backend(**overrides: Any) -> Iterator[tuple[Any, list[str]]]:
    """The adapter set up for the real node's runtime and image (and ``overrides``), with the
    script in place; the jobs the test adds to the list are stopped and forgotten after it."""
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.config import Runtime
    from jobdispatch_kubeflow.testing import remove_jobs, require, settings

    require(real_node_problem())
    shutil.copyfile(SCRIPT, Path(os.environ["JOBDISPATCH_KUBE_REAL_SCRIPTS"]) / SCRIPT.name)
    backend = KubeflowBackend(
        settings(
            runtime=Runtime(name=os.environ["JOBDISPATCH_KUBE_REAL_RUNTIME"]),
            image=os.environ["JOBDISPATCH_KUBE_REAL_IMAGE"],
            **overrides,
        )
    )
    made: list[str] = []
    try:
        yield backend, made
    finally:
        remove_jobs(backend, made, "real-node test over")
        backend.close()


@pytest.fixture
def real() -> Iterator[Any]:
    """The adapter set up for the real node's runtime and image, with the script in place."""
    with real_backend() as made:
        yield made


def torchrun(*args: str) -> tuple[str, ...]:
    """The command of a 2-pod DDP job: one process per pod, the script from /scripts."""
    return ("torchrun", "--nproc_per_node=1", f"/scripts/{SCRIPT.name}", *args)


def supervise(backend: Any, spec: JobSpec) -> tuple[Any, Any, Supervisor]:
    store = MemoryRecords()
    cluster = jobdispatch.compose(backend, store=store)
    plan = cluster.operator.submit(spec, by=Actor.human("real-node"), supervised=True)
    sup = Supervisor(backend, store, poll=1.0, lease_ttl=timedelta(seconds=10), holder="real")
    threading.Thread(target=sup.serve, daemon=True).start()
    return cluster, plan, sup


def settled(cluster: Any, job: str) -> Any:
    return eventually(
        lambda: cluster.observer.get(job),
        f"job {job} settling",
        holds=lambda s: s.settled,
        within=DEADLINE,
        every=1,
    )


def job_folder(job: str) -> Path:
    return Path(os.environ["JOBDISPATCH_KUBE_REAL_CHECKPOINTS"]) / job


def result(job: str, submission: int) -> dict[str, Any]:
    """What the script wrote at the end of the job's submission (whatever its attempt)."""
    (path,) = job_folder(job).glob(f"result-s{submission}-a*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def checkpoint_step(job: str, submission: int) -> int | None:
    """The newest step the submission checkpointed, None before its first."""
    files = job_folder(job).glob(f"s{submission}-a*/step-*.pt")
    return max((int(p.stem.split("-")[1]) for p in files), default=None)


def evict_pods(backend: Any, ref: Any) -> None:
    """Evict the object's running pods through the Eviction API, as a drain does."""
    from jobdispatch_kubeflow.api import KubeApi
    from jobdispatch_kubeflow.testing import KubeDriver

    driver = KubeDriver(backend)
    try:
        driver.evict(ref)
    finally:
        assert isinstance(driver.admin, KubeApi)
        driver.admin.close()


STEPS, WAIT_AT = 30, 12


def ddp_pair(
    plain_name: str,
    name: str,
    *args: str,
    env: dict[str, str] | None = None,
    **resumed: Any,
) -> tuple[JobSpec, JobSpec]:
    """An uninterrupted 2-pod DDP job, and one that waits after its step-12 checkpoint (to be
    preempted there) and is resubmitted once by its rule; ``args`` go to the script of both,
    ``env`` to both environments, ``resumed`` adds to the second."""
    env = {"PYTHONUNBUFFERED": "1", **(env or {})}
    plain = JobSpec(
        name=plain_name, command=torchrun("--steps", str(STEPS), *args), nodes=2, env=env
    )
    waits = JobSpec(
        name=name,
        command=torchrun("--steps", str(STEPS), "--wait-at", str(WAIT_AT), *args),
        nodes=2,
        env=env,
        recovery=RecoveryPolicy(
            rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=1)]
        ),
        **resumed,
    )
    return plain, waits


def evict_first_run(backend: Any, job: str) -> None:
    """Evict the pods of the job's first submission, as a drain does."""
    refs = [o.ref for o in backend.find(job).objects if o.identity and o.identity[1] == 1]
    assert len(refs) == 1, refs
    evict_pods(backend, refs[0])


def assert_resumed_to_the_same_loss(plain: tuple[Any, Any], resumed: tuple[Any, Any]) -> None:
    """Both jobs (cluster, plan) succeed; the resumed one was preempted once, resumed from the
    step-12 checkpoint and ended at the uninterrupted one's final loss."""
    done_plain = settled(*plain)
    assert done_plain.state is State.SUCCEEDED, done_plain
    done = settled(*resumed)
    assert done.state is State.SUCCEEDED, done
    one, two = done.submissions
    assert [e.cause.kind for e in one.executions if e.cause] == [CauseKind.PREEMPTED], one
    assert [e.cause.kind for e in two.executions if e.cause] == [CauseKind.NONE], two

    uninterrupted = result(plain[1], 1)
    after = result(resumed[1], 2)
    print(
        f"uninterrupted final loss {uninterrupted['final_loss']!r}; {done.name} "
        f"resumed from step {after['resumed_from']}, final loss {after['final_loss']!r}"
    )
    assert uninterrupted["resumed_from"] == 0
    assert after["resumed_from"] == WAIT_AT
    assert after["final_loss"] == uninterrupted["final_loss"]


@pytest.mark.timeout(DEADLINE * 3)
def test_ddp_evicted_after_a_checkpoint_resumes_to_the_uninterrupted_loss(real: Any) -> None:
    """A 2-pod torchrun DDP job runs to completion; the same job evicted (a drain) after its
    step-12 checkpoint is resubmitted by its rule, resumes from step 12 and ends at the same
    final loss."""
    backend, made = real
    plain, resumed = ddp_pair("real-ddp", "real-ddp-evicted")
    c1, p1, s1 = supervise(backend, plain)
    c2, p2, s2 = supervise(backend, resumed)
    made += [p1.job, p2.job]
    try:
        first = eventually(
            lambda: checkpoint_step(p2.job, 1) == WAIT_AT,
            "the evicted job's step-12 checkpoint",
            within=DEADLINE,
            every=1,
        )
        assert first
        evict_first_run(backend, p2.job)
        assert_resumed_to_the_same_loss((c1, p1.job), (c2, p2.job))
    finally:
        s1.stop()
        s2.stop()


# ---------------------------------------------------------------------------- endings

#: Endings are read without recovery rules: the first execution's cause is the verdict.


def first_cause(backend: Any, made: list[str], spec: JobSpec) -> Any:
    """Run ``spec`` supervised until it settles; the cause its only execution ended with."""
    cluster, plan, sup = supervise(backend, spec)
    made.append(plan.job)
    try:
        done = settled(cluster, plan.job)
    finally:
        sup.stop()
    (submission,) = done.submissions
    causes = [e.cause for e in submission.executions if e.cause is not None]
    assert causes, done
    print(f"{spec.name}: {causes[-1]}")
    return causes[-1]


@pytest.mark.timeout(DEADLINE * 2)
def test_a_workers_exit_code_is_read_through_torchrun(real: Any) -> None:
    """Rank 1's worker exits 3; torchrun exits 1 for it. The cause keeps the worker's 3 (from
    torchrun's failure summary, the pod's termination message) and says torchrun folded it."""
    backend, made = real
    spec = JobSpec(name="real-exit", command=torchrun("--exit-code", "3"), nodes=2)
    cause = first_cause(backend, made, spec)
    assert cause.kind is CauseKind.NON_ZERO_EXIT, cause
    assert cause.exit_code == 3, cause
    assert "torchrun" in cause.detail and "rank 1" in cause.detail, cause
    # JobSet's pods restart OnFailure: the kubelet reran the container before the Job failed.
    assert "restarted in place" in cause.detail, cause


@pytest.mark.timeout(DEADLINE * 2)
def test_a_worker_killed_by_the_oom_killer_is_out_of_memory(real: Any) -> None:
    """Rank 1's worker allocates past the pod's 700 MiB limit; on cgroup v1 the kernel kills
    the worker alone, torchrun exits 1, and the container shows reason OOMKilled."""
    backend, made = real
    spec = JobSpec(
        name="real-oom",
        command=torchrun("--allocate-mib", "2000"),
        nodes=2,
        resources=Resources(memory_per_node_mib=700),
    )
    cause = first_cause(backend, made, spec)
    assert cause.kind is CauseKind.OUT_OF_MEMORY, cause


@pytest.mark.timeout(DEADLINE * 2)
def test_a_missing_program_is_launch_failed(real: Any) -> None:
    backend, made = real
    spec = JobSpec(name="real-noprog", command=("/no/such/program",), nodes=1)
    cause = first_cause(backend, made, spec)
    assert cause.kind is CauseKind.LAUNCH_FAILED, cause


@pytest.mark.timeout(DEADLINE * 2)
def test_an_image_that_cannot_be_found_is_launch_failed(real: Any) -> None:
    """No registry answers: the pull is retried until the time limit ends the run, which had
    never started."""
    backend, made = real
    spec = JobSpec(
        name="real-noimage",
        command=("python3", "-c", "print(1)"),
        nodes=1,
        image="dispatch.local/no-such-image:1",
        # Long enough for a loaded node to create the pod and fail its pull at least once.
        time_limit=timedelta(seconds=120),
    )
    cause = first_cause(backend, made, spec)
    assert cause.kind is CauseKind.LAUNCH_FAILED, cause


@pytest.mark.timeout(DEADLINE * 2)
def test_a_run_past_its_time_limit_is_time_limit(real: Any) -> None:
    """The TrainJob's deadline stops a real process that would run for ten minutes."""
    backend, made = real
    spec = JobSpec(
        name="real-deadline",
        command=("python3", "-c", "import time; time.sleep(600)"),
        nodes=1,
        time_limit=timedelta(seconds=45),
    )
    cause = first_cause(backend, made, spec)
    assert cause.kind is CauseKind.TIME_LIMIT, cause


# ---------------------------------------------------------------------------- Kueue

KUEUE_QUEUE = "jobdispatch-gated"


@pytest.fixture
def real_kueue(real: Any, tmp_path: Path) -> Iterator[Any]:
    """The adapter in Kueue mode on the gated queue (low priority), for the real node, with
    dispatch's admission controller running (spec 0012)."""
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import gated

    namespace = os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")
    lease = f"jd-real-adm-{uuid.uuid4().hex[:8]}"
    with (tmp_path / "admission.log").open("ab") as log:
        controller = subprocess.Popen(
            [
                *(sys.executable, "-m", "jobdispatch_kubeflow.admission", "run"),
                *("--kubeconfig", os.environ["KUBECONFIG"], "--lease-namespace", namespace),
                *("--lease-name", lease, "--interval", "0.5"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        kueue = Kueue(queue=KUEUE_QUEUE, priority_class="jobdispatch-low")
        try:
            with real_backend(kueue=kueue) as (backend, made):
                gated(backend)  # the plan reads the gate: wait for the controller to answer
                yield backend, made, namespace
        finally:
            controller.terminate()
            controller.wait(timeout=60)
            kubectl("-n", namespace, "delete", "lease", lease, "--ignore-not-found")


def high_priority(namespace: str, cpus: str) -> str:
    """A TrainJob that is not dispatch's, at high priority on the gated queue, asking more CPU
    than the cohort has left beside the real job: Kueue preempts the real job for it. Its pods
    go to the kwok nodes (they do not tolerate the real node's taint)."""
    return create_preemptor(
        namespace,
        KUEUE_QUEUE,
        prefix="realhigh",
        nodes=2,
        command=["sleep", "600"],
        resources={"requests": {"cpu": cpus}, "limits": {"cpu": cpus}},
    )


@pytest.mark.timeout(DEADLINE * 3)
def test_ddp_preempted_by_kueue_resumes_to_the_uninterrupted_loss(
    real: Any, real_kueue: Any
) -> None:
    """Under Kueue, a higher-priority workload preempts the DDP job after its step-12
    checkpoint; the resubmitted job waits for the quota, resumes from step 12 and ends at the
    loss of an uninterrupted run (which runs beside it without Kueue)."""
    plain_backend, plain_made = real
    backend, made, namespace = real_kueue
    plain, resumed = ddp_pair("real-ddp-k0", "real-ddp-kueue", resources=Resources(cpus_per_proc=1))
    c1, p1, s1 = supervise(plain_backend, plain)
    c2, p2, s2 = supervise(backend, resumed)
    plain_made.append(p1.job)
    made.append(p2.job)
    high = None
    try:
        eventually(
            lambda: checkpoint_step(p2.job, 1) == WAIT_AT,
            "the step-12 checkpoint",
            within=DEADLINE,
            every=1,
        )
        # The cohort has 12 CPUs; the real job holds 2: 2 x 5.5 does not fit beside it.
        high = high_priority(namespace, "5500m")

        def preempted() -> Any:
            status = c2.observer.get(p2.job)
            if len(status.submissions) < 2:
                return None
            ends = [e.cause for e in status.submissions[0].executions if e.cause]
            return ends or None

        (cause,) = eventually(
            preempted, "the preemption recorded and resubmitted", within=DEADLINE, every=1
        )
        assert cause.kind is CauseKind.PREEMPTED, cause
        assert "InClusterQueue" in cause.detail, cause
        kubectl("-n", namespace, "delete", "trainjob", high, "--wait=false")
        high = None
        assert_resumed_to_the_same_loss((c1, p1.job), (c2, p2.job))
    finally:
        s1.stop()
        s2.stop()
        if high is not None:
            kubectl("-n", namespace, "delete", "trainjob", high, "--ignore-not-found")
