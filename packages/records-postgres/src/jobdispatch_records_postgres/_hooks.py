"""Registers the ``postgresql`` record store. Imports nothing of the store (nor psycopg): the
store and its schema are named by string and imported when a store is built or checked."""

from __future__ import annotations

from jobdispatch.plugins import Registration, registers

jobdispatch_register_record_stores = registers(
    Registration(
        "postgresql",
        "jobdispatch_records_postgres.store:PostgresRecords",
        schema="jobdispatch_records_postgres.settings:CONFIG_SCHEMA",
        summary="shared records in one PostgreSQL database, for supervisors on several hosts",
    )
)
