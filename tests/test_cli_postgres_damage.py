"""Damaged records in a shared PostgreSQL store, through the command (R13 of the red team's
report): each is named by ``list`` and ``status`` with exit 8, and none holds up any other job
of the supervisor that serves the store.

The damage is what a hand-written session of the schema's owner, or a partial restore, leaves:
a row past a pending job's revision, a settled flag on a pending job, a settled job's revision
moved back, a settled job's row deleted with its events left (the last needs the superuser:
the foreign key refuses the owner)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jobdispatch.testing import eventually
from jobdispatch_records_postgres import Settings, testing
from psycopg import sql
from test_cli_end_to_end import Home

UNREADABLE = 8


@pytest.fixture
def pg() -> Iterator[dict[str, Any]]:
    config = {**testing.require(), "schema": testing.new_schema_name("damage")}
    yield config
    testing.drop_schema(config, config["schema"])


@pytest.fixture
def home(tmp_path: Path, pg: dict[str, Any]) -> Iterator[Home]:
    """The command's home, its store the test's schema."""
    h = Home(tmp_path)
    config = tmp_path / "config" / "jobdispatch" / "config.toml"
    config.write_text(
        config.read_text()
        + f'\n[store]\nkind = "postgresql"\ndsn = "{pg["dsn"]}"\n'
        + f'password_file = "{pg["password_file"]}"\nschema = "{pg["schema"]}"\n'
    )
    yield h
    h.close()


def _owner_sql(pg: dict[str, Any], text: str, *off: str) -> None:
    """``text`` run by the schema's owner (the server's test role), with the named triggers
    of ``jobs`` off for the transaction."""
    s = sql.Identifier(pg["schema"])
    settings = Settings.from_config(pg)
    with (
        psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn,
        conn.transaction(),
    ):
        for trigger in off:
            conn.execute(
                sql.SQL("ALTER TABLE {}.jobs DISABLE TRIGGER {}").format(s, sql.SQL(trigger))
            )
        conn.execute(sql.SQL(text).format(s=s))
        for trigger in off:
            conn.execute(
                sql.SQL("ALTER TABLE {}.jobs ENABLE TRIGGER {}").format(s, sql.SQL(trigger))
            )


def _submit(home: Home, name: str) -> str:
    path = home.job_file(f"{name}.toml", f'name = "{name}"\ncommand = ["true"]\n')
    return str(home.json("submit", str(path))["job"])


def _state(home: Home, job: str) -> str | None:
    done = home.run("status", job, "--json")
    return json.loads(done.stdout)["state"] if done.returncode == 0 else None


def _all_succeeded(home: Home, jobs: set[str]) -> bool:
    done = home.run("list", "--json")
    states = {s["job"]: s["state"] for s in json.loads(done.stdout)} if done.returncode == 0 else {}
    return all(states.get(job) == "succeeded" for job in jobs)


def test_one_damaged_record_holds_up_no_job_of_its_supervisor(
    home: Home, pg: dict[str, Any]
) -> None:
    """A row past a pending job's revision made every round's batched append fail on
    ``events_pkey`` ("unavailable ... trying again" for every job of the round): a job
    submitted beside it never started. A settled flag on a pending job hid it from every
    supervisor and from ``list --active`` without a word."""
    stalled = _submit(home, "stalled")
    hidden = _submit(home, "hidden")
    _owner_sql(pg, f"INSERT INTO {{s}}.events VALUES ('{stalled}', 1, NULL, '\\x00')")
    _owner_sql(pg, f"UPDATE {{s}}.jobs SET settled = true WHERE job = '{hidden}'")
    beside = _submit(home, "beside")
    supervisor = home.start("supervise", "--poll", "0.2", log="supervise.log")
    eventually(
        lambda: _state(home, beside) == "succeeded", "the job beside the damaged ones to succeed"
    )
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=60)
    log = (home.root / "supervise.log").read_text()
    assert "UniqueViolation" not in log
    assert f"job {stalled} is left unsupervised" in log
    listed = home.run("list")
    assert listed.returncode == UNREADABLE, (listed.stdout, listed.stderr)
    assert f"record {stalled} is damaged: 1 events stored, revision 0" in listed.stderr
    assert f"record {hidden} is damaged: its row says settled, but no event settles it" in (
        listed.stderr
    )
    for job in (stalled, hidden):
        status = home.run("status", job)
        assert status.returncode == UNREADABLE, (job, status.stdout, status.stderr)
        assert f"record {job} is damaged" in status.stderr


def test_damaged_settled_records_are_named_not_shown_otherwise(
    home: Home, pg: dict[str, Any]
) -> None:
    """A settled job's revision moved back was shown ``ended (uncommitted)`` with exit 0; a
    settled job whose row was deleted (its events left) vanished from ``list``."""
    testing.require_superuser(pg)
    behind, gone, fine = (_submit(home, name) for name in ("behind", "gone", "fine"))
    supervisor = home.start("supervise", "--poll", "0.2", log="supervise.log")
    eventually(lambda: _all_succeeded(home, {behind, gone, fine}), "the jobs to succeed")
    supervisor.send_signal(signal.SIGTERM)
    supervisor.wait(timeout=60)
    _owner_sql(
        pg, f"UPDATE {{s}}.jobs SET revision = revision - 2 WHERE job = '{behind}'", "guard_job"
    )
    testing.superuser_sql(
        pg,
        "SET session_replication_role = replica; "
        f"DELETE FROM {pg['schema']}.jobs WHERE job = '{gone}';",
    )
    listed = home.run("list")
    assert listed.returncode == UNREADABLE, (listed.stdout, listed.stderr)
    assert fine in listed.stdout
    assert f"record {behind} is damaged" in listed.stderr
    assert "events stored, revision" in listed.stderr
    assert f"record {gone} is damaged" in listed.stderr
    assert "but its row is gone" in listed.stderr
    for job in (behind, gone):
        status = home.run("status", job)
        assert status.returncode == UNREADABLE, (job, status.stdout, status.stderr)
    assert home.run("status", fine).returncode == 0
