"""The store's tables, created and migrated by version.

``meta`` holds the marker and the schema version. :func:`ensure` creates the tables in an empty
schema, migrates an older version step by step (each step and the version bump in one
transaction, serialized across processes by an advisory lock), and refuses a schema written by
a newer version, changing nothing.

Two roles (spec 0013 D3): the role that creates and migrates the schema owns it, and may change
anything in it, triggers included; supervisors and the CLI connect as roles that were given only
what the store's operations need (:func:`grant`: read everything, append events, create jobs,
move a job's revision, settled flag and lease, and keep the membership table). A role without
ownership never migrates: it finds the schema at this version, or is told to have its owner
migrate it.

What the database itself enforces, whatever a client sends (so that a store bug, or a client
that skips a check, still cannot break the promises):

* ``events`` is keyed by (job, revision): two appends at one revision cannot both commit.
* ``guard_event``: an event with a lease token (a decision) commits only while that token is the
  job's current lease, unexpired at the transaction's time, in the same transaction.
* ``guard_job``: revisions never go back; ``last_token`` never goes back; a new lease's token is
  greater than every token before it, and none is handed out while another holder's lease is
  unexpired; an expired lease is not renewed.
* ``append_only``: events are never changed or deleted, and records never deleted (a trigger
  refuses ``UPDATE``, ``DELETE`` and ``TRUNCATE`` of ``events`` and ``DELETE`` and ``TRUNCATE``
  of ``jobs``, whoever sends them).
* Lease times are the database's: :func:`pin_now` fixes the transaction's instant from
  ``clock_timestamp()`` (a test may pin one of its own instead, see
  :class:`~jobdispatch_records_postgres.PostgresRecords`' ``clock``), and every check above
  reads it back with ``store_now()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from jobdispatch.errors import Invalid, NotFound
from psycopg import sql

__all__ = ["FORMAT", "SCHEMA_VERSION", "ensure", "grant", "owns"]

#: The marker in ``meta``: a schema without it is not a dispatch store.
FORMAT = "jobdispatch-records"
#: The layout version this code writes and reads. A newer one is refused, never guessed at.
SCHEMA_VERSION = 5
#: The advisory lock (per database) under which schemas are created and migrated.
_LOCK = 0x6A6F6264  # "jobd"

_V1 = """
CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE {s}.jobs (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job text NOT NULL UNIQUE,
    idempotency_key text UNIQUE,
    header bytea NOT NULL,
    revision bigint NOT NULL DEFAULT 0 CHECK (revision >= 0),
    settled boolean NOT NULL DEFAULT false,
    holder text,
    lease_token bigint,
    lease_expires timestamptz,
    last_token bigint NOT NULL DEFAULT 0,
    CHECK ((holder IS NULL) = (lease_token IS NULL) AND (holder IS NULL) = (lease_expires IS NULL)),
    CHECK (lease_token IS NULL OR (lease_token >= 1 AND lease_token <= last_token))
);
-- list(settled=...) walks one of these in creation order; list() walks the primary key.
CREATE INDEX jobs_unsettled ON {s}.jobs (seq) WHERE NOT settled;
CREATE INDEX jobs_settled ON {s}.jobs (seq) WHERE settled;
CREATE TABLE {s}.events (
    job text NOT NULL REFERENCES {s}.jobs (job),
    revision bigint NOT NULL CHECK (revision >= 1),
    token bigint,
    body bytea NOT NULL,
    PRIMARY KEY (job, revision)
);

CREATE FUNCTION {s}.pin_now(pinned timestamptz) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT set_config('jobdispatch.now', coalesce(pinned, clock_timestamp())::text, true)
        ::timestamptz
$$;
CREATE FUNCTION {s}.store_now() RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('jobdispatch.now', true), '')::timestamptz,
                    clock_timestamp())
$$;

CREATE FUNCTION {s}.guard_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j {s}.jobs%ROWTYPE;
BEGIN
    IF NEW.token IS NULL THEN
        RETURN NEW;  -- evidence and controls need no lease
    END IF;
    SELECT * INTO j FROM {s}.jobs WHERE job = NEW.job;
    IF NEW.token = 0 THEN
        -- The creator's token: only on the events create commits with the job's row.
        IF (SELECT xmin::text FROM {s}.jobs WHERE job = NEW.job)
                = (pg_current_xact_id()::text::numeric % 4294967296)::text THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'job %: token 0 (the creator''s) on an event appended after create',
            NEW.job USING ERRCODE = 'JD001';
    END IF;
    IF j.lease_token IS DISTINCT FROM NEW.token OR NOT j.lease_expires > {s}.store_now() THEN
        RAISE EXCEPTION 'job %: a decision under token % but the current lease is % until %',
            NEW.job, NEW.token, j.lease_token, j.lease_expires
            USING ERRCODE = 'JD001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER guard_event BEFORE INSERT ON {s}.events
    FOR EACH ROW EXECUTE FUNCTION {s}.guard_event();

CREATE FUNCTION {s}.guard_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revision < OLD.revision THEN
        RAISE EXCEPTION 'job %: revision % would go back to %', OLD.job, OLD.revision,
            NEW.revision USING ERRCODE = 'JD002';
    END IF;
    IF NEW.last_token < OLD.last_token THEN
        RAISE EXCEPTION 'job %: last token % would go back to %', OLD.job, OLD.last_token,
            NEW.last_token USING ERRCODE = 'JD002';
    END IF;
    -- A new lease: a new token, or a new holder (a token names one holder, ever).
    IF NEW.lease_token IS NOT NULL AND (NEW.lease_token IS DISTINCT FROM OLD.lease_token
                                        OR NEW.holder IS DISTINCT FROM OLD.holder) THEN
        IF NEW.lease_token <= OLD.last_token THEN
            RAISE EXCEPTION 'job %: new lease token % is not past the last one, %', OLD.job,
                NEW.lease_token, OLD.last_token USING ERRCODE = 'JD002';
        END IF;
        IF OLD.holder IS NOT NULL AND OLD.lease_expires > {s}.store_now() THEN
            RAISE EXCEPTION 'job %: % holds the lease until %', OLD.job, OLD.holder,
                OLD.lease_expires USING ERRCODE = 'JD002';
        END IF;
    ELSIF NEW.lease_token IS NOT NULL AND NEW.lease_expires IS DISTINCT FROM OLD.lease_expires
          AND NOT OLD.lease_expires > {s}.store_now() THEN
        RAISE EXCEPTION 'job %: the lease under token % expired at %, so cannot be renewed',
            OLD.job, OLD.lease_token, OLD.lease_expires USING ERRCODE = 'JD002';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER guard_job BEFORE UPDATE ON {s}.jobs
    FOR EACH ROW EXECUTE FUNCTION {s}.guard_job();
"""

#: Version 2 adds the supervisors' membership (spec 0004 D7): who announced itself until when.
#: Nothing else changes, so a version-1 schema migrates in place with its records untouched.
_V2 = """
CREATE TABLE {s}.members (member text PRIMARY KEY, expires timestamptz NOT NULL);
"""

#: Version 3 makes the record append-only for every role, the owner's included while it keeps
#: the triggers: an event once committed is never changed or deleted, and a record never
#: deleted. Without these, the grants alone would bind the supervisors' role but not a
#: mistaken statement of the owner's.
_V3 = """
CREATE FUNCTION {s}.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the store''s % is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'JD003';
END $$;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {s}.events
    FOR EACH ROW EXECUTE FUNCTION {s}.append_only();
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {s}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.append_only();
CREATE TRIGGER append_only BEFORE DELETE ON {s}.jobs
    FOR EACH ROW EXECUTE FUNCTION {s}.append_only();
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {s}.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.append_only();
"""

#: Version 4 keeps what each member measured of its latest poll beside its announcement (the
#: metrics endpoint reads them from the shared table, never from one process): two nullable
#: columns, NULL when not measured. Records are untouched.
_V4 = """
ALTER TABLE {s}.members ADD COLUMN poll_seconds double precision,
    ADD COLUMN commit_seconds double precision;
"""

#: Version 5 keeps a job row's header (its spec and plan) out of line, in the table's TOAST
#: relation, whenever PostgreSQL toasts the row at all (a row over 2 KB: a header with a plan's
#: capability table and rules mostly is). By default it would compress such a header and keep
#: it inline, about a kilobyte; out of line the row is about a hundred bytes. Every poll moves
#: rows (a lease renewed, a revision moved by evidence), and each move writes a new version of
#: the whole row: at 10,000 jobs recording progress in one poll, copying a kilobyte per job
#: was most of that commit's time. A row is laid out so when it is inserted: records created
#: before the migration keep their layout, correct and only slower to move. Records are
#: untouched.
_V5 = """
ALTER TABLE {s}.jobs SET (toast_tuple_target = 128);
"""

#: Migrations: ``_STEPS[v]`` takes a schema at version ``v`` to ``v + 1``. Version 0 is an
#: empty schema.
_STEPS: dict[int, str] = {0: _V1, 1: _V2, 2: _V3, 3: _V4, 4: _V5}

#: What a supervisor's (or any client's) role may do, and nothing more: exactly the
#: statements of :class:`~jobdispatch_records_postgres.PostgresRecords`. Events: read and
#: append, never change. Jobs: read, create, and move the revision, the settled flag and the
#: lease (the header, id and key of a record are never changed; ``guard_job`` keeps what may
#: move from going back). Members: the whole table, which only spreads the jobs. No
#: ``TRUNCATE``, ``REFERENCES`` or ``TRIGGER``, and, not owning anything, no ``ALTER`` or
#: ``DROP``: the guards bind this role whatever it sends.
_GRANTS = """
GRANT USAGE ON SCHEMA {s} TO {r};
GRANT SELECT ON {s}.meta TO {r};
GRANT SELECT, INSERT ON {s}.events TO {r};
GRANT SELECT, INSERT (job, idempotency_key, header, revision, settled) ON {s}.jobs TO {r};
GRANT UPDATE (revision, settled, holder, lease_token, lease_expires, last_token)
    ON {s}.jobs TO {r};
GRANT SELECT, INSERT, UPDATE (expires, poll_seconds, commit_seconds), DELETE
    ON {s}.members TO {r};
GRANT EXECUTE ON FUNCTION {s}.pin_now(timestamptz), {s}.store_now() TO {r};
"""
#: The prefix of the ``meta`` keys that remember the roles :func:`grant` was given, so that a
#: migration which adds a table gives it to them too.
_GRANTED = "granted:"


def ensure(
    conn: psycopg.Connection[Any],
    schema: str,
    where: Callable[[], str],
    *,
    readonly: bool = False,
) -> int:
    """Create or migrate ``schema`` to :data:`SCHEMA_VERSION`; returns the version found.

    Invalid (naming both versions) for a schema written by a newer version, or one that holds
    tables but no dispatch marker; nothing is changed then. A schema at this version is left
    as it is, whoever connects; an older one is migrated only by a role that owns it (Invalid,
    naming the owner, for any other), and the roles :func:`grant` was given get the new
    version's rights in the same transaction.
    """
    s = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        found = _version(conn, schema, where)
        if found > SCHEMA_VERSION:
            msg = (
                f"{where()}: the store's schema is version {found}, written by a newer "
                f"version of jobdispatch-records-postgres (this one reads up to "
                f"{SCHEMA_VERSION}); upgrade it. Nothing was changed"
            )
            raise Invalid(msg)
        if found == SCHEMA_VERSION:
            return found
        if readonly and found == 0:
            msg = f"{where()}: there is no store in this schema (opened read-only: none was made)"
            raise NotFound(msg)
        if readonly:
            msg = (
                f"{where()}: the store's schema is version {found} and this version reads "
                f"{SCHEMA_VERSION}; opened read-only, so it was not migrated: run `jobdispatch "
                "store migrate` with the owner's credentials"
            )
            raise Invalid(msg)
        owner = _owner(conn, schema)
        if owner is not None and not owns(conn, schema):
            msg = (
                f"{where()}: the store's schema is version {found} and this version of "
                f"jobdispatch-records-postgres needs {SCHEMA_VERSION}; only its owner, role "
                f"{owner}, may migrate it: run `jobdispatch store migrate` with the owner's "
                "credentials. Nothing was changed"
            )
            raise Invalid(msg)
        try:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
        except psycopg.errors.InsufficientPrivilege as exc:
            msg = (
                f"{where()}: there is no store in this schema yet, and this role may not create "
                f"one ({exc.diag.message_primary}); create it with the credentials of the role "
                "that is to own it: `jobdispatch store migrate`"
            )
            raise Invalid(msg) from None
        for version in range(found, SCHEMA_VERSION):
            conn.execute(sql.SQL(_STEPS[version]).format(s=s))
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.meta VALUES ('format', %s), ('version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ).format(s),
                (FORMAT, str(version + 1)),
            )
        rows = conn.execute(
            sql.SQL("SELECT key FROM {}.meta WHERE starts_with(key, %s)").format(s), (_GRANTED,)
        ).fetchall()
        for (key,) in rows:
            _grant(conn, schema, str(key).removeprefix(_GRANTED))
    return found


def owns(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Whether the connected role has its owner's rights over ``schema`` or its tables (as
    the owner, a member of the owner's role, or a superuser): such a role may alter or drop
    the guards, so they bind it only while it leaves them in place."""
    row = conn.execute(
        "SELECT bool_or(pg_has_role(current_user, owner, 'USAGE')) FROM ("
        " SELECT nspowner AS owner FROM pg_namespace WHERE nspname = %s"
        " UNION ALL SELECT relowner FROM pg_class WHERE relnamespace ="
        " (SELECT oid FROM pg_namespace WHERE nspname = %s)) AS o",
        (schema, schema),
    ).fetchone()
    return bool(row and row[0])


def grant(conn: psycopg.Connection[Any], schema: str, role: str) -> None:
    """Give ``role`` a client's rights on ``schema`` (:data:`_GRANTS`), and remember it, so
    that later migrations give it theirs. Run by the schema's owner, at its current version."""
    s = sql.Identifier(schema)
    with conn.transaction():
        _grant(conn, schema, role)
        conn.execute(
            sql.SQL("INSERT INTO {}.meta VALUES (%s, 'client') ON CONFLICT DO NOTHING").format(s),
            (_GRANTED + role,),
        )


def _grant(conn: psycopg.Connection[Any], schema: str, role: str) -> None:
    conn.execute(sql.SQL(_GRANTS).format(s=sql.Identifier(schema), r=sql.Identifier(role)))


def _owner(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """The role that owns ``schema``; None when there is no such schema."""
    row = conn.execute(
        "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    return str(row[0]) if row else None


def _version(conn: psycopg.Connection[Any], schema: str, where: Callable[[], str]) -> int:
    """The version the schema holds: 0 when it is missing or empty."""
    row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    tables = int(row[0]) if row else 0
    if not tables:
        return 0
    has_meta = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'meta'", (schema,)
    ).fetchone()
    marker: dict[str, str] = {}
    if has_meta:
        rows = conn.execute(
            sql.SQL("SELECT key, value FROM {}.meta").format(sql.Identifier(schema))
        ).fetchall()
        marker = {str(k): str(v) for k, v in rows}
    if marker.get("format") != FORMAT:
        msg = (
            f"{where()}: the schema holds {tables} tables but no dispatch record store; give "
            "another schema (the store's setting `schema`). Nothing was changed"
        )
        raise Invalid(msg)
    try:
        return int(marker.get("version", ""))
    except ValueError:
        msg = f"{where()}: the store's schema version {marker.get('version')!r} is not a number"
        raise Invalid(msg) from None
