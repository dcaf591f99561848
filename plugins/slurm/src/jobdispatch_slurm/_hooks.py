"""Registers the ``slurm`` adapter. Imports nothing of the adapter: the backend and its schema
are named by string and imported when a backend is built or a configuration checked."""

from __future__ import annotations

from jobdispatch.plugins import Registration, registers

jobdispatch_register_adapters = registers(
    Registration(
        "slurm",
        "jobdispatch_slurm.backend:SlurmBackend.from_config",
        schema="jobdispatch_slurm.config:CONFIG_SCHEMA",
        summary="Slurm through sbatch, squeue, sacct and scontrol, on this machine or over SSH",
        # The SPI version this adapter was written and tested against: a literal, never the
        # core's constant, or the check at registration could not fail.
        spi="1.1",
    )
)
