"""A store value that is neither a directory nor a store URL is refused, wherever it is given.

A mistyped scheme used to be taken as a folder of that name (``postgresq:/``) in the working
directory: the job was recorded there, ``submit`` said so, and no supervisor ever saw it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch_cli.config import POSTGRES_SCHEMES, store_value_problem

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)
JobFile = Callable[..., Path]

MISTYPED = [
    "postgresq://dispatch:hunter2@db.example.org/dispatch",
    "pg://dispatch:hunter2@db.example.org/dispatch",
    "mysql://dispatch:hunter2@db.example.org/dispatch",
    "https://dispatch:hunter2@db.example.org/dispatch",
    "POSTGRESQL://dispatch:hunter2@db.example.org/dispatch",
]


def _created(root: Path) -> list[str]:
    """Everything under ``root`` but the job file and the test's own config and state."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not {"config", "state"} & set(p.relative_to(root).parts) and p.suffix != ".toml"
    )


def _refused(ran: Any, scheme: str) -> None:
    assert ran.code == 2, (ran.out, ran.err)
    assert f"'{scheme}://' URL" in ran.err
    assert "postgresql://" in ran.err and "postgres://" in ran.err  # the schemes that are
    assert "hunter2" not in ran.err + ran.out  # a URL may carry a password: never echoed
    assert "submitted" not in ran.out


@pytest.mark.parametrize("url", MISTYPED)
def test_a_mistyped_store_url_is_refused_and_creates_nothing(
    invoke: Invoke, job_file: JobFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = str(job_file(["true"]))
    scheme = url.split("://", maxsplit=1)[0]
    _refused(invoke("--store", url, "submit", spec), scheme)
    _refused(invoke("submit", spec, "--store", url), scheme)
    _refused(invoke("--store", url, "list"), scheme)
    monkeypatch.setenv("JOBDISPATCH_STORE", url)
    _refused(invoke("submit", spec), scheme)
    assert _created(tmp_path) == []


def test_a_mistyped_store_url_in_the_config_is_refused_naming_the_line(
    invoke: Invoke, job_file: JobFile, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(home)
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text('default_cluster = "local"\nstore = "' + MISTYPED[1] + '"\n')
    ran = invoke("submit", str(job_file(["true"])))
    _refused(ran, "pg")
    assert f"{config}:2: store:" in ran.err
    assert _created(home) == []


def test_an_empty_store_is_refused_not_read_as_the_working_directory(
    invoke: Invoke, job_file: JobFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = invoke("--store", "", "submit", str(job_file(["true"])))
    assert ran.code == 2, (ran.out, ran.err)
    assert "--store or $JOBDISPATCH_STORE is empty" in ran.err
    assert _created(tmp_path) == []


def test_a_directory_and_a_postgresql_url_are_still_stores(
    invoke: Invoke, job_file: JobFile, tmp_path: Path
) -> None:
    ran = invoke("--store", str(tmp_path / "records"), "submit", str(job_file(["true"])))
    assert ran.code == 0, ran.err
    assert (tmp_path / "records" / "data.mdb").is_file()
    for scheme in POSTGRES_SCHEMES:
        assert store_value_problem(scheme + "dispatch@db.example.org/dispatch") is None


@given(st.text(min_size=1), st.text(), st.text())
def test_every_value_with_a_url_mark_is_a_supported_url_or_refused(
    before: str, scheme: str, rest: str
) -> None:
    value = before + scheme + "://" + rest
    problem = store_value_problem(value)
    assert (problem is None) == value.startswith(POSTGRES_SCHEMES)
    if problem is not None:
        assert "postgresql://" in problem


@given(st.text(min_size=1).filter(lambda s: "://" not in s))
def test_every_nonempty_value_without_a_url_mark_is_a_directory(value: str) -> None:
    assert store_value_problem(value) is None
