"""A job's row in ``jobs`` that disagrees with its stored events (a partial restore, a client
bug, a hand-written statement): the store reads what is stored and names the mismatch, one
record's damage never fails another job's part of a batch, and a record whose row is gone
is still listed, as damaged, instead of vanishing (R13 of the red team's report)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from jobdispatch.errors import RevisionMoved, Unreadable
from jobdispatch.records.store import AppendRequest, ListFilter, Records
from jobdispatch_conformance.records import evidence, make_header, settle
from jobdispatch_records_postgres import PostgresRecords, testing
from psycopg import sql


@contextmanager
def _owner(store: PostgresRecords, *off: str) -> Iterator[psycopg.Connection[Any]]:
    """A transaction of the schema's owner (the server's test role), with the named triggers
    of ``jobs`` off until it commits: what a hand-written session of the owner can do."""
    s = sql.Identifier(store.settings.schema)
    with (
        psycopg.connect(**store.settings.connect_kwargs(), autocommit=True) as conn,
        conn.transaction(),
    ):
        for trigger in off:
            conn.execute(
                sql.SQL("ALTER TABLE {}.jobs DISABLE TRIGGER {}").format(s, sql.Identifier(trigger))
            )
        yield conn
        for trigger in off:
            conn.execute(
                sql.SQL("ALTER TABLE {}.jobs ENABLE TRIGGER {}").format(s, sql.Identifier(trigger))
            )


def _q(store: PostgresRecords, text: str) -> sql.Composed:
    return sql.SQL(text).format(s=sql.Identifier(store.settings.schema))


def _settled_record(store: Records, job: str) -> None:
    """A record of three events, the last of which settles it."""
    store.create(make_header(job), [evidence(1), evidence(2)])
    lease = store.acquire(job, "sup", timedelta(minutes=1))
    store.append(job, [settle()], expect_revision=2, owner=lease)
    store.release(lease)


@pytest.fixture
def stores(new_config: Callable[[], dict[str, Any]]) -> Iterator[tuple[PostgresRecords, ...]]:
    """Two stores on one new schema: one that wrote (and cached) every record, and one that
    reads them fresh, as another process would."""
    config = new_config()
    with PostgresRecords(config) as writer, PostgresRecords(config) as reader:
        yield writer, reader


def test_a_row_past_a_jobs_revision_is_named_by_every_reader(
    stores: tuple[PostgresRecords, PostgresRecords],
) -> None:
    writer, reader = stores
    writer.create(make_header("victim"))
    writer.create(make_header("other"), [evidence(1)])
    assert writer.read("victim").revision == 0  # now cached by the writer
    with _owner(writer) as conn:
        conn.execute(_q(writer, "INSERT INTO {s}.events VALUES ('victim', 1, NULL, '\\x00')"))
    for store in (writer, reader):
        answers = store.read_many(["victim", "other"])
        assert isinstance(answers[0], Unreadable)
        assert str(answers[0]).endswith("record victim is damaged: 1 events stored, revision 0")
        assert answers[0].job == "victim"
        assert answers[1].revision == 1  # type: ignore[union-attr]


def test_a_revision_behind_its_rows_is_named_not_read_short(
    stores: tuple[PostgresRecords, PostgresRecords],
) -> None:
    writer, reader = stores
    _settled_record(writer, "victim")
    with _owner(writer, "guard_job") as conn:
        conn.execute(_q(writer, "UPDATE {s}.jobs SET revision = revision - 2 WHERE job = 'victim'"))
    for store in (writer, reader):
        with pytest.raises(Unreadable, match=r"3 events stored, revision 1$"):
            store.read("victim")


def test_a_settled_flag_that_disagrees_with_the_events_is_named(
    stores: tuple[PostgresRecords, PostgresRecords],
) -> None:
    writer, reader = stores
    writer.create(make_header("pending"))
    _settled_record(writer, "done")
    with _owner(writer) as conn:
        conn.execute(_q(writer, "UPDATE {s}.jobs SET settled = NOT settled"))
    # The listing follows the flag, so it hides nothing: the pending job is listed as settled
    # and reading it says why it is damaged.
    assert list(reader.list(ListFilter(settled=True))) == ["pending"]
    for store in (writer, reader):
        with pytest.raises(Unreadable, match="row says settled, but no event settles it"):
            store.read("pending")
        with pytest.raises(Unreadable, match="row says not settled, but an event settles it"):
            store.read("done")


def test_a_record_whose_row_is_gone_is_listed_and_named(
    stores: tuple[PostgresRecords, PostgresRecords], pg_server: dict[str, Any]
) -> None:
    """Only the superuser can delete a row whose events remain (the foreign key refuses the
    owner, the grants the client role): a partial restore does the same."""
    testing.require_superuser(pg_server)
    writer, reader = stores
    for job in ("a", "victim", "c"):
        _settled_record(writer, job)
    testing.superuser_sql(
        pg_server,
        "SET session_replication_role = replica; "
        f"DELETE FROM {writer.settings.schema}.jobs WHERE job = 'victim';",
    )
    for store in (writer, reader):
        assert list(store.list()) == ["a", "c", "victim"]
        with pytest.raises(Unreadable, match="3 events stored, but its row is gone"):
            store.read("victim")
        assert [type(a).__name__ for a in store.read_many(["a", "victim"])] == [
            "View",
            "Unreadable",
        ]


def test_one_damaged_record_fails_no_other_part_of_a_batch(
    stores: tuple[PostgresRecords, PostgresRecords],
) -> None:
    """A row past the victim's revision made the batch's insert collide on ``events_pkey``,
    failing every part with it (each supervisor round "unavailable" for every job); now the
    victim's part alone is refused and the others commit."""
    writer, _ = stores
    for job in ("a", "victim", "c"):
        writer.create(make_header(job))
    with _owner(writer) as conn:
        conn.execute(_q(writer, "INSERT INTO {s}.events VALUES ('victim', 1, NULL, '\\x00')"))
    answers = writer.append_many(
        [
            AppendRequest(job=j, events=(evidence(1),), expect_revision=0)
            for j in ("a", "victim", "c")
        ]
    )
    assert answers[0] == 1
    assert isinstance(answers[1], RevisionMoved)
    assert "victim is damaged: its events go to revision 1, its row says 0" in str(answers[1])
    assert answers[2] == 1
    assert [writer.read(j).events for j in ("a", "c")] == [(evidence(1),), (evidence(1),)]


def test_a_healthy_record_reads_in_the_same_statements(
    stores: tuple[PostgresRecords, PostgresRecords], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check costs a healthy read no statement: the counting query runs only when a
    row disagrees with its events or a job is not found."""
    writer, reader = stores
    _settled_record(writer, "a")
    statements: list[object] = []
    real_execute = psycopg.Connection.execute

    def counting(self: psycopg.Connection[Any], query: Any, *a: Any, **k: Any) -> Any:
        if query != "":
            statements.append(query)
        return real_execute(self, query, *a, **k)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    reader.read("a")
    monkeypatch.undo()
    assert len(statements) == 3, "the rows, the header, the events"
