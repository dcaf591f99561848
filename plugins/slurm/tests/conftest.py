"""Shared fixtures of the Slurm adapter's tests: the saved outputs of a real 22.05.8 cluster, and
the gate for tests that need the real cluster (or the loopback sshd).

Real-cluster tests skip with the reason when the service is not up, except under
``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI starts the services first), where they fail instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from jobdispatch.spi import ObjectRef
from jobdispatch_slurm.config import SshSettings

if TYPE_CHECKING:
    from jobdispatch_slurm import SlurmBackend

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """Read one saved output by file name."""
    return lambda name: (FIXTURES / name).read_text()


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[None]:
    """The real cluster is up; afterwards, nodes a test set DOWN are resumed and helper jobs
    cancelled, whatever the tests did."""
    from jobdispatch_slurm import testing

    testing.require(testing.cluster_problem())
    try:
        yield
    finally:
        testing.cancel_helpers()
        testing.resume_nodes()


@pytest.fixture(scope="session")
def ssh_server(slurm_cluster: None) -> SshSettings:
    """The loopback sshd is up; its settings."""
    from jobdispatch_slurm import testing

    testing.require(testing.ssh_problem())
    settings = testing.ssh_settings()
    assert settings is not None, "tools/ssh/up's exports are missing"
    return settings


@pytest.fixture
def local(slurm_cluster: None) -> Iterator[SlurmBackend]:
    """The adapter on the real cluster, run from this machine; the objects a test lists in its
    ``started`` are stopped afterwards, and the adapter closed."""
    from jobdispatch_slurm import Settings, SlurmBackend
    from jobdispatch_slurm.testing import stop_quietly

    backend = SlurmBackend(Settings())
    backend.started: list[ObjectRef] = []  # type: ignore[attr-defined,misc]
    yield backend
    stop_quietly(backend, backend.started)  # type: ignore[attr-defined]
    backend.close()
