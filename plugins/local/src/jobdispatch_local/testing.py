"""The conformance driver for the local adapter: what a test can make this machine do.

Ranks run :mod:`jobdispatch_local._puppet`, so a test can end a *running* execution the way it
wants: preempt it through the runner (SIGTERM, then SIGKILL), shorten its time limit, have a
rank exit with a code or die of a signal, run it out of memory under a cgroup limit (where this
machine has a writable memory controller), or kill its runner as a lost node. Imports the
conformance package, which only the tests install.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable
from pathlib import Path

from jobdispatch.spi import Backend, ObjectObs, ObjectRef
from jobdispatch.types import JobSpec
from jobdispatch_conformance.adapter.driver import CannotDrive, Driver

from jobdispatch_local.backend import LocalBackend

__all__ = ["LocalDriver", "Puppets", "make_backend", "shut_down", "wait_file", "wait_for"]


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


class LocalDriver(Driver):
    """Drives a :class:`~jobdispatch_local.LocalBackend` through its runner and puppet ranks."""

    def __init__(self, backend: Backend, puppets: Puppets) -> None:
        if not isinstance(backend, LocalBackend):
            raise CannotDrive("anything", f"{backend!r} is not a local backend")
        self.backend = backend
        self.puppets = puppets

    def base_spec(self) -> JobSpec:
        return JobSpec(command=self.puppets.command(), nodes=1)

    def unknown_ref(self) -> ObjectRef:
        return ObjectRef("jd-conformance-1-1")

    def preempt(self, ref: ObjectRef) -> None:
        self.backend.preempt(ref, wait=False)

    def lose_node(self, ref: ObjectRef) -> None:
        if not self.backend.kill_runner(ref):
            raise CannotDrive("lose_node", f"{ref} has no live runner to kill")

    def time_out(self, ref: ObjectRef) -> None:
        self.backend.set_time_limit(ref, 0.001)

    def oom(self, ref: ObjectRef) -> None:
        support = self.backend.memory_support()
        if str(support.answer) != "yes":
            raise CannotDrive("oom", support.detail)
        self.puppets.tell(ref, "oom")

    def fail(self, ref: ObjectRef, code: int) -> None:
        self.puppets.tell(ref, f"exit {code}")

    def complete(self, ref: ObjectRef) -> None:
        self.puppets.tell(ref, "exit 0")

    def launch_fail(self, ref: ObjectRef) -> None:
        raise CannotDrive(
            "launch_fail",
            "a running local object has launched already; a spec whose program cannot be "
            "started ends launch-failed (the local adapter's own tests show it)",
        )

    def lose_next_start_reply(self) -> None:
        self.backend.lose_next_start_reply()

    def set_requeue_bit(self, ref: ObjectRef) -> None:
        raise CannotDrive("set_requeue_bit", "the local scheduler has no requeue bit")

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        self.puppets.tell(ref, f"write {stream} {base64.b64encode(data).decode()}", rank)


# ------------------------------------------------------------------------ test helpers

#: Short enough for CI on two cores, long enough for a rank to notice SIGTERM.
TEST_GRACE = 0.3
TEST_TIMEOUT = 20.0


def make_backend(state_dir: Path, **extra: object) -> LocalBackend:
    """A backend over ``state_dir`` with test-sized grace and poll intervals."""
    from jobdispatch_local.config import parse_config

    config = {"state_dir": str(state_dir), "grace": TEST_GRACE, "poll": 0.02, **extra}
    return LocalBackend(parse_config(config))


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
    timeout: float = TEST_TIMEOUT,
) -> ObjectObs:
    """Poll ``ref`` until ``ok`` holds; fail saying what was awaited and what was seen."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        obs = backend.inspect(ref)
        if ok(obs):
            return obs
        if time.monotonic() > deadline:
            msg = f"{ref} did not become {what} within {timeout}s: {obs}"
            raise AssertionError(msg)
        time.sleep(0.02)


def wait_file(path: Path, timeout: float = TEST_TIMEOUT) -> str:
    """The file's text once it exists."""
    import time

    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            msg = f"{path} never appeared"
            raise AssertionError(msg)
        time.sleep(0.02)
    return path.read_text()
