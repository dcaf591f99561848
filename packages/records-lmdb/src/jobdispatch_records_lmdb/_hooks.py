"""Registers the ``lmdb`` record store. Cheap to import: the store module (and LMDB itself) is
imported only when a store is built."""

from __future__ import annotations

from typing import Any

from jobdispatch.plugins import Registration, registers

#: The configuration the factory accepts: the store's directory, and nothing else.
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["path"],
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "the store's directory (created when missing)",
        },
    },
}


def _lmdb_records(config: dict[str, Any]) -> Any:
    from jobdispatch_records_lmdb.store import LmdbRecords

    return LmdbRecords(config["path"])


jobdispatch_register_record_stores = registers(
    Registration(
        "lmdb",
        _lmdb_records,
        schema=CONFIG_SCHEMA,
        summary="durable records in one LMDB directory, shared by the processes of one host",
    )
)
