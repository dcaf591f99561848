"""Helpers shared by the publish tests (a module of its own name, so it cannot be mistaken for
another package's ``conftest``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


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
