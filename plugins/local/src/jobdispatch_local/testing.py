"""Test helpers for the local adapter, for its own tests and those of the packages above it:
puppet ranks a test can command, a backend with test-sized grace periods, waits, and a clean-up
that leaves no runner or rank behind. (The conformance driver is in
:mod:`jobdispatch_local.driver`.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobdispatch.spi import Backend, ObjectObs, ObjectRef, StartRequest
from jobdispatch.testing import PATIENCE, eventually
from jobdispatch.types import ObjectState

from jobdispatch_local.backend import LocalBackend

__all__ = ["Puppets", "make_backend", "shut_down", "start_running", "wait_file", "wait_for"]


class Puppets:
    """Where puppet ranks read their commands and leave their environment."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def command(self) -> tuple[str, ...]:
        return (sys.executable, "-m", "jobdispatch_local._puppet", str(self.folder))

    def tell(self, ref: ObjectRef, line: str, rank: int | str = "*") -> None:
        with (self.folder / f"{ref.id}.cmd").open("a") as f:
            f.write(f"{rank} {line}\n")

    def env(self, ref: ObjectRef, rank: int) -> dict[str, str] | None:
        import json

        path = self.folder / f"{ref.id}.{rank}.env"
        try:
            data: dict[str, str] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return data


# ------------------------------------------------------------------------ test helpers

#: Short enough for CI on two cores, long enough for a rank to notice SIGTERM.
TEST_GRACE = 0.3


def make_backend(state_dir: Path, **extra: object) -> LocalBackend:
    """A backend over ``state_dir`` with test-sized grace and poll intervals."""
    from jobdispatch_local.config import Settings

    config = {"state_dir": str(state_dir), "grace": TEST_GRACE, "poll": 0.02, **extra}
    return LocalBackend(Settings.from_config(config))


def shut_down(state_dir: Path) -> list[int]:
    """Stop every object under ``state_dir`` and SIGKILL any runner or rank still alive after
    that; returns the pids that had to be killed (a clean run kills none)."""
    import os
    import signal
    import time

    from jobdispatch_local import procs
    from jobdispatch_local.layout import scan

    backend = make_backend(state_dir)
    for obs in backend.objects():
        backend.stop(obs.ref, "test clean-up")

    def alive() -> list[dict[str, object]]:
        found: list[dict[str, object]] = []
        for obj in scan(state_dir):
            idents = [obj.read_runner()] + [
                r.get("process") for e in obj.executions() for r in e.get("ranks", [])
            ]
            found.extend(i for i in idents if i is not None and procs.alive(i))
        return found

    deadline = time.monotonic() + 3.0  # a runner that recorded the end is about to exit
    while alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    killed = []
    for ident in alive():
        os.kill(int(str(ident["pid"])), signal.SIGKILL)
        killed.append(int(str(ident["pid"])))
    return killed


def wait_for(
    backend: Backend,
    ref: ObjectRef,
    ok: Callable[[ObjectObs], bool],
    what: str,
    timeout: float = PATIENCE,
) -> ObjectObs:
    """Inspect ``ref`` until ``ok`` holds; fail saying what was awaited and what was seen."""
    return eventually(
        lambda: backend.inspect(ref), f"{ref} to become {what}", holds=ok, within=timeout
    )


def start_running(backend: Backend, request: StartRequest) -> ObjectRef:
    """Start ``request``, open its object and wait until it runs; its ref."""
    ref = backend.start(request)
    backend.open(ref)
    wait_for(backend, ref, lambda o: o.state is ObjectState.RUNNING, "running")
    return ref


def wait_file(path: Path, timeout: float = PATIENCE) -> str:
    """The file's text once it exists."""
    eventually(path.exists, f"{path} to appear", within=timeout)
    return path.read_text()
