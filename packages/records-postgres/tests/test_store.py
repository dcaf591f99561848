"""What the PostgreSQL store promises beyond the conformance suite: its settings and secrets,
its versioned schema, the database's own guards and clock, the per-job answers of a batch,
the indexes behind ``list``, and its registration."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jobdispatch import plugins
from jobdispatch.clock import ManualClock
from jobdispatch.errors import (
    Conflict,
    Invalid,
    LeaseLost,
    NotFound,
    RevisionMoved,
    Unauthorized,
    Unavailable,
    ValidationError,
)
from jobdispatch.records import rules
from jobdispatch.records.store import AppendRequest, Lease
from jobdispatch.testing import eventually
from jobdispatch_conformance.records import decision, evidence, make_header
from jobdispatch_records_postgres import SCHEMA_VERSION, PostgresRecords, Settings
from psycopg import sql

SECRET = "not-the-password-4711"


def _conn(settings: Settings) -> psycopg.Connection[Any]:
    return psycopg.connect(**settings.connect_kwargs(), autocommit=True)


def _db_now(settings: Settings) -> datetime:
    with _conn(settings) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"host": "db", "sslmode": "sometimes"}, "sslmode"),
        ({"host": "db", "port": 0}, "port"),
        ({"host": "db", "pasword_file": "/x"}, "pasword_file"),
        ({"host": "db", "schema": "Has Space"}, "schema"),
        ({"dsn": "mysql://db/x"}, "dsn"),
    ],
)
def test_settings_are_checked_by_their_schema(config: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        Settings.from_config(config)
    assert where in str(info.value)


def test_a_password_comes_from_one_place_only() -> None:
    with pytest.raises(ValidationError):
        Settings.from_config({"host": "db", "password_file": "/p", "password_env": "PG_PW"})


def test_a_dsn_with_a_password_is_refused_without_showing_it() -> None:
    with pytest.raises(Invalid) as info:
        Settings.from_config({"dsn": f"postgresql://me:{SECRET}@db/dispatch"})
    assert "password_file" in str(info.value)
    assert SECRET not in str(info.value)


def test_dsn_fields_and_overrides() -> None:
    settings = Settings.from_config(
        {"dsn": "postgresql://me@db:6000/dispatch?sslmode=verify-full", "port": 6001}
    )
    assert settings.conninfo["host"] == "db"
    assert settings.conninfo["port"] == "6001"
    assert settings.conninfo["sslmode"] == "verify-full"
    assert settings.where() == "postgresql://me@db:6001/dispatch (schema jobdispatch)"
    with pytest.raises(Invalid, match="options"):
        Settings.from_config({"dsn": "postgresql://db/x?options=-csearch_path%3Devil"})
    with pytest.raises(Invalid, match="no host"):
        Settings.from_config({"dbname": "x"})


def test_the_password_is_read_on_use_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "pw"
    secret.write_text(SECRET + "\n")
    settings = Settings.from_config({"host": "db", "password_file": str(secret)})
    assert settings.connect_kwargs()["password"] == SECRET
    secret.write_text("rotated\n")
    assert settings.connect_kwargs()["password"] == "rotated"  # read again, not kept
    assert SECRET not in repr(settings)
    assert "rotated" not in repr(settings)
    secret.unlink()
    with pytest.raises(Invalid, match="password file"):
        settings.connect_kwargs()
    monkeypatch.setenv("PG_SECRET", SECRET)
    from_env = Settings.from_config({"host": "db", "password_env": "PG_SECRET"})
    assert from_env.connect_kwargs()["password"] == SECRET
    assert SECRET not in repr(from_env)
    monkeypatch.delenv("PG_SECRET")
    with pytest.raises(Invalid, match=r"\$PG_SECRET is not set"):
        from_env.connect_kwargs()


def test_a_wrong_password_is_unauthorized_without_showing_it(
    new_config: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    wrong = tmp_path / "pw"
    wrong.write_text(SECRET)
    config = {**new_config(), "password_file": str(wrong), "connect_timeout": 3}
    with pytest.raises(Unauthorized, match="password authentication failed") as info:
        PostgresRecords(config)
    assert SECRET not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_no_server_is_unavailable() -> None:
    # Port 1 on loopback: nothing listens, so the refusal is immediate.
    with pytest.raises(Unavailable, match=r"127\.0\.0\.1:1\b"):
        PostgresRecords({"host": "127.0.0.1", "port": 1, "dbname": "x", "connect_timeout": 1})


# --------------------------------------------------------------------------------- schema


def test_the_schema_is_created_then_reopened(new_config: Callable[[], dict[str, Any]]) -> None:
    config = new_config()
    with PostgresRecords(config) as store:
        store.create(make_header("job-1"))
    with PostgresRecords(config) as again:
        assert list(again.list()) == ["job-1"]
        with _conn(again.settings) as conn:
            row = conn.execute(
                sql.SQL("SELECT value FROM {}.meta WHERE key = 'version'").format(
                    sql.Identifier(again.settings.schema)
                )
            ).fetchone()
        assert row == (str(SCHEMA_VERSION),)


def test_a_newer_schema_is_refused_and_left_alone(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    config = new_config()
    with PostgresRecords(config) as store:
        store.create(make_header("job-1"))
        s = sql.Identifier(store.settings.schema)
        with _conn(store.settings) as conn:
            conn.execute(sql.SQL("UPDATE {}.meta SET value = '99' WHERE key = 'version'").format(s))
    with pytest.raises(
        Invalid, match=rf"version 99, written by a newer version.*up to {SCHEMA_VERSION}"
    ):
        PostgresRecords(config)
    with _conn(store.settings) as conn:
        count = conn.execute(sql.SQL("SELECT count(*) FROM {}.jobs").format(s)).fetchone()
        version = conn.execute(
            sql.SQL("SELECT value FROM {}.meta WHERE key = 'version'").format(s)
        ).fetchone()
    assert (count, version) == ((1,), ("99",))


def test_a_version_1_schema_migrates_to_members_with_its_records(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    # A schema as version 1 left it (no members table, no append-only triggers): opening it
    # adds them and keeps every record and lease.
    config = new_config()
    with PostgresRecords(config) as store:
        store.create(make_header("job-1"), [evidence(1)])
        lease = store.acquire("job-1", "sup", timedelta(minutes=5))
        s = sql.Identifier(store.settings.schema)
        with _conn(store.settings) as conn:
            conn.execute(sql.SQL("DROP TABLE {}.members").format(s))
            conn.execute(sql.SQL("DROP FUNCTION {}.append_only() CASCADE").format(s))
            conn.execute(sql.SQL("UPDATE {}.meta SET value = '1' WHERE key = 'version'").format(s))
    with PostgresRecords(config) as again:
        assert again.read("job-1").events == (evidence(1),)
        assert again.append("job-1", [decision(1)], expect_revision=1, owner=lease) == 2
        assert again.announce("sup", timedelta(minutes=1)) == ("sup",)


def test_a_foreign_schema_is_refused(new_config: Callable[[], dict[str, Any]]) -> None:
    config = new_config()
    settings = Settings.from_config(config)
    with _conn(settings) as conn:
        s = sql.Identifier(settings.schema)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(s))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id int)").format(s))
    with pytest.raises(Invalid, match="no dispatch record store"):
        PostgresRecords(config)


# ------------------------------------------------------------------------- the database


def test_leases_run_on_the_database_clock(new_config: Callable[[], dict[str, Any]]) -> None:
    """With no clock given, a lease's expiry is the database's time plus the ttl, and the
    database says when it has passed."""
    with PostgresRecords(new_config()) as store:
        store.create(make_header("job-1"))
        before = _db_now(store.settings)
        lease = store.acquire("job-1", "a", timedelta(seconds=1))
        after = _db_now(store.settings)
        assert before + timedelta(seconds=1) <= lease.expires <= after + timedelta(seconds=1)
        eventually(
            lambda: _db_now(store.settings),
            f"the database clock past the lease's expiry {lease.expires}",
            holds=lambda now: now > lease.expires,
            every=0.1,
        )
        with pytest.raises(LeaseLost, match="expired"):
            store.append("job-1", [decision(1)], expect_revision=0, owner=lease)
        taken = store.acquire("job-1", "b", timedelta(minutes=5))
        assert taken.token > lease.token


def test_a_client_silent_inside_a_transaction_does_not_hold_its_jobs(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    """A supervisor cut off from the network in the middle of a write leaves its session open
    on the server (a partition sends no reset), inside a transaction that holds its jobs'
    row locks. The server ends such a session after ``stalled_transaction_timeout``, so
    another supervisor takes the job over once the lease expired, not once the network is
    back (it waited for the partition's whole length before, in the multi-host tests)."""
    config = {**new_config(), "stalled_transaction_timeout": 1}
    with PostgresRecords(config) as store:
        store.create(make_header("job-1"))
        lease = store.acquire("job-1", "a", timedelta(seconds=1))
        # A session of the store, as its writes open them, stopped after locking the row.
        silent = psycopg.connect(**store.settings.connect_kwargs(), autocommit=True)
        try:
            silent.execute("BEGIN")
            silent.execute(
                sql.SQL("SELECT 1 FROM {}.jobs WHERE job = %s FOR UPDATE").format(
                    sql.Identifier(store.settings.schema)
                ),
                ["job-1"],
            )
            taken: list[Lease] = []
            other = threading.Thread(
                target=lambda: taken.append(store.acquire("job-1", "b", timedelta(seconds=30))),
                daemon=True,
            )
            other.start()
            other.join(timeout=60)
            assert taken, "the takeover still waits on the silent session's lock"
            assert taken[0].token > lease.token
            # The server ended it. psycopg 3.3 names the server's reason with its own class
            # (IdleInTransactionSessionTimeout); 3.2.1, the lowest the package allows,
            # reports the connection lost, with the server's words.
            ended = (psycopg.errors.IdleInTransactionSessionTimeout, psycopg.OperationalError)
            with pytest.raises(ended, match="idle-in-transaction"):
                silent.execute("SELECT 1")
        finally:
            silent.close()


def test_a_stalled_transaction_timeout_is_checked() -> None:
    with pytest.raises(ValidationError, match="stalled_transaction_timeout"):
        Settings.from_config({"host": "db", "stalled_transaction_timeout": 0})
    settings = Settings.from_config({"host": "db", "stalled_transaction_timeout": 2.5})
    assert "idle_in_transaction_session_timeout=2500" in settings.connect_kwargs()["options"]


def test_the_database_fences_even_when_the_rules_are_skipped(
    new_config: Callable[[], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulator's no-fencing mutant makes ``rules.check_owner`` accept anything: this
    store still refuses, because the database checks the token in the same transaction."""
    clock = ManualClock()
    with PostgresRecords(new_config(), clock) as store:
        store.create(make_header("job-1"))
        old = store.acquire("job-1", "a", timedelta(seconds=10))
        clock.advance(10)
        new = store.acquire("job-1", "b", timedelta(seconds=10))
        monkeypatch.setattr(rules, "check_owner", lambda *args: None)
        with pytest.raises(LeaseLost, match="the database refused"):
            store.append("job-1", [decision(1)], expect_revision=0, owner=old)
        assert store.read("job-1").revision == 0
        # The rules still run for the current owner, and its decision commits.
        assert store.append("job-1", [decision(2)], expect_revision=0, owner=new) == 1


def test_the_database_hands_out_no_token_twice(
    new_config: Callable[[], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    with PostgresRecords(new_config(), clock) as store:
        store.create(make_header("job-1"))
        first = store.acquire("job-1", "a", timedelta(seconds=10))

        def careless(job: str, holder: str, ttl: timedelta, *rest: Any) -> Lease:
            return Lease(job, holder, 1, clock() + ttl)  # ignores who holds it, reuses token 1

        monkeypatch.setattr(rules, "acquired", careless)
        with pytest.raises(Conflict, match="the database refused"):
            store.acquire("job-1", "b", timedelta(seconds=10))
        monkeypatch.undo()
        with pytest.raises(Conflict):
            store.acquire("job-1", "b", timedelta(seconds=10))
        assert store.renew(first, timedelta(seconds=10)).token == first.token


def test_raw_sql_cannot_break_the_promises(new_config: Callable[[], dict[str, Any]]) -> None:
    """Writes that bypass the store entirely meet the same guards."""
    clock = ManualClock()
    with PostgresRecords(new_config(), clock) as store:
        store.create(make_header("job-1"), [evidence(1)])
        lease = store.acquire("job-1", "a", timedelta(hours=1))
        s = sql.Identifier(store.settings.schema)
        insert = sql.SQL(
            "INSERT INTO {}.events (job, revision, token, body) VALUES ('job-1', %s, %s, 'x')"
        ).format(s)
        with _conn(store.settings) as conn:
            conn.execute("SELECT set_config('jobdispatch.now', %s, false)", (str(clock()),))
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute(insert, (1, None))  # revision 1 is taken
            with pytest.raises(psycopg.Error, match="current lease") as fenced:
                conn.execute(insert, (2, lease.token + 1))
            assert fenced.value.sqlstate == "JD001"
            with pytest.raises(psycopg.Error, match="creator"):
                conn.execute(insert, (2, 0))
            with pytest.raises(psycopg.Error, match="go back"):
                conn.execute(
                    sql.SQL(
                        "UPDATE {}.jobs SET last_token = 0, lease_token = NULL, "
                        "holder = NULL, lease_expires = NULL"
                    ).format(s)
                )
            with pytest.raises(psycopg.Error, match="holds the lease"):
                conn.execute(
                    sql.SQL(
                        "UPDATE {}.jobs SET holder = 'b', lease_token = last_token + 1, "
                        "last_token = last_token + 1"
                    ).format(s)
                )
        assert store.read("job-1").revision == 1


# ---------------------------------------------------------------------------- batches


def test_a_batch_answers_each_job(new_config: Callable[[], dict[str, Any]]) -> None:
    with PostgresRecords(new_config(), ManualClock()) as store:
        for job in ("a", "b", "c"):
            store.create(make_header(job))
        lease = store.acquire("c", "sup", timedelta(minutes=1))
        answers = store.append_many(
            [
                AppendRequest(job="a", events=(evidence(1), evidence(2)), expect_revision=0),
                AppendRequest(job="b", events=(evidence(1),), expect_revision=3),
                AppendRequest(job="nobody", events=(evidence(1),), expect_revision=0),
                AppendRequest(job="c", events=(decision(1),), expect_revision=0, owner=lease),
            ]
        )
        assert answers[0] == 2
        assert isinstance(answers[1], RevisionMoved)
        assert isinstance(answers[2], NotFound)
        assert answers[3] == 1
        assert [store.read(j).revision for j in ("a", "b", "c")] == [2, 0, 1]
        leases = store.acquire_many(["a", "nobody", "c"], "sup", timedelta(minutes=1))
        assert isinstance(leases[0], Lease)
        assert isinstance(leases[1], NotFound)
        assert leases[2] == Lease("c", "sup", lease.token, leases[2].expires)  # type: ignore[union-attr]


def test_a_poll_reads_only_what_is_new(
    new_config: Callable[[], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch read is three statements whatever the number of jobs; what this store wrote
    itself is cached as stored (decoded nothing); what another store wrote is fetched past
    the cached prefix and decoded, and nothing else."""
    import jobdispatch.codec

    config = new_config()
    with PostgresRecords(config, ManualClock()) as mine, PostgresRecords(config) as theirs:
        jobs = [f"j{i}" for i in range(50)]
        for job in jobs:
            mine.create(make_header(job), [evidence(0)], idempotency_key=f"key-{job}")
        lease = mine.acquire("j0", "sup", timedelta(minutes=1))
        mine.append("j0", [decision(1), evidence(2)], expect_revision=1, owner=lease)
        theirs.append("j7", [evidence(1)], expect_revision=1)

        decoded: list[int] = []
        statements: list[object] = []
        real_decode = jobdispatch.codec.decode_event
        real_execute = psycopg.Connection.execute

        def counting_decode(*args: Any, **kwargs: Any) -> Any:
            decoded.append(1)
            return real_decode(*args, **kwargs)

        def counting_execute(self: psycopg.Connection[Any], query: Any, *a: Any, **k: Any) -> Any:
            if query != "":  # the pool's check of a connection before lending it
                statements.append(query)
            return real_execute(self, query, *a, **k)

        monkeypatch.setattr(jobdispatch.codec, "decode_event", counting_decode)
        monkeypatch.setattr(psycopg.Connection, "execute", counting_execute)
        views = mine.read_many(jobs)
        monkeypatch.undo()
        assert len(decoded) == 1, "only the event another store appended is decoded"
        assert len(statements) == 2, "the revisions, then the new rows: no header was needed"
        with PostgresRecords(config, cache_events=0) as fresh:
            assert views == fresh.read_many(jobs)
        first = views[0]
        assert not isinstance(first, Exception)
        assert [e.token for e in first.events] == [None, lease.token, None]
        assert first.header.idempotency_key == "key-j0"


# ------------------------------------------------------------------------------- indexes


@pytest.mark.parametrize("settled", [None, True, False])
def test_list_is_served_by_an_index(
    new_config: Callable[[], dict[str, Any]], settled: bool | None
) -> None:
    with PostgresRecords(new_config()) as store:
        query = (
            store._q.list_all
            if settled is None
            else (store._q.list_settled if settled else store._q.list_unsettled)
        )
        with _conn(store.settings) as conn:
            conn.execute("SET enable_seqscan = off")
            plan = "\n".join(
                str(row[0])
                for row in conn.execute(sql.SQL("EXPLAIN ") + query, (0, 256)).fetchall()
            )
    index = {None: "jobs_pkey", True: "jobs_settled", False: "jobs_unsettled"}[settled]
    assert index in plan, plan
    assert "Seq Scan" not in plan, plan


# ------------------------------------------------------------------------------ plugins


def test_registered_as_the_postgresql_store(new_config: Callable[[], dict[str, Any]]) -> None:
    entry = plugins.default().registry("record-store").get("postgresql")
    assert entry.schema is not None
    assert "dsn" in entry.schema["properties"]
    store = entry.factory(new_config())
    try:
        assert isinstance(store, PostgresRecords)
    finally:
        store.close()


# ------------------------------------------------------------------------------- layout


def _relation_sizes(store: PostgresRecords) -> tuple[int, int]:
    """The ``jobs`` table's main relation and its whole (TOAST included), in bytes."""
    table = f"{store.settings.schema}.jobs"
    with _conn(store.settings) as conn:
        row = conn.execute(
            "SELECT pg_relation_size(%s::regclass), pg_total_relation_size(%s::regclass)",
            (table, table),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_row_keeps_a_large_header_out_of_line_once_a_version_4_schema_migrates(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    # A schema as version 4 left it: opening it migrates it to 5, and the records created from
    # then on keep their header out of the row. These headers are 4 KB, which PostgreSQL
    # would compress to about 1.9 KB and keep inline (it toasts only rows over 2 KB, and then
    # only until they fit 2 KB): 40 of them would take ten pages of the main relation, and
    # take one; each reads back whole.
    config = new_config()
    with PostgresRecords(config) as store:
        store.create(make_header("job-old"), [evidence(1)])
        s = sql.Identifier(store.settings.schema)
        with _conn(store.settings) as conn:
            conn.execute(sql.SQL("ALTER TABLE {}.jobs RESET (toast_tuple_target)").format(s))
            conn.execute(sql.SQL("UPDATE {}.meta SET value = '4' WHERE key = 'version'").format(s))
    names = [secrets.token_hex(600) * 3 for _ in range(40)]
    with PostgresRecords(config) as again:
        for i, name in enumerate(names):
            again.create(make_header(f"job-{i}", name=name))
        main, total = _relation_sizes(again)
        assert again.read("job-old").events == (evidence(1),)
        assert [again.read(f"job-{i}").header.spec.name for i in range(40)] == names
    assert main <= 2 * 8192, (main, total)
    assert total > 40 * 1024, (main, total)
