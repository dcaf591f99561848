"""``goodput`` and ``status --goodput``: the report of a job that ran, its window and filters,
prices from the configuration, and bad input named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import add_to_config

Invoke = Callable[..., Any]

JOB = """\
name = "gp-demo"
command = ["sh", "-c", "echo hi"]
"""


@pytest.fixture
def ran(invoke: Invoke, home: Path) -> str:
    """A job that ran to success on the local cluster; its id."""
    file = home / "job.toml"
    file.write_text(JOB)
    got = invoke("run", str(file), "--poll", "0.05")
    assert got.code == 0, got.out + got.err
    listed = invoke("list", "--json").json()
    return str(listed[0]["job"])


def _price(home: Path, table: str) -> None:
    add_to_config(home, f"prices = {table}\n")


def test_the_report_counts_the_job_and_its_parts_add_up(invoke: Invoke, ran: str) -> None:
    got = invoke("goodput", "--json")
    assert got.code == 0, got.err
    data = got.json()
    (job,) = data["jobs"]
    assert job["job"] == ran and job["state"] == "succeeded"
    assert job["goodput"] == 1.0  # it ran once and succeeded: all its running time was kept
    assert abs(sum(p["seconds"] for p in job["parts"]) - job["seconds"]) < 1e-5
    assert abs(data["total"]["seconds"] - job["seconds"]) < 1e-5
    table = invoke("goodput")
    assert table.code == 0 and ran in table.out and "productive" in table.out


def test_the_window_and_the_filters_select(invoke: Invoke, ran: str) -> None:
    assert invoke("goodput", "--since", "2099-01-01", "--json").json()["jobs"] == []
    assert invoke("goodput", "--until", "1d", "--json").json()["jobs"] == []
    assert len(invoke("goodput", "--since", "1h", "--json").json()["jobs"]) == 1
    assert invoke("goodput", "--name", "other", "--json").json()["jobs"] == []
    assert len(invoke("goodput", "--name", "gp-*", "--json").json()["jobs"]) == 1
    assert invoke("goodput", "--state", "failed", "--json").json()["jobs"] == []
    assert len(invoke("goodput", ran, "--json").json()["jobs"]) == 1
    empty = invoke("goodput", "--since", "2099-01-01")
    assert empty.code == 0 and "no jobs in the window" in empty.err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--since", "yesterday"), "--since 'yesterday'"),
        (("--since", "1h", "--until", "2h"), "--since must be before --until"),
        (("--checkpoint-cost", "0s"), "--checkpoint-cost"),
    ],
)
def test_bad_input_is_named(invoke: Invoke, home: Path, args: tuple[str, ...], named: str) -> None:
    got = invoke("goodput", *args)
    assert got.code == 2
    assert named in got.err


def test_prices_turn_resource_time_into_cost(invoke: Invoke, home: Path, ran: str) -> None:
    _price(home, "{ core_hour = 3600.0 }")
    got = invoke("goodput", "--json").json()
    (job,) = got["jobs"]
    assert job["cost"] == pytest.approx(job["resource_seconds"])  # 3600 an hour: 1 a second
    assert got["total"]["cost"] == pytest.approx(job["cost"])


def test_bad_prices_are_refused_naming_the_key(invoke: Invoke, home: Path) -> None:
    _price(home, "{ core_hour = -1, gpu_hours = 2 }")
    got = invoke("goodput")
    assert got.code == 2
    assert "clusters.local.prices.core_hour" in got.err
    assert "clusters.local.prices.gpu_hours" in got.err


def test_status_goodput_shows_the_parts_and_draws_them(
    invoke: Invoke, home: Path, ran: str
) -> None:
    got = invoke("status", ran, "--goodput")
    assert got.code == 0 and "productive" in got.out
    drawn = invoke("status", ran, "--goodput", "--timeline")
    assert drawn.code == 0 and "goodput" in drawn.out
    svg = home / "t.svg"
    assert invoke("status", ran, "--goodput", "--svg", str(svg)).code == 0
    text = svg.read_text()
    assert ">goodput</text>" in text and "productive" in text


def test_all_clusters_totals_each_cluster_apart(invoke: Invoke, home: Path, ran: str) -> None:
    config = home / "config" / "jobdispatch" / "config.toml"
    state = home / "state"
    config.write_text(
        config.read_text()
        + f'[clusters.other]\nadapter = "local"\nstate_dir = "{state}/other"\n'
        + '[clusters.unused]\nadapter = "local"\n'
    )
    file = home / "job.toml"
    assert invoke("run", str(file), "--poll", "0.05", "--cluster", "other").code == 0
    got = invoke("goodput", "--all-clusters", "--json").json()
    assert sorted(got["by_cluster"]) == ["local", "other"]
    assert {j["cluster"] for j in got["jobs"]} == {"local", "other"}
    records = state / "jobdispatch" / "records"
    assert (records / "other").is_dir()
    assert not (records / "unused").exists()  # reading made no store
    both = invoke("goodput", "--all-clusters", ran)
    assert both.code == 2 and "not both" in both.err
