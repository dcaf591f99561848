"""jobdispatch-kueue-admission on the real control plane with real Kueue (spec 0012 §3).

The controller runs as its console module in a subprocess, under the identity its own `rbac`
command grants (a ServiceAccount token), against LocalQueue ``jobdispatch-gated``, whose
ClusterQueue lists the AdmissionCheck ``jobdispatch-admission``. Every wait is on a condition
with a generous deadline; nothing is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.errors import Rejected
from jobdispatch.spi import StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import CallMeta, CauseKind, JobSpec, ObjectState, Resources
from jobdispatch_kubeflow.testing import create_preemptor, kubectl

pytestmark = pytest.mark.kube

CHECK = "jobdispatch-admission"
QUEUE = "jobdispatch-gated"
WAIT = 180.0


@pytest.fixture(scope="module")
def admin(kube_cluster: None) -> Any:
    from jobdispatch_kubeflow.api import KubeApi

    return KubeApi(kubeconfig=os.environ["KUBECONFIG"])


@pytest.fixture(scope="module")
def token_file(admin: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A token of the ServiceAccount bound by the manifest `rbac` prints: the controller runs
    with exactly the RBAC the project generates."""
    namespace = os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")
    manifest = subprocess.run(
        [sys.executable, "-m", "jobdispatch_kubeflow.admission", "rbac", "--namespace", namespace],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kubectl("apply", "-f", "-", stdin=manifest)
    token = kubectl(
        "create", "token", "jobdispatch-kueue-admission", "-n", namespace, "--duration=2h"
    ).strip()
    path = tmp_path_factory.mktemp("kueue-admission") / "token"
    path.write_text(token)
    return path


class Controllers:
    """The controller processes a test starts; all stopped (by their own pid) at its end."""

    def __init__(self, token: Path, tmp: Path) -> None:
        self.token, self.tmp = token, tmp
        self.lease = f"jd-kueue-adm-{uuid.uuid4().hex[:8]}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, identity: str, fault: str | None = None) -> subprocess.Popen[bytes]:
        """A replica: the shipped controller, or with ``fault`` the one of admission_faults.py
        that fails at that fault point."""
        program = ["-m", "jobdispatch_kubeflow.admission"]
        if fault is not None:
            program = [str(Path(__file__).with_name("admission_faults.py")), fault]
        with (self.tmp / f"{identity}.log").open("ab") as log:
            return self._start(identity, log, program)

    def _start(self, identity: str, log: Any, program: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [
                sys.executable,
                *program,
                "run",
                "--kubeconfig",
                os.environ["JOBDISPATCH_KUBE_ADAPTER_KUBECONFIG"],
                "--token-file",
                str(self.token),
                "--lease-namespace",
                os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch"),
                "--lease-name",
                self.lease,
                "--identity",
                identity,
                "--lease-duration",
                "8",
                "--renew-deadline",
                "5",
                "--interval",
                "0.5",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[identity] = proc
        return proc

    def log(self, identity: str) -> str:
        return (self.tmp / f"{identity}.log").read_text()

    def stop(self, identity: str, *, kill: bool = False) -> None:
        proc = self.procs.pop(identity)
        if proc.poll() is None:
            proc.kill() if kill else proc.terminate()
            proc.wait(timeout=60)

    def stop_all(self) -> None:
        for identity in list(self.procs):
            self.stop(identity)
        namespace = os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")
        kubectl("-n", namespace, "delete", "lease", self.lease, "--ignore-not-found")


@pytest.fixture
def controllers(token_file: Path, tmp_path: Path) -> Iterator[Controllers]:
    made = Controllers(token_file, tmp_path)
    yield made
    made.stop_all()


@pytest.fixture
def backend(kube_cluster: None) -> Iterator[Any]:
    from jobdispatch_kubeflow import KubeflowBackend
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import settings

    made = KubeflowBackend(settings(kueue=Kueue(queue=QUEUE, priority_class="jobdispatch-low")))
    refs: list[Any] = []
    made.started = refs  # type: ignore[attr-defined]
    yield made
    for ref in refs:
        made.stop(ref, "test over")


def start(backend: Any, gpus: int = 0) -> Any:
    """A gated submission asking one CPU (and ``gpus`` GPUs). It must ask for some resource the
    ClusterQueue covers: Kueue applies a check through the flavors it assigns, and a workload
    asking nothing is assigned none and admitted without any check (spec 0012 §2)."""
    job = f"kq{uuid.uuid4().hex[:10]}"
    resources = Resources(gpus_per_node=gpus, cpus_per_proc=1)
    spec = JobSpec(command=("sh", "-c", "true"), resources=resources)
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    backend.started.append(ref)
    return ref


def meta(minutes: float = 5) -> CallMeta:
    return CallMeta(deadline=datetime.now(UTC) + timedelta(minutes=minutes))


def workload(admin: Any, ref: Any) -> dict[str, Any] | None:
    namespace, name = ref.id.split("/")
    tj = admin.get("trainjobs", namespace, name)
    if tj is None:
        return None
    items, _ = admin.list(
        "workloads", namespace, label_selector=f"kueue.x-k8s.io/job-uid={tj['metadata']['uid']}"
    )
    return items[0] if items else None


def cond(wl: dict[str, Any] | None, kind: str) -> tuple[str, str]:
    for c in ((wl or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c["status"], c.get("reason", "")
    return "", ""


def check(wl: dict[str, Any] | None) -> dict[str, Any]:
    for c in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
        if c["name"] == CHECK:
            return dict(c)
    return {}


def admitted(admin: Any, ref: Any) -> bool:
    return cond(workload(admin, ref), "Admitted")[0] == "True"


def leader(admin: Any, controllers: Controllers) -> str:
    lease = admin.get(
        "leases", os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch"), controllers.lease
    )
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def renew_time(admin: Any, controllers: Controllers) -> str:
    lease = admin.get(
        "leases", os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch"), controllers.lease
    )
    return str(((lease or {}).get("spec") or {}).get("renewTime") or "")


def test_a_gated_submission_reserves_no_quota_until_opened(
    admin: Any, backend: Any, controllers: Controllers
) -> None:
    controllers.start("solo")
    ref = start(backend)
    wl = eventually(
        lambda: workload(admin, ref), "the Workload of the gated TrainJob", within=WAIT, every=0.5
    )
    eventually(
        lambda: cond(workload(admin, ref), "QuotaReserved") == ("False", "AdmissionGated"),
        "the Workload gated by admission-gated-by (QuotaReserved=False AdmissionGated)",
        within=WAIT,
        every=0.5,
    )
    eventually(
        lambda: leader(admin, controllers) == "solo",
        "the controller leading",
        within=WAIT,
        every=0.5,
    )
    eventually(
        lambda: any(
            c["type"] == "Active" and c["status"] == "True"
            for c in (admin.get("admissionchecks", None, CHECK).get("status") or {}).get(
                "conditions"
            )
            or []
        ),
        "the AdmissionCheck Active",
        within=WAIT,
        every=0.5,
    )
    # With the check Active (so its ClusterQueue is active) and the controller leading, the
    # Workload is still gated, reserving nothing.
    found = workload(admin, ref)
    assert found is not None, "the Workload went"
    wl = found
    assert cond(wl, "QuotaReserved") == ("False", "AdmissionGated"), wl
    assert cond(wl, "Admitted")[0] != "True"
    assert "admission" not in (wl.get("status") or {}), wl["status"]
    assert backend.inspect(ref).state is ObjectState.GATED

    backend.open(ref, meta())
    eventually(lambda: admitted(admin, ref), "admission after the open", within=WAIT, every=0.5)
    opened = json.loads(
        admin.get("trainjobs", *ref.id.split("/"))["metadata"]["annotations"][
            "jobdispatch.dev/open"
        ]
    )
    found = workload(admin, ref)
    assert found is not None, "the Workload went"
    wl = found
    assert check(wl).get("message") == f"opened by dispatch (open {opened['id']})", wl["status"]
    eventually(
        lambda: backend.inspect(ref).state is ObjectState.RUNNING,
        "the TrainJob running",
        within=WAIT,
        every=0.5,
    )


def test_an_open_past_its_deadline_is_refused_by_adapter_and_controller(
    admin: Any, backend: Any, controllers: Controllers
) -> None:
    controllers.start("solo")
    ref = start(backend)
    with pytest.raises(Rejected, match="deadline"):
        backend.open(ref, CallMeta(deadline=datetime.now(UTC) - timedelta(seconds=1)))
    # An open that reached the controller only after its deadline: written as the adapter
    # would have, with a deadline already past when the controller reads it.
    namespace, name = ref.id.split("/")
    from jobdispatch_kubeflow.admission import open_annotation

    admin.patch(
        "trainjobs",
        namespace,
        name,
        {
            "metadata": {
                "annotations": {
                    "jobdispatch.dev/gate": "open",
                    "jobdispatch.dev/open": open_annotation(
                        "late", datetime.now(UTC) - timedelta(seconds=1)
                    ),
                    "kueue.x-k8s.io/admission-gated-by": None,
                }
            }
        },
    )
    eventually(
        lambda: "came too late" in check(workload(admin, ref)).get("message", ""),
        "the late open answered Pending",
        within=WAIT,
        every=0.5,
    )
    assert check(workload(admin, ref))["state"] == "Pending"
    assert not admitted(admin, ref)


def test_of_two_replicas_only_the_leader_answers(
    admin: Any, backend: Any, controllers: Controllers
) -> None:
    controllers.start("one")
    eventually(
        lambda: leader(admin, controllers) == "one", "replica one leading", within=WAIT, every=0.5
    )
    controllers.start("two")
    first = start(backend)
    backend.open(first, meta())
    eventually(
        lambda: admitted(admin, first), "the first submission admitted", within=WAIT, every=0.5
    )
    # The log line follows the write that admitted it: wait for it, do not race it.
    eventually(
        lambda: "check jobdispatch-admission Ready" in controllers.log("one"),
        "replica one's answer in its log",
        within=WAIT,
        every=0.5,
    )
    assert "check jobdispatch-admission" not in controllers.log("two")
    assert leader(admin, controllers) == "one"

    controllers.stop("one")  # a clean exit gives the lease up
    eventually(
        lambda: leader(admin, controllers) == "two", "replica two leading", within=WAIT, every=0.5
    )
    second = start(backend)
    backend.open(second, meta())
    eventually(
        lambda: admitted(admin, second),
        "the second submission admitted by replica two",
        within=WAIT,
        every=0.5,
    )
    name = second.id.split("/")[1]
    eventually(
        lambda: name in controllers.log("two"),
        "replica two's answer in its log",
        within=WAIT,
        every=0.5,
    )
    assert name not in controllers.log("one")


def test_killed_mid_admission_and_evicted_nothing_is_admitted_twice(
    admin: Any, backend: Any, controllers: Controllers
) -> None:
    ref = start(backend, gpus=8)
    controllers.start("crashing", fault="exit-after-spend")
    backend.open(ref, meta())
    assert controllers.procs["crashing"].wait(timeout=WAIT) == 3
    found = workload(admin, ref)
    assert found is not None, "the Workload went"
    wl = found
    spent = json.loads(wl["metadata"]["annotations"]["jobdispatch.dev/admission-spent"])
    assert check(wl)["state"] == "Pending" and not admitted(admin, ref)
    controllers.procs.pop("crashing")

    controllers.start("restarted")
    eventually(lambda: admitted(admin, ref), "admission after the restart", within=WAIT, every=0.5)
    found = workload(admin, ref)
    assert found is not None, "the Workload went"
    wl = found
    assert f"(open {spent['open']})" in check(wl)["message"]
    eventually(
        lambda: backend.inspect(ref).state is ObjectState.RUNNING,
        "the run seen running",
        within=WAIT,
        every=0.5,
    )

    # A higher-priority workload that is not dispatch's takes the queue's 8 GPUs.
    namespace = ref.id.split("/")[0]
    high = create_preemptor(
        namespace,
        QUEUE,
        prefix="kqhigh",
        nodes=1,
        command=["true"],
        resources={"limits": {"nvidia.com/gpu": "8"}},
    )
    try:
        eventually(
            lambda: cond(workload(admin, ref), "Evicted") == ("True", "Preempted"),
            "the dispatch workload preempted",
            within=WAIT,
            every=0.5,
        )
        assert cond(workload(admin, ref), "Preempted") == ("True", "InClusterQueue")
        controllers.stop("restarted", kill=True)  # no release: the next one waits it out
        controllers.start("again")
        kubectl("-n", namespace, "delete", "trainjob", high, "--wait=false")

        def never_readmitted() -> bool:
            # The readmission rejected by dispatch's check: Kueue reserves no quota for the
            # Workload ("The workload has failed admission checks", observed) and never admits
            # it; it deactivates it when it held quota at the rejection (observed once).
            wl = workload(admin, ref)
            return (
                check(wl).get("state") == "Rejected"
                and "never readmitted" in check(wl).get("message", "")
                and cond(wl, "Admitted")[0] != "True"
                and cond(wl, "QuotaReserved")[0] != "True"
            )

        eventually(
            never_readmitted, "the readmission rejected, no quota held", within=WAIT, every=0.5
        )
        # The adapter reads the object ended: its run was preempted, Kueue's reason kept, and
        # its recovery is the supervisor's rule (spec 0012 §9). It knows a run ended by an
        # eviction once Kueue has added the run's time to the Workload's past execution time,
        # which comes seconds after the eviction (``classify.kueue_runs``); the rejection can be
        # seen before it (CI once read the object still pending here), so wait for that too.
        eventually(
            lambda: backend.inspect(ref).state is ObjectState.ENDED,
            "the object read ended",
            within=WAIT,
            every=0.5,
        )
        seen = backend.inspect(ref)
        [ended] = seen.executions
        assert ended.index == 0 and ended.cause is not None, seen
        assert ended.cause.kind is CauseKind.PREEMPTED, ended
        assert "InClusterQueue" in ended.cause.detail, ended
        # Killed and restarted once more, and opened again: after a whole round of the new
        # leader, still not readmitted.
        controllers.stop("again", kill=True)
        controllers.start("last")
        backend.open(ref, meta())
        eventually(
            lambda: leader(admin, controllers) == "last",
            "the last replica leading",
            within=WAIT,
            every=0.5,
        )
        renewed = renew_time(admin, controllers)
        eventually(
            lambda: renew_time(admin, controllers) != renewed,
            "a whole round of the last replica",
            within=WAIT,
            every=0.5,
        )
        assert never_readmitted()
    finally:
        kubectl("-n", namespace, "delete", "trainjob", high, "--ignore-not-found", "--wait=false")


# ---------------------------------------------------------------------------- the probed gate


def test_a_queue_whose_cluster_queue_lacks_the_check_answers_readmission_gate_no(
    kube_cluster: None,
) -> None:
    """Issue 35 item 4, the regression: LocalQueue ``jobdispatch``'s ClusterQueue lists no
    admission check, so Kueue readmits an evicted TrainJob by itself. The capability is probed
    (no longer the catalogue's yes), and the plan refuses a rule on preempted there as it
    refuses any rule nobody can enforce, and warns of a job without one."""
    from jobdispatch.plan import make_plan
    from jobdispatch.types import Action, Capability, RecoveryPolicy, Rule, Source, Tristate
    from jobdispatch_kubeflow import KubeflowBackend, probe
    from jobdispatch_kubeflow.config import Kueue
    from jobdispatch_kubeflow.testing import settings

    probe.forget()
    backend = KubeflowBackend(settings(kueue=Kueue(queue="jobdispatch")))
    try:
        gate = backend.capabilities()[Capability.READMISSION_GATE]
        assert (gate.answer, gate.source) == (Tristate.NO, Source.PROBED), gate
        assert "ClusterQueue jobdispatch of LocalQueue dispatch/jobdispatch lists no" in (
            gate.detail
        )
        rule = Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)
        spec = JobSpec(command=("true",), recovery=RecoveryPolicy(rules=(rule,)))
        with pytest.raises(Rejected, match="nobody would enforce rule 0"):
            make_plan(backend, None, spec, supervised=True)
        bare = make_plan(backend, None, JobSpec(command=("true",)), supervised=True)
        assert "Kueue may readmit an evicted TrainJob by itself" in bare.identity_weakened
    finally:
        backend.close()


def test_the_gate_is_yes_while_a_controller_answers_the_check_and_no_once_none_does(
    backend: Any, controllers: Controllers
) -> None:
    """On ``jobdispatch-gated`` (its ClusterQueue lists the check): yes once a controller has
    marked the check Active naming its Lease and renews it; no once it stopped (it gives its
    Lease up on a clean exit)."""
    from jobdispatch.types import Capability, Tristate
    from jobdispatch_kubeflow import probe
    from jobdispatch_kubeflow.testing import gated

    controllers.start("solo")
    yes = gated(backend, within=WAIT)
    namespace = os.environ.get("JOBDISPATCH_KUBE_NAMESPACE", "dispatch")
    assert f"lease {namespace}/{controllers.lease} held by solo" in yes.detail, yes
    controllers.stop("solo")

    def gate() -> Any:
        probe.forget()
        return backend.capabilities()[Capability.READMISSION_GATE]

    no = eventually(gate, "readmission-gate: no", holds=lambda a: a.answer is Tristate.NO)
    assert "no controller answers it" in no.detail, no
