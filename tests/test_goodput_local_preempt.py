"""Goodput's recomputation on real processes (issue 27, item 5), on the local adapter: the
README's demo job (``examples/train.py``, whose first submission checkpoints and then waits
after step 30 until it is preempted) checkpointing through the helper under a ``[progress]``
root, preempted with ``jobdispatch local preempt`` as the README says, and resubmitted by its
rule. ``jobdispatch goodput`` then reports as recomputation the running time between the newest
checkpoint the first submission published (step 30) and its preemption, within one poll.

The expected figure is read independently of the supervisor's record: the publication's time
from the helper's own key under the root (the job's clock, to the millisecond), the preemption's
from the local runner's execution record. Nothing is asserted about how fast anything runs.
"""

from __future__ import annotations

from datetime import datetime

from jobdispatch.testing import eventually
from jobdispatch_publish import layout
from test_cli_end_to_end import Home
from test_progress_end_to_end import _job

POLL = 0.2


def _published_at(home: Home, job: str, submission: int, step: int) -> datetime | None:
    """When submission ``submission`` published step ``step``, from the helper's own key."""
    folder = home.root / "published" / "_progress"
    for key in folder.iterdir() if folder.exists() else []:
        found = layout.parse_progress_key(layout.PROGRESS_PREFIX + key.name)
        if (
            found is not None
            and found.job == job
            and found.kind == "published"
            and found.submission == submission
            and found.step == step
        ):
            return layout.time_of(found.millis)
    return None


def test_recomputation_is_the_running_time_from_the_newest_checkpoint_to_the_preemption(
    home: Home,
) -> None:
    path = _job(
        home,
        "demo",
        ["--steps", "40", "--step-seconds", "0.05", "--wait-at", "30", "--publish-every", "5"],
        """\
[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = 2
""",
    )
    job = home.json("submit", str(path))["job"]
    home.start("supervise", "--poll", str(POLL), log="supervise.log")
    checkpoint = eventually(
        lambda: _published_at(home, job, 1, 30), "the first submission to publish step 30"
    )
    first = home.json("status", job)["submissions"][0]["canonical"]["id"]
    preempted = home.run("local", "preempt", job)  # as the README says
    assert preempted.returncode == 0, preempted.stderr
    status = eventually(
        lambda: home.json("status", job),
        "the job to settle",
        holds=lambda s: s["settled"],
        every=0.5,
    )
    assert status["state"] == "succeeded", status["cause"]
    ended = next(e for e in home.executions(job) if e["object"] == first)["ended_at"]
    expected = (datetime.fromisoformat(ended) - checkpoint).total_seconds()
    report = home.json("status", job, "--goodput")
    recomputed = sum(p["seconds"] for p in report["parts"] if p["part"] == "recomputation")
    assert abs(recomputed - expected) <= POLL, (recomputed, expected, report["parts"])
    assert all(p["cause"] == "preempted" for p in report["parts"] if p["part"] == "recomputation")
