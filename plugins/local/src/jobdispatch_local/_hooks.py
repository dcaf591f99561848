"""Registers the ``local`` adapter. Imports nothing of the adapter: its schema is named by
string, and the backend is imported when one is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobdispatch.plugins import Registration, registers


def _local_backend(config: dict[str, Any], token: Callable[[], str] | None = None) -> Any:
    from jobdispatch_local.backend import LocalBackend

    return LocalBackend.from_config(config)


jobdispatch_register_adapters = registers(
    Registration(
        "local",
        _local_backend,
        schema="jobdispatch_local.config:CONFIG_SCHEMA",
        summary="real processes on this machine, one runner per object: the embedded default",
        # The SPI version this adapter was written and tested against: a literal, never the
        # core's constant, or the check at registration could not fail.
        spi="1.1",
    )
)
