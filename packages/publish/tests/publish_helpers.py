"""Helpers shared by the publish tests (a module of its own name, so it cannot be mistaken for
another package's ``conftest``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The publish helper as a job's process runs it.
HELPER = (sys.executable, "-m", "jobdispatch_publish")


def helper(
    *argv: str, env: Mapping[str, str], check: bool = True, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """``jobdispatch-publish ARGV`` run to its end in ``env``, its output captured as text."""
    return subprocess.run(
        [*HELPER, *argv], env=env, capture_output=True, text=True, check=check, timeout=timeout
    )


def watch_giving_up(
    saves: Path, env: Mapping[str, str], job: str
) -> subprocess.CompletedProcess[str]:
    """``watch`` of ``saves``, as execution 0 of submission 1 of ``job``, over a root it must
    give up on: it exits with the reason's code, and a minute is the bound past which it is
    taken to retry forever (as it once did)."""
    identity = {"JOBDISPATCH_JOB": job, "JOBDISPATCH_SUBMISSION": "1", "JOBDISPATCH_EXECUTION": "0"}
    argv = ("watch", str(saves), "--interval", "0.1")
    return helper(*argv, env={**env, **identity}, check=False, timeout=60)


def make_save(
    folder: Path, files: dict[str, bytes | int], *, marker: str | None = "COMPLETE"
) -> Path:
    """A save folder with the given files (bytes, or a size to fill with random bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else os.urandom(content))
    if marker:
        (folder / marker).write_text("done\n")
    return folder


def race(
    calls: Sequence[Callable[[], Any]], expected: type[BaseException]
) -> tuple[list[Any], list[BaseException]]:
    """Run ``calls`` at the same moment in threads; (results, errors of type ``expected``)."""
    import threading

    barrier = threading.Barrier(len(calls))
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results.append(call())
        except expected as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
