"""The plugins that ship with the core, registered through the same manager as everyone else's."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobdispatch.plugins import Registration, registers

if TYPE_CHECKING:  # imported only when a store or backend is made
    from jobdispatch.memory import MemoryBackend
    from jobdispatch.records.memory import MemoryRecords


def _memory_backend(
    config: dict[str, Any], token: Callable[[], str] | None = None
) -> MemoryBackend:
    from jobdispatch.memory import MemoryBackend

    return MemoryBackend.from_config(config)


def _memory_records(config: dict[str, Any]) -> MemoryRecords:
    from jobdispatch.records.memory import MemoryRecords

    return MemoryRecords()


jobdispatch_register_adapters = registers(
    Registration(
        "memory",
        _memory_backend,
        schema="jobdispatch.memory.config:CONFIG_SCHEMA",
        summary="an in-process scheduler in two shapes (Slurm-like, Kubeflow-like), for tests",
    )
)

jobdispatch_register_record_stores = registers(
    Registration(
        "memory",
        _memory_records,
        schema={"type": "object", "additionalProperties": False, "properties": {}},
        summary="records held in this process only, for tests and the tutorial",
    )
)
