"""Progress as evidence, end to end on the local adapter (issue 26, item 8): real processes
training through the checkpoint helper (``examples/train.py`` with a ``[progress]`` root marks
every step and publishes every few), the installed ``jobdispatch`` command supervising them, and
the helper's own files under the root as the only evidence the supervisor reads.

* A job that hangs after a step (still running, no progress) is named ``stalled`` by the
  supervisor, stopped, resubmitted, resumes from its newest published checkpoint and succeeds.
* A job preempted five times, advancing each time, under a rule with budget 2 and
  ``charge = "no-advance"``, succeeds: no firing was charged.
* A job that crashes at the same step every time fails once its budget is spent, with its
  cause and the spent budget named.

Nothing is asserted about how fast anything happens: each test waits for the state it needs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.testing import eventually
from jobdispatch.types import ObjectState
from jobdispatch_local.testing import make_backend
from test_cli_end_to_end import TRAIN, Home

STALL_AFTER = 6.0


def _job(home: Home, name: str, args: list[str], tables: str, *, more: str = "") -> Path:
    """A two-rank training job checkpointing through the helper under ``home/published``;
    ``more``: top-level lines of the job file besides (a time limit, say)."""
    root = home.root / "published"
    root.mkdir(exist_ok=True)
    command = ", ".join(f'"{a}"' for a in [sys.executable, str(TRAIN), *args])
    return home.job_file(
        f"{name}.toml",
        f"""\
name = "{name}"
command = [{command}]
nodes = 2
{more}working_dir = "{home.root}"

[env]
JOBDISPATCH_PROGRESS_INTERVAL = "0.5"

[progress]
root = "{root}"
record_every = "10s"

{tables}""",
    )


def stall_table(after: float) -> str:
    """A job file's ``[stall]`` table: no progress for ``after`` seconds is a stall, with a
    startup grace long enough for any start."""
    return f'[stall]\nafter = "{after:g}s"\nstartup_grace = "5m"\n\n'


def resubmit_rule(on: str, budget: int) -> str:
    """A job file's recovery rule resubmitting on the cause ``on`` within ``budget``, charging a
    firing only when the job published no newer checkpoint (``no-advance``)."""
    return (
        f'[[recovery.rules]]\non = ["{on}"]\naction = "resubmit"\nbudget = {budget}\n'
        'charge = "no-advance"\n'
    )


def _published(home: Home, job: str, submission: int) -> int:
    """The newest step submission ``submission`` published, from the helper's own keys."""
    steps = [-1]
    folder = home.root / "published" / "_progress"
    for key in folder.iterdir() if folder.exists() else []:
        parts = key.name.split(",")
        ours = len(parts) == 6 and parts[0] == job and parts[2] == "published"
        if ours and int(parts[3]) == submission and parts[4].isdigit():
            steps.append(int(parts[4]))
    return max(steps)


def assert_stalled_then_resumed(
    home: Home, job: str, status: dict[str, Any], stall_after: float
) -> float:
    """The hung job's settled status: its first run named stalled by the supervisor (never
    early, and stopped: the stop was decided before the kill, so the cause is never
    cancelled), its second run ended well, resuming from the newest published checkpoint
    (step 10). How long the supervisor saw no progress."""
    first, second = status["submissions"]
    ended = first["executions"][-1]["cause"]
    assert (ended["kind"], ended["provenance"]) == ("stalled", "supervisor"), ended
    assert "last progress: step 1" in ended["detail"], ended["detail"]  # step 11 or 12
    waited = float(re.search(r"no progress for ([0-9.]+) s", ended["detail"])[1])  # type: ignore[index]
    assert waited >= stall_after, ended["detail"]
    [stall] = status["progress"]["stalls"]
    assert stall["enforced"] is True
    assert second["executions"][-1]["cause"]["kind"] == "none"
    # The record's resumed entries: [submission, execution, step].
    assert [r[2] for r in status["progress"]["resumed"] if r[0] == 2] == [10], status["progress"]
    resumed = home.run("logs", job, "--submission", "2", "--rank", "0")
    assert "resuming from step 10" in resumed.stdout, resumed.stdout + resumed.stderr
    return waited


def test_a_hung_job_is_named_stalled_stopped_resubmitted_and_resumes(home: Home) -> None:
    path = _job(
        home,
        "hang",
        ["--steps", "30", "--step-seconds", "0.1", "--hang-at", "12", "--publish-every", "5"],
        stall_table(STALL_AFTER) + resubmit_rule("stalled", 2),
    )
    done = home.run("run", str(path), "--poll", "0.2", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    job = done.stdout.split()[1]
    status = home.json("status", job)
    assert status["state"] == "succeeded"
    waited = assert_stalled_then_resumed(home, job, status, STALL_AFTER)
    print(f"\nstalled after {waited:.1f} s without progress (stall.after {STALL_AFTER:g} s)")


@pytest.mark.timeout(900)
def test_preempted_five_times_while_advancing_never_spends_a_budget_of_two(home: Home) -> None:
    path = _job(
        home,
        "preempted",
        # 600 steps: far more than five preemptions soon after a publication ever reach, so
        # no submission can finish before the test preempts it, however loaded the machine.
        ["--steps", "600", "--step-seconds", "0.05", "--publish-every", "2"],
        resubmit_rule("preempted", 2),
    )
    job = home.json("submit", str(path))["job"]
    home.start("supervise", "--poll", "0.1", log="supervise.log")
    backend = make_backend(home.local)
    last = -1
    for submission in range(1, 6):

        def advanced(n: int = submission, before: int = last) -> int:
            step = _published(home, job, n)
            return step if step > before else 0

        last = eventually(
            advanced, f"submission {submission} to publish past step {last}", every=0.05
        )

        def running(n: int = submission) -> Any:
            return next(
                (
                    o
                    for o in backend.find(job).objects
                    if o.identity and o.identity[1] == n and o.state is ObjectState.RUNNING
                ),
                None,
            )

        obj = eventually(running, f"submission {submission} to run", every=0.05)
        backend.preempt(obj.ref)
    # The sixth submission trains the rest of the 600 steps, publishing every second one: each
    # publication is a helper process, so on a loaded machine that takes minutes.
    status = home.settled(job, "the sixth submission to finish", within=600)
    assert status["state"] == "succeeded", status["cause"]
    assert len(status["submissions"]) == 6
    firings = status["firings"]
    assert len(firings) == 5, firings
    assert not any(f["charged"] for f in firings), firings


def test_a_job_crashing_at_the_same_step_fails_with_its_budget_spent(home: Home) -> None:
    path = _job(
        home,
        "crash",
        ["--steps", "30", "--step-seconds", "0.3", "--crash-at", "7", "--publish-every", "5"],
        resubmit_rule("non-zero-exit", 1),
    )
    done = home.run("run", str(path), "--poll", "0.1", timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    job = done.stdout.split()[1]
    status = home.json("status", job)
    assert status["state"] == "failed"
    assert status["cause"]["kind"] == "non-zero-exit" and status["cause"]["exit_code"] == 3
    firings = status["firings"]
    # The first firing found a newer checkpoint (step 5, none before); the second found the
    # same one: charged, and the budget of 1 was spent, so the third crash ended the job.
    first_run = home.run("logs", job, "--submission", "1", "--rank", "0").stdout
    assert [f["charged"] for f in firings] == [False, True], (firings, first_run)
    assert len(status["submissions"]) == 3
    assert any("spent its budget" in e["detail"] for e in status["escalations"]), status


def test_the_readme_stall_demo_recovers_from_a_hang(home: Home) -> None:
    """The README's second demo, the example job file itself: ``run --follow
    examples/hang.toml`` shows the hung run named stalled and the resubmitted one resuming from
    step 10 to succeed. Its ``python3`` is this interpreter, as under ``./dev``."""
    home.env["PATH"] = f"{Path(sys.executable).parent}:{home.env.get('PATH', '')}"
    example = TRAIN.parent / "hang.toml"
    done = home.run("run", "--follow", str(example), "--poll", "0.2", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submission 1 execution 0 ended: stalled (supervisor)" in done.stdout, done.stdout
    assert "hanging (no more progress)" in done.stdout
    assert "resuming from step 10" in done.stdout
    assert "outcome: succeeded" in done.stdout
