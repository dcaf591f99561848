"""The command on a shared PostgreSQL store: ``--store postgresql://...`` and the ``[store]``
table, their checks, and a job submitted, listed and cancelled through each.

The server is the one tools/postgres/up starts: without it these skip, and fail under
JOBDISPATCH_REQUIRE_SERVICES=1."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch import plugins
from jobdispatch_cli.config import SharedStore, cluster_schema, load_config
from jobdispatch_records_postgres import PostgresRecords, testing

from .test_cli_goodput_cache import settled_record

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)
JobFile = Callable[..., Path]


def _config(home: Path) -> Path:
    return home / "config" / "jobdispatch" / "config.toml"


@pytest.fixture
def pg() -> Iterator[dict[str, Any]]:
    """The test server's settings with a schema of this test's, dropped afterwards."""
    config = {**testing.require(), "schema": testing.new_schema_name("cli")}
    yield config
    testing.drop_schema(config, config["schema"])


def test_a_store_table_is_checked_against_the_stores_schema(invoke: Invoke, home: Path) -> None:
    path = _config(home)
    path.write_text(
        path.read_text()
        + '\n[store]\nkind = "postgresql"\ndsn = "postgresql://me@db/x"\nsslmode = "sometimes"\n'
    )
    ran = invoke("list")
    assert ran.code == 2, (ran.out, ran.err)
    assert "store.sslmode" in ran.err


def test_a_store_url_in_the_config_names_a_shared_store(home: Path) -> None:
    path = _config(home)
    # A top-level key: before the file's first table.
    path.write_text('store = "postgresql://me@db.example.org/dispatch"\n' + path.read_text())
    config = load_config(plugins.default(), path)
    assert config.shared_store is not None
    assert config.shared_store.kind == "postgresql"
    assert config.shared_store.settings == {"dsn": "postgresql://me@db.example.org/dispatch"}


def test_a_dsn_with_a_password_is_refused_by_the_command(invoke: Invoke) -> None:
    ran = invoke("--store", "postgresql://me:hunter2@127.0.0.1:1/x", "list")
    assert ran.code == 2, (ran.out, ran.err)
    assert "password_file" in ran.err
    assert "hunter2" not in ran.err


def test_each_cluster_gets_a_schema_of_its_own() -> None:
    shared = SharedStore("postgresql", {"dsn": "postgresql://db/x"}, "test")
    assert cluster_schema(shared, "local") == "jobdispatch_local"
    assert cluster_schema(shared, "Big-Box") == "jobdispatch_big_box"
    given = SharedStore("postgresql", {"dsn": "postgresql://db/x", "schema": "mine"}, "test")
    assert cluster_schema(given, "local") == "mine"


def test_submit_list_and_cancel_through_the_store_table(
    invoke: Invoke, home: Path, job_file: JobFile, pg: dict[str, Any]
) -> None:
    path = _config(home)
    path.write_text(
        path.read_text()
        + f'\n[store]\nkind = "postgresql"\ndsn = "{pg["dsn"]}"\n'
        + f'password_file = "{pg["password_file"]}"\nschema = "{pg["schema"]}"\n'
    )
    ran = invoke("submit", str(job_file(["sleep", "30"], name="shared")), "--json")
    assert ran.code == 0, ran.err
    job = ran.json()["job"]
    assert "postgresql" in ran.json()["store"]
    listed = invoke("list", "--json")
    assert listed.code == 0, listed.err
    assert [s["job"] for s in listed.json()] == [job]
    # --store URL replaces the DSN and keeps the table's password file and schema.
    again = invoke("--store", pg["dsn"], "status", job, "--json")
    assert again.code == 0, again.err
    assert invoke("cancel", job).code == 0
    clusters = invoke("clusters", "--json").json()["clusters"]
    assert clusters[0]["store"] == f"postgresql schema {pg['schema']}"


def test_goodput_keeps_a_shared_stores_figures_in_a_private_file_that_names_nothing(
    invoke: Invoke, home: Path, pg: dict[str, Any]
) -> None:
    """The figures cache of a PostgreSQL store is a file of its own per schema, 0600 in a
    0700 folder, and neither its name nor its content holds the password, the server or the
    schema (its name is a hash of the server, database and schema)."""
    with PostgresRecords(pg) as store:
        s = settled_record("pg-job")
        store.create(s.header, s.events)
    path = _config(home)
    path.write_text(
        path.read_text()
        + f'\n[store]\nkind = "postgresql"\ndsn = "{pg["dsn"]}"\n'
        + f'password_file = "{pg["password_file"]}"\nschema = "{pg["schema"]}"\n'
    )
    first = invoke("goodput", "--json")
    assert first.code == 0, first.err
    assert [j["job"] for j in first.json()["jobs"]] == ["pg-job"]
    (cache,) = (home / "cache" / "jobdispatch" / "goodput").glob("*.sqlite")
    assert invoke("goodput", "--json").json()["jobs"] == first.json()["jobs"]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    password = Path(pg["password_file"]).read_text().strip()
    content = cache.read_bytes()
    for secret in (password, pg["schema"], pg["dsn"]):
        assert secret not in cache.name and secret.encode() not in content
    assert b"pg-job" in content  # the file is the one that holds the figures


# ------------------------------------------------------------ what a store that cannot serve says
#
# Each case runs the command as its own process (as a user or a service manager would), so
# that everything it prints is seen, log lines of the database driver included. A refused
# login is 6 and a setting that cannot be right is 2, told at once; neither is "unavailable,
# try again" (5), which a service manager would retry for ever. Every case prints one line,
# and never the password.

SECRET = "not-the-password-4711"


def _jobdispatch(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    script = Path(sys.executable).parent / "jobdispatch"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "jobdispatch_cli.main"]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JOBDISPATCH_")}
    environment.update(
        XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"), COLUMNS="400"
    )
    environment.update(env or {})
    done = subprocess.run(
        [*command, *args], check=False, env=environment, capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stderr + done.stdout


def _store_table(home: Path, **settings: str) -> None:
    path = _config(home)
    lines = "".join(f'{key} = "{value}"\n' for key, value in settings.items())
    path.write_text(path.read_text() + '\n[store]\nkind = "postgresql"\n' + lines)


def _one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert SECRET not in output
    return lines[0]


def test_a_wrong_password_is_refused_credentials(home: Path, pg: dict[str, Any]) -> None:
    wrong = home / "wrong-password"
    wrong.write_text(SECRET + "\n")
    _store_table(home, password_file=str(wrong), schema=pg["schema"])
    code, out = _jobdispatch(home, "--store", pg["dsn"], "list")
    assert code == 6, out
    assert "password authentication failed" in _one_line(out)


def test_a_wrong_password_in_a_variable_is_refused_credentials(
    home: Path, pg: dict[str, Any]
) -> None:
    _store_table(home, password_env="JD_TEST_PW", schema=pg["schema"])
    code, out = _jobdispatch(home, "--store", pg["dsn"], "list", env={"JD_TEST_PW": SECRET})
    assert code == 6, out
    assert "password authentication failed" in _one_line(out)


def test_no_password_at_all_is_refused_credentials(home: Path, pg: dict[str, Any]) -> None:
    code, out = _jobdispatch(home, "--store", pg["dsn"], "list", env={"PGPASSFILE": "/nonexistent"})
    assert code == 6, out
    assert "no password supplied" in _one_line(out)


def test_a_missing_password_file_is_bad_input(home: Path, pg: dict[str, Any]) -> None:
    missing = home / "no-such-password"
    _store_table(home, password_file=str(missing))
    code, out = _jobdispatch(home, "--store", pg["dsn"], "list")
    assert code == 2, out
    assert str(missing) in _one_line(out)


def test_an_unset_password_variable_is_bad_input(home: Path, pg: dict[str, Any]) -> None:
    _store_table(home, password_env="JD_TEST_UNSET_PW")
    code, out = _jobdispatch(home, "--store", pg["dsn"], "list")
    assert code == 2, out
    assert "$JD_TEST_UNSET_PW is not set" in _one_line(out)


@pytest.mark.parametrize(
    ("suffix", "named"),
    [(":99999/x", "port '99999'"), (":abc/x", "abc"), (":1/x?sslmode=bogus", "sslmode 'bogus'")],
)
def test_a_url_that_cannot_be_right_is_bad_input(home: Path, suffix: str, named: str) -> None:
    code, out = _jobdispatch(home, "--store", f"postgresql://me@127.0.0.1{suffix}", "list")
    assert code == 2, out
    assert named in _one_line(out)


def test_an_unreachable_store_is_told_in_one_line(home: Path) -> None:
    # Port 1 on loopback: nothing listens. The driver's own warnings (one per attempt) stay out.
    code, out = _jobdispatch(home, "--store", "postgresql://me@127.0.0.1:1/x", "list")
    assert code == 5, out
    assert "127.0.0.1:1" in _one_line(out)


def test_the_owner_grants_a_role_that_every_command_then_uses(
    invoke: Invoke, home: Path, job_file: JobFile, pg: dict[str, Any]
) -> None:
    """Two roles (spec 0013 D3): the client role cannot create the store; the owner creates
    it and grants the client role its rights with `jobdispatch store grant`; every command then
    works as the client role."""
    testing.require_superuser(pg)
    path = _config(home)
    base = path.read_text()
    owner = home / "owner.toml"
    owner.write_text(
        base + f'\n[store]\nkind = "postgresql"\ndsn = "{pg["dsn"]}"\n'
        f'password_file = "{pg["password_file"]}"\nschema = "{pg["schema"]}"\n'
    )
    with testing.client_role(pg) as client:
        path.write_text(
            base + f'\n[store]\nkind = "postgresql"\ndsn = "{pg["dsn"]}"\n'
            f'user = "{client["user"]}"\npassword_file = "{client["password_file"]}"\n'
            f'schema = "{pg["schema"]}"\n'
        )
        refused = invoke("list")
        assert refused.code == 2, (refused.out, refused.err)
        assert "may not create one" in refused.err
        assert "jobdispatch store migrate" in refused.err
        migrated = invoke("--config", str(owner), "store", "migrate")
        assert migrated.code == 0, migrated.err
        assert "is ready" in migrated.out
        granted = invoke("--config", str(owner), "store", "grant", client["user"])
        assert granted.code == 0, granted.err
        assert f"granted {client['user']}" in granted.out
        submitted = invoke("submit", str(job_file(["sleep", "30"], name="shared")), "--json")
        assert submitted.code == 0, submitted.err
        job = submitted.json()["job"]
        assert [s["job"] for s in invoke("list", "--json").json()] == [job]
        assert invoke("cancel", job).code == 0
        not_owner = invoke("store", "grant", client["user"])
        assert not_owner.code == 2
        assert "does not own the store's schema" in not_owner.err


def test_store_commands_refuse_an_lmdb_store(invoke: Invoke, home: Path) -> None:
    ran = invoke("--store", str(home / "records"), "store", "migrate")
    assert ran.code == 4, (ran.out, ran.err)
    assert "LMDB directory" in ran.err
