"""Registers the ``slurm`` adapter. Cheap to import: the backend is imported only when one is
built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry


def _slurm_backend(config: Mapping[str, Any], token: Any = None) -> Any:
    from jobdispatch_slurm.backend import SlurmBackend

    return SlurmBackend.from_config(config, token)


@hookimpl
def jobdispatch_register_adapters(registry: Registry) -> None:
    from jobdispatch_slurm.config import CONFIG_SCHEMA

    registry.add(
        "slurm",
        _slurm_backend,
        schema=CONFIG_SCHEMA,
        summary="Slurm through sbatch, squeue, sacct and scontrol, on this machine or over SSH",
        # The SPI version this adapter was written and tested against: a literal, never the
        # core's constant, or the check at registration could not fail.
        spi="1.1",
    )
