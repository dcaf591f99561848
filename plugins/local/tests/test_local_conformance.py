"""The adapter conformance suite on the local adapter, with a driver that makes this machine do
real things: preempt through the runner (SIGTERM, then SIGKILL), shorten a time limit, have a
rank exit with a code, kill the runner as a lost node, run a rank out of memory under a cgroup
limit where one can be written, write output, and lose a Start reply."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.spi import Backend
from jobdispatch_conformance.adapter import AdapterSuite, Driver, Timeouts
from jobdispatch_local import cgroups
from jobdispatch_local.driver import LocalDriver
from jobdispatch_local.testing import Puppets, make_backend, shut_down

#: Real processes: a settle long enough for a loaded two-core CI machine, a short quiet spell.
LOCAL = Timeouts(settle=30.0, poll=0.02, quiet=0.4)

_MEMORY, _ = cgroups.probe()


class TestLocalContract(AdapterSuite):
    """Every area of the contract on real processes."""

    @pytest.fixture
    def state(self, tmp_path: Path) -> Iterator[Path]:
        path = tmp_path / "state"
        yield path
        leftovers = shut_down(path)
        assert not leftovers, f"processes outlived the suite's clean-up: {leftovers}"

    @pytest.fixture
    def backend_factory(self, state: Path) -> Callable[[], Backend]:
        # A memory limit where a controller is writable, so the OOM ending can be driven.
        extra: dict[str, Any] = {"memory_limit": "48M"} if _MEMORY is not None else {}
        # Declared GPU indices, so the dry-run check can hand each node two of them.
        return lambda: make_backend(state, gpus=[0, 1, 2, 3], **extra)

    @pytest.fixture
    def driver_factory(self, tmp_path: Path) -> Callable[[Backend], Driver]:
        puppets = Puppets(tmp_path / "puppets")
        return lambda backend: LocalDriver(backend, puppets)

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return LOCAL

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "local"

    @pytest.fixture
    def adapter_config(self, state: Path) -> Mapping[str, Any] | None:
        return {"state_dir": str(state), "grace": 0.3, "memory_limit": "1G", "cgroups": "auto"}
