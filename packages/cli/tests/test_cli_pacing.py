"""A cluster's pacing: ``poll_interval`` and ``poll_floor`` in its table, ``--poll`` on the
command line, each checked before anything is submitted or served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Invoke, add_to_config

USAGE = 2


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ("poll_floor = 20\n", "poll_floor", "at most 10"),
        ('poll_interval = "soon"\n', "poll_interval", "must be a number of seconds"),
        ("poll_interval = -1\n", "poll_interval", "must be a positive number"),
        ("poll_interval = 1\npoll_floor = 5\n", "poll_interval", "1 s is below poll_floor (5 s)"),
    ],
)
def test_a_cluster_pacing_out_of_range_is_refused_naming_its_key_and_line(
    invoke: Invoke, home: Path, extra: str, field: str, words: str
) -> None:
    config = add_to_config(home, extra)
    ran = invoke("supervise")
    assert ran.code == USAGE, ran
    line = next(x for x in ran.err.splitlines() if f"clusters.local.{field}" in x)
    assert str(config) in line and words in line


def test_a_site_cannot_lower_the_adapter_s_floor(invoke: Invoke, home: Path) -> None:
    add_to_config(home, "poll_floor = 0.001\n")
    ran = invoke("supervise")
    assert ran.code == USAGE, ran
    assert "clusters.local.poll_floor: a poll floor of 0.001 s is below the adapter's floor" in (
        ran.err.replace("\n", " ")
    )


def test_run_refuses_a_poll_below_the_site_s_floor_before_submitting(
    invoke: Invoke, home: Path, job_file: Callable[..., Path]
) -> None:
    add_to_config(home, "poll_floor = 1\n")
    ran = invoke("run", str(job_file(["true"])), "--poll", "0.5")
    assert ran.code == USAGE, ran
    assert (
        "--poll: a supervisor's poll: a poll interval of 0.5 s is below the poll floor of 1 s"
        in (" ".join(ran.err.split()))
    )
    assert invoke("list", "--json").json() == []


def test_run_polls_at_the_site_s_interval_and_reports_the_outcome(
    invoke: Invoke, home: Path, job_file: Callable[..., Path]
) -> None:
    # The site's interval is what the supervisor polls at when --poll is not given; the
    # report (built from the supervisor's own observations) still tells the whole story.
    add_to_config(home, "poll_interval = 0.05\n")
    ran = invoke("run", str(job_file(["true"])), "--no-timeline")
    assert ran.code == 0, ran
    assert "submission 1 execution 0 running" in ran.out
    assert "outcome: succeeded" in ran.out


@pytest.mark.parametrize("command", ["submit", "plan", "run"])
def test_a_stall_after_shorter_than_the_site_s_poll_is_refused_naming_it(
    invoke: Invoke, home: Path, job_file: Callable[..., Path], command: str
) -> None:
    # The local adapter polls every second, so the plan alone would accept stall.after = 30s;
    # this site's supervisors poll every minute, so it could never be judged in time.
    add_to_config(home, "poll_interval = 60\n")
    path = job_file(["true"])
    path.write_text(path.read_text() + '[progress]\nroot = "/ckpt"\n[stall]\nafter = "30s"\n')
    ran = invoke(command, str(path))
    assert ran.code == USAGE, ran
    said = " ".join(ran.err.split())
    assert (
        "stall.after: must be at least the poll interval of the supervisors of cluster 'local' "
        "(0:01:00), got 0:00:30: progress is read once per poll" in said
    ), said
    assert str(path) in said
    assert invoke("list", "--json").json() == []
