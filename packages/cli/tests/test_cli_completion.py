"""Shell completion of JOB arguments through click's own protocol (issue 33, item 5): the
shell sets ``_JOBDISPATCH_COMPLETE``, ``COMP_WORDS`` and ``COMP_CWORD`` and runs the command,
which prints the candidates: the ids and names of the store's jobs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)


@pytest.fixture
def complete(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """What bash would offer after ``jobdispatch WORDS`` (the last word being completed)."""

    def run(words: str, shell: str = "bash") -> list[str]:
        monkeypatch.setenv("_JOBDISPATCH_COMPLETE", f"{shell}_complete")
        monkeypatch.setenv("COMP_WORDS", f"jobdispatch {words}")
        monkeypatch.setenv("COMP_CWORD", str(len(f"jobdispatch {words}".split(" ")) - 1))
        ran = invoke()
        monkeypatch.delenv("_JOBDISPATCH_COMPLETE")
        assert ran.code == 0 and not ran.err, ran.err
        return [line for line in ran.out.splitlines() if line]

    return run


@pytest.fixture
def two_jobs(invoke: Invoke, job_file: Callable[..., Path]) -> tuple[str, str]:
    ran = invoke("run", str(job_file(["true"], name="train")), "--poll", "0.05")
    assert ran.code == 0, ran.err
    submitted = invoke("submit", str(job_file(["true"], name="eval")), "--json")
    assert submitted.code == 0, submitted.err
    return ran.out.split()[1], submitted.json()["job"]


def test_a_job_argument_offers_every_id_and_name(
    complete: Callable[..., list[str]], two_jobs: tuple[str, str]
) -> None:
    train, evaluation = two_jobs
    offered = complete("status ")
    assert sorted(offered) == sorted(
        [f"plain,{train}", f"plain,{evaluation}", "plain,eval", "plain,train"]
    )


@pytest.mark.parametrize("command", ["status", "logs", "watch", "cancel", "hold", "supersede"])
def test_what_is_typed_narrows_the_offer(
    complete: Callable[..., list[str]], two_jobs: tuple[str, str], command: str
) -> None:
    train, evaluation = two_jobs
    assert complete(f"{command} {train[:5]}") == [f"plain,{train}"]
    # Ids are random: one may itself begin with "tr" (CI once drew ``trjv5kenjctc``), and then
    # it is rightly offered beside the name.
    ids_typed = [f"plain,{job}" for job in (train, evaluation) if job.startswith("tr")]
    assert sorted(complete(f"{command} tr")) == sorted(["plain,train", *ids_typed])


def test_zsh_shows_each_id_with_its_name(
    complete: Callable[..., list[str]], two_jobs: tuple[str, str]
) -> None:
    train, _ = two_jobs
    assert complete(f"status {train}", shell="zsh") == ["plain", train, "train"]


def test_a_store_named_before_the_command_is_the_one_read(
    complete: Callable[..., list[str]], two_jobs: tuple[str, str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "other-store"
    assert complete(f"--store {elsewhere} status ") == []
    assert not elsewhere.exists()  # completing created nothing


def test_a_store_not_made_yet_offers_nothing_and_stays_unmade(
    complete: Callable[..., list[str]], home: Path
) -> None:
    assert complete("status ") == []
    assert not (home / "state" / "jobdispatch" / "records").exists()
