"""The driver for the built-in memory adapter, and fixtures that run the suite on it.

The memory adapter can do everything a driver may be asked, at once, so the suite runs on it with
no skips for want of a driver; that is what keeps the fake the simulator relies on honest.
Importing this module imports ``jobdispatch.memory``; nothing else in the package does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.spi import Backend, ObjectRef
from jobdispatch.types import JobSpec, ObjectState, Resources

from jobdispatch_conformance.adapter.driver import CannotDrive, Driver, Timeouts
from jobdispatch_conformance.adapter.suite import AdapterFixtures

__all__ = ["MemoryDriver", "MemoryFixtures"]

#: Memory moves as fast as it is driven: a short settle, no pause between looks.
FAST = Timeouts(settle=5.0, poll=0.0005, quiet=0.0)


class MemoryDriver(Driver):
    """Drives a :class:`~jobdispatch.memory.MemoryBackend` through its ``env``."""

    def __init__(self, backend: Backend, clock: Callable[[], datetime] | None = None) -> None:
        if not isinstance(backend, MemoryBackend):
            raise CannotDrive("anything", f"{backend!r} is not a memory backend")
        self.backend = backend
        self.env = backend.env
        self._clock = clock

    def now(self) -> datetime:
        return self._clock() if self._clock is not None else super().now()

    def unknown_ref(self) -> ObjectRef:
        return ObjectRef("999999" if self.backend.shape is Shape.SLURM else "default/jd-none-1-1")

    def run(self, ref: ObjectRef) -> None:
        if self.env.state(ref) is ObjectState.PENDING:
            self.env.run(ref)

    def missing_program(self) -> JobSpec:
        spec = self.spec_without_program()
        self.env.remove_program(spec.command[0])
        return spec

    def preempt(self, ref: ObjectRef) -> None:
        self.env.preempt(ref)

    def lose_node(self, ref: ObjectRef) -> None:
        self.env.lose_node(ref)

    def time_out(self, ref: ObjectRef) -> None:
        self.env.time_out(ref)

    def oom(self, ref: ObjectRef) -> None:
        self.env.oom(ref)

    def fail(self, ref: ObjectRef, code: int) -> None:
        self.env.fail(ref, code)

    def complete(self, ref: ObjectRef) -> None:
        self.env.complete(ref)

    def launch_fail(self, ref: ObjectRef) -> None:
        self.env.launch_fail(ref)

    def lose_next_start_reply(self) -> None:
        self.env.lose_next_start_reply()

    def created(self, ref: ObjectRef) -> str:
        return self.env.describe(ref)

    def resource_spec(self) -> JobSpec:
        return attrs.evolve(
            self.base_spec(),
            resources=Resources(gpus_per_node=2, memory_per_node_mib=1024, queue="batch"),
        )

    def set_requeue_bit(self, ref: ObjectRef) -> None:
        if self.backend.shape is not Shape.SLURM:
            raise CannotDrive("set_requeue_bit", "the Kubeflow shape has no requeue bit")
        self.env.set_requeue_bit(ref, True)

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        self.env.write_output(ref, data, stream=stream, rank=rank)

    def _twin(self) -> MemoryBackend:
        return MemoryBackend(self.backend.shape)

    def unreachable_backend(self) -> Backend:
        twin = self._twin()
        twin.env.set_reachable(False)
        return twin

    def unauthorized_backend(self) -> Backend:
        twin = self._twin()
        twin.env.set_authorized(False)
        return twin


class MemoryFixtures(AdapterFixtures):
    """Fixtures for the memory adapter: set ``config`` on the subclass (shape, auto_run...)."""

    config: Mapping[str, Any] = {}

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def backend_factory(self, clock: ManualClock) -> Callable[[], Backend]:
        return lambda: self.make(self.config, clock)

    def make(self, config: Mapping[str, Any], clock: ManualClock) -> Backend:
        """Build the backend under test; a subclass may return a variant."""
        return MemoryBackend.from_config(config, clock=clock)

    @pytest.fixture
    def driver_factory(self, clock: ManualClock) -> Callable[[Backend], Driver]:
        return lambda backend: MemoryDriver(backend, clock)

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        return FAST

    @pytest.fixture
    def adapter_name(self) -> str | None:
        return "memory"

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        return {**self.config, "capabilities": {"output-retained": "unknown"}}
