"""Goodput's recomputation on the real Slurm cluster (issue 27, item 5): the DDP job of
tests/real_node_ddp.py (Debian's python3-torch, two ranks over gloo, one on each node of
tools/slurm/up) checkpointing every 50 steps through the publish helper under a ``[progress]``
root, submitted and supervised by the installed ``jobdispatch`` command, preempted by Slurm
after its step-150 publication, resubmitted by its rule, resumed from step 150 and finished.
``jobdispatch goodput`` then reports as recomputation, attributed to the preemption and its
rule, the running time between the step-150 save and the preemption, within one poll.

The first submission trains to step 170 and waits there (``--wait-at``), so the preemption
lands after the step-150 save and before a step-200 one however fast or slow the machine is;
it is sent once the save is two seconds old, since Slurm reports times to the second.
Preemption is what the other Slurm tests do: a job in the ``high`` partition takes one of the
victim's nodes (``SlurmDriver.preempt``), and the adapter's ``--no-requeue`` job ends PREEMPTED.

The expected figure is read independently of the supervisor's record: the save's time from the
helper's own key under the root (the job's clock, to the millisecond), the preemption's from
Slurm's accounting (``sacct``'s End of the victim, to the second). Nothing is asserted about how
fast anything runs; the bound is the supervisor's configured poll.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from jobdispatch.spi import ObjectRef
from jobdispatch.testing import eventually
from jobdispatch.types import ObjectState
from jobdispatch_slurm.testing import SlurmDriver, cluster_problem, require
from test_goodput_local_preempt import _published_at
from test_progress_slurm import SlurmHome, preempt_until_ended
from test_slurm_end_to_end import sacct_rows

pytestmark = pytest.mark.slurm

#: The supervisor's poll: the adapter's floor, and the bound the figures must agree within.
POLL = 2.0
#: The nodes run on this host, so they run Debian's python3, where python3-torch installs.
TORCH_PYTHON = "/usr/bin/python3"
SCRIPT = Path(__file__).with_name("real_node_ddp.py")
#: The publish helper, as this interpreter's environment installs it.
HELPER = Path(sys.executable).with_name("jobdispatch-publish")
EVERY, SAVED, WAIT_AT, STEPS = 50, 150, 170, 300
#: Slurm's times are whole seconds (truncated): a preemption in the save's own second is
#: reported as ending before the save, and no running time after it can be seen. The victim
#: waits at its step 170 however long it takes, so the preemption waits until the save is
#: this old, and lands in a later second than it.
SLURM_RESOLUTION = timedelta(seconds=2)


def torch_problem() -> str | None:
    """Why the DDP job cannot run on these nodes, or None."""
    found = subprocess.run(
        [TORCH_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        return f"{TORCH_PYTHON} has no torch with gloo (tools/slurm/up installs python3-torch)"
    return None


@pytest.fixture
def home(tmp_path: Path) -> Iterator[SlurmHome]:
    require(cluster_problem())
    require(torch_problem())
    h = SlurmHome(tmp_path)
    yield h
    h.close()


def _ddp_job(home: SlurmHome) -> Path:
    root = home.root / "published"
    root.mkdir()
    args = [
        *(TORCH_PYTHON, str(SCRIPT), "--publish-with", str(HELPER)),
        *("--out", str(home.root / "out"), "--step-seconds", "0.02"),
        *("--steps", str(STEPS), "--publish-every", str(EVERY), "--wait-at", str(WAIT_AT)),
    ]
    command = ", ".join(f'"{a}"' for a in args)
    return home.job_file(
        "ddp.toml",
        f"""\
name = "slurm-ddp-goodput"
command = [{command}]
nodes = 2
time_limit = "20m"
working_dir = "{home.root}"

[env]
GLOO_SOCKET_IFNAME = "lo"  # every node of tools/slurm/up is on loopback

[progress]
root = "{root}"
record_every = "10s"

[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = 2
""",
    )


def _ended_per_slurm(job_id: str) -> datetime:
    """The victim's End as Slurm's accounting has it (UTC, to the second)."""
    [row] = sacct_rows(job_id)
    assert row.state == "PREEMPTED" and row.end is not None, row
    return row.end


@pytest.mark.timeout(900)
def test_recomputation_is_the_running_time_from_the_step_150_save_to_the_preemption(
    home: SlurmHome,
) -> None:
    job = home.json("submit", str(_ddp_job(home)))["job"]
    home.jobs.append(job)
    home.start("supervise", "--poll", f"{POLL:g}", log="supervise.log")
    saved = eventually(
        lambda: _published_at(home, job, 1, SAVED),
        f"the first submission to publish step {SAVED}",
        within=300,
        every=0.2,
    )

    def running() -> ObjectRef | None:
        for o in home.backend.find(job).objects:
            if o.identity and o.identity[1] == 1 and o.state is ObjectState.RUNNING:
                return o.ref
        return None

    victim = eventually(running, "the first submission running", within=60, every=0.5)
    eventually(
        lambda: datetime.now(UTC) >= saved + SLURM_RESOLUTION,
        "the step-150 save to be older than Slurm's clock resolution",
        within=60,
        every=0.2,
    )
    driver = SlurmDriver(home.backend)
    try:
        preempt_until_ended(driver, victim, lambda: running() is None, "the first submission")
        status = home.settled(job, "the resubmitted job to finish", within=600, every=1.0)
    finally:
        driver.cleanup()
    assert status["state"] == "succeeded", status["cause"]
    first, second = status["submissions"]
    assert first["executions"][-1]["cause"]["kind"] == "preempted", first
    assert second["executions"][-1]["cause"]["kind"] == "none", second
    assert [r[2] for r in status["progress"]["resumed"] if r[0] == 2] == [SAVED]

    expected = (_ended_per_slurm(victim.id) - saved).total_seconds()
    report = home.json("goodput", job, "--json")
    [entry] = report["jobs"]
    recomputed = sum(
        p["seconds"]
        for p in entry["parts"]
        if p["part"] == "recomputation" and p["cause"] == "preempted"
    )
    print(
        f"\nrecomputation {recomputed:.3f} s; step-{SAVED} save to preemption {expected:.3f} s;"
        f" poll {POLL:g} s"
    )
    assert recomputed > 0, ("no recomputation reported", expected, entry["parts"])
    assert abs(recomputed - expected) <= POLL, (recomputed, expected, entry["parts"])
    assert all(
        (p["cause"], p["rule"], p["enforcer"]) == ("preempted", 0, "supervisor")
        for p in entry["parts"]
        if p["part"] == "recomputation"
    ), entry["parts"]
    by_cause = report["by_cause"]["preempted"]["parts"]["recomputation"]["seconds"]
    assert by_cause == pytest.approx(recomputed), report["by_cause"]
