"""The command on a shared PostgreSQL store: ``--store postgresql://...`` and the ``[store]``
table, their checks, and a job submitted, listed and cancelled through each.

The server is the one tools/postgres/up starts: without it these skip, and fail under
JOBDISPATCH_REQUIRE_SERVICES=1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch import plugins
from jobdispatch_cli.config import SharedStore, cluster_schema, load_config
from jobdispatch_records_postgres import testing

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
