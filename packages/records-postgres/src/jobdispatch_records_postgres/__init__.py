"""The shared dispatch record store on PostgreSQL: ``PostgresRecords(config)``.

Every supervisor, on every host, talks to one database; the database keys events by job and
revision, checks the owner's fencing token in the same transaction, and judges lease expiry by
its own clock. docs/specs/0013-postgres-store.md holds the details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_records_postgres.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_records_postgres.schema import FORMAT, SCHEMA_VERSION
    from jobdispatch_records_postgres.settings import CONFIG_SCHEMA, Settings
    from jobdispatch_records_postgres.store import PostgresRecords

__all__ = [
    "CONFIG_SCHEMA",
    "FORMAT",
    "SCHEMA_VERSION",
    "PostgresRecords",
    "Settings",
    "__version__",
]

__getattr__, __dir__ = lazy(__name__, __file__)
