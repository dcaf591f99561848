"""The adapter conformance suite against the real cluster, with a driver that makes the cluster
do real things: preempt through the ``high`` partition, set a node DOWN and back, shorten a time
limit, make the job exit, run out of memory or print, and lose an sbatch reply.

The checks run one after another: a preemptor or a downed node takes a whole node, so two
checks at once would end each other's jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from jobdispatch.spi import Backend
from jobdispatch_conformance.adapter import (
    AdapterSuite,
    DeclarationTests,
    DiscoveryTests,
    Driver,
    LifecycleTests,
    Timeouts,
)
from jobdispatch_slurm import LocalTransport, Settings, SlurmBackend
from jobdispatch_slurm.testing import LossyTransport, SlurmDriver, ssh_transport

pytestmark = pytest.mark.slurm

SLOW = Timeouts(settle=180.0, poll=0.5, quiet=4.0)


class _SlurmFixtures:
    @pytest.fixture
    def driver_factory(self) -> Iterator[Callable[[Backend], Driver]]:
        made: list[SlurmDriver] = []

        def make(backend: Backend) -> Driver:
            driver = SlurmDriver(backend)
            made.append(driver)
            return driver

        yield make
        for driver in made:
            driver.cleanup()

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return SLOW


class TestSlurmLocal(_SlurmFixtures, AdapterSuite):
    """Every area of the contract, commands run on this machine."""

    @pytest.fixture
    def backend_factory(self, slurm_cluster: None) -> Callable[[], Backend]:
        return lambda: SlurmBackend(Settings(), transport=LossyTransport(LocalTransport()))

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "slurm"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {"transport": "local", "command_timeout": 30, "capabilities": {"hold": "yes"}}


@pytest.mark.ssh
class TestSlurmSsh(_SlurmFixtures, LifecycleTests, DiscoveryTests, DeclarationTests):
    """The lifecycle, discovery and declarations again, every command over SSH.

    Each command costs a new SSH session (0.3 to 0.5 s on the loopback sshd), so the checks
    whose SSH path is the same as one kept here are left to the local class.
    """

    @pytest.fixture
    def backend_factory(self, ssh_server: Any) -> Callable[[], Backend]:
        def make() -> Backend:
            transport = ssh_transport(ssh_server)
            return SlurmBackend(Settings(), transport=LossyTransport(transport))

        return make


#: The checks whose SSH path is the same as one kept above: set to None on the SSH class so
#: that pytest collects nothing from them (each SSH command costs a session).
for _check in (
    "test_open_after_stop_has_no_effect",
    "test_stop_affects_one_object_only",
    "test_stop_is_idempotent",
    "test_stop_gated_never_runs",
    "test_find_returns_every_object_of_the_job",
    "test_inspect_agrees_with_find",
    "test_rules_answer_each_rule_in_order",
    "test_rules_agree_with_capabilities",
    "test_spec_capabilities_are_honoured",
    "test_ceased_once_ended",
    "test_identity_weakened_is_text",
    "test_watch_shows_the_job",
):
    setattr(TestSlurmSsh, _check, None)
