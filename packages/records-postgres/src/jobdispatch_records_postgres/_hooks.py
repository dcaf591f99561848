"""Registers the ``postgresql`` record store. Imports nothing of the store (nor psycopg): the
store and its schema are named by string and imported when a store is built or checked."""

from __future__ import annotations

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry


@hookimpl
def jobdispatch_register_record_stores(registry: Registry) -> None:
    registry.add(
        "postgresql",
        "jobdispatch_records_postgres.store:PostgresRecords",
        schema="jobdispatch_records_postgres.settings:CONFIG_SCHEMA",
        summary="shared records in one PostgreSQL database, for supervisors on several hosts",
    )
