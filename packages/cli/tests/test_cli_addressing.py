"""Jobs addressed as people address them: a unique id prefix, a name, several jobs at once,
``--all`` with a filter, global options after the subcommand, and ``run --follow``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Invoke

JobFile = Callable[..., Path]


def submit(invoke: Invoke, job_file: JobFile, name: str, command: list[str] | None = None) -> str:
    """A job recorded but never launched (no supervisor runs in these tests)."""
    ran = invoke("submit", str(job_file(command or ["sleep", "30"], name=name)), "--json")
    assert ran.code == 0, ran.err
    return str(ran.json()["job"])


def unique_prefix(job: str, others: list[str]) -> str:
    for n in range(1, len(job) + 1):
        if not any(o.startswith(job[:n]) for o in others if o != job):
            return job[:n]
    raise AssertionError("ids collide")


def test_status_by_a_unique_id_prefix(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, "beta")
    prefix = unique_prefix(a, [a, b])
    data = invoke("status", prefix, "--json").json()
    assert data["job"] == a


def test_status_by_name(invoke: Invoke, job_file: JobFile) -> None:
    submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, "beta")
    assert invoke("status", "beta", "--json").json()["job"] == b


def test_an_ambiguous_name_lists_the_matches_and_exits_2(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "twin")
    b = submit(invoke, job_file, "twin")
    ran = invoke("status", "twin")
    assert ran.code == 2
    assert "'twin' names 2 jobs" in ran.err
    assert a in ran.err and b in ran.err


def test_a_prefix_of_one_that_names_another_is_ambiguous(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, a[:4])  # named as the other's prefix
    ran = invoke("cancel", a[:4])
    assert ran.code == 2
    assert f"{a[:4]!r} names 2 jobs" in ran.err
    assert a in ran.err and b in ran.err
    assert "cancelled" not in ran.out


def test_no_such_job_is_not_found(invoke: Invoke, job_file: JobFile) -> None:
    submit(invoke, job_file, "alpha")
    ran = invoke("status", "nosuchjob")
    assert ran.code == 3
    assert "no job with the id, id prefix or name 'nosuchjob'" in ran.err


def test_an_exact_id_wins_over_a_name(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, a)  # a job named as another's id
    assert invoke("status", a, "--json").json()["job"] == a
    assert b != a


def test_cancel_several_by_id_prefix_and_name(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, "beta")
    c = submit(invoke, job_file, "gamma")
    ran = invoke("cancel", unique_prefix(a, [a, b, c]), "beta")
    assert ran.code == 0, ran.err
    assert f"cancelled {a}" in ran.out and f"cancelled {b}" in ran.out
    states = {j["job"]: j["state"] for j in invoke("list", "--json").json()}
    assert states[a] == "cancelled" and states[b] == "cancelled"
    assert states[c] != "cancelled"


def test_hold_and_release_all_with_a_filter(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "train")
    b = submit(invoke, job_file, "train")
    c = submit(invoke, job_file, "eval")
    ran = invoke("hold", "--all", "--name", "train", "--reason", "disk full")
    assert ran.code == 0, ran.err
    assert f"held {a}" in ran.out and f"held {b}" in ran.out and c not in ran.out
    states = {j["job"]: j["state"] for j in invoke("list", "--json").json()}
    assert states[a] == states[b] == "held" and states[c] != "held"
    ran = invoke("release", "--all", "--state", "held")
    assert ran.code == 0, ran.err
    assert f"released {a}" in ran.out and f"released {b}" in ran.out and c not in ran.out


def test_one_failure_among_several_is_told_and_the_others_go(
    invoke: Invoke, job_file: JobFile
) -> None:
    a = submit(invoke, job_file, "alpha")
    b = submit(invoke, job_file, "beta")
    assert invoke("hold", a).code == 0
    ran = invoke("release", b, a)  # b is not held
    assert ran.code == 2
    assert f"{b}: " in ran.err and "not held" in ran.err
    assert f"released {a}" in ran.out


def test_cancel_all_needs_no_ids_and_refuses_both(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    assert invoke("cancel", "--all", a).code == 2
    assert invoke("cancel").code == 2
    assert invoke("cancel", "--state", "pending", a).code == 2
    ran = invoke("cancel", "--all", "--json")
    assert ran.code == 0
    assert [r["job"] for r in ran.json()] == [a]


@pytest.mark.parametrize(
    "args",
    [
        ("status", "{job}", "--store", "{store}", "--json"),
        ("--store", "{store}", "status", "{job}", "--json"),
        ("status", "--cluster", "local", "{job}", "--store", "{store}", "--json"),
    ],
)
def test_global_options_after_the_subcommand(
    invoke: Invoke, job_file: JobFile, tmp_path: Path, args: tuple[str, ...]
) -> None:
    store = tmp_path / "elsewhere"
    ran = invoke("submit", str(job_file(["true"], name="moved")), "--store", str(store), "--json")
    assert ran.code == 0, ran.err
    job = ran.json()["job"]
    assert invoke("status", job).code == 3, "the job went to the other store"
    filled = [a.format(job=job, store=store) for a in args]
    ran = invoke(*filled)
    assert ran.code == 0, ran.err
    assert ran.json()["job"] == job


def test_as_after_the_subcommand_is_who_acts(invoke: Invoke, job_file: JobFile) -> None:
    a = submit(invoke, job_file, "alpha")
    ran = invoke("hold", a, "--as", "oncall")
    assert ran.code == 0 and "(as human:oncall)" in ran.out


def test_run_follow_streams_the_ranks_output(invoke: Invoke, job_file: JobFile) -> None:
    path = job_file(["sh", "-c", "echo first-line; echo second-line"], name="talk")
    ran = invoke("run", str(path), "--follow", "--poll", "0.05", "--no-timeline")
    assert ran.code == 0, ran.err
    assert "first-line\nsecond-line\n" in ran.out
    assert ran.out.index("second-line") < ran.out.index("outcome:")


def test_run_without_follow_prints_no_output(invoke: Invoke, job_file: JobFile) -> None:
    path = job_file(["sh", "-c", "echo first-line"], name="quiet")
    ran = invoke("run", str(path), "--poll", "0.05", "--no-timeline")
    assert ran.code == 0 and "first-line" not in ran.out
