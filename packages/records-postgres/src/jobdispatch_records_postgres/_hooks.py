"""Registers the ``postgresql`` record store. Cheap to import: psycopg and the store module are
imported only when a store is built."""

from __future__ import annotations

from typing import Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry

from jobdispatch_records_postgres.settings import CONFIG_SCHEMA


def _postgres_records(config: dict[str, Any]) -> Any:
    from jobdispatch_records_postgres.store import PostgresRecords

    return PostgresRecords(config)


@hookimpl
def jobdispatch_register_record_stores(registry: Registry) -> None:
    registry.add(
        "postgresql",
        _postgres_records,
        schema=CONFIG_SCHEMA,
        summary="shared records in one PostgreSQL database, for supervisors on several hosts",
    )
