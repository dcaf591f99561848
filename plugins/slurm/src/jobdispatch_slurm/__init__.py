"""The dispatch Slurm adapter: Slurm jobs as dispatch objects, over the local shell or SSH.

``SlurmBackend`` implements the adapter SPI; see docs/specs/0008-slurm-adapter.md. SSH goes
through the system's OpenSSH client (a subprocess), so no SSH library is imported at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_slurm.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_slurm.backend import SlurmBackend, build_transport
    from jobdispatch_slurm.config import CONFIG_SCHEMA, Settings
    from jobdispatch_slurm.transport import (
        CountingTransport,
        Interrupted,
        LocalTransport,
        Result,
        SshTransport,
        Transport,
    )

__all__ = [
    "CONFIG_SCHEMA",
    "CountingTransport",
    "Interrupted",
    "LocalTransport",
    "Result",
    "Settings",
    "SlurmBackend",
    "SshTransport",
    "Transport",
    "__version__",
    "build_transport",
]

__getattr__, __dir__ = lazy(__name__, __file__)
