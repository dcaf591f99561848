"""Fixtures for the local adapter's tests: a backend over a fresh state directory with short
grace periods, puppet ranks a test can command, and a clean-up that leaves no process behind."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobdispatch.spi import StartRequest
from jobdispatch.types import JobSpec
from jobdispatch_local import LocalBackend
from jobdispatch_local.testing import Puppets, make_backend, shut_down


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cgroups: needs a writable cgroup memory controller")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "state"
    yield path
    leftovers = shut_down(path)
    assert not leftovers, f"processes outlived the test's clean-up: {leftovers}"


@pytest.fixture
def backend(state_dir: Path) -> LocalBackend:
    return make_backend(state_dir)


@pytest.fixture
def puppets(tmp_path: Path) -> Puppets:
    return Puppets(tmp_path / "puppets")


_counter = itertools.count(1)


@pytest.fixture
def request_for(puppets: Puppets) -> Callable[..., StartRequest]:
    """A start request for a new job: puppet ranks, unless a spec is given."""

    def make(spec: JobSpec | None = None, *, job: str = "", **fields: object) -> StartRequest:
        job = job or f"t{os.getpid()}x{next(_counter)}"
        if spec is None:
            spec = JobSpec(command=puppets.command(), **fields)  # type: ignore[arg-type]
        return StartRequest(
            job=job,
            submission=1,
            attempt=1,
            spec=spec,
            env={"JOBDISPATCH_JOB": job, "JOBDISPATCH_SUBMISSION": "1"},
        )

    return make
