"""Waiting for a condition in the kubeflow tests, bounded, with the condition named on failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(ok: Callable[[], Any], what: str, timeout: float = 120.0, every: float = 0.5) -> Any:
    """``ok()``'s first true answer, asked every ``every`` seconds; fails naming ``what`` if
    none comes within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (got := ok()):
        assert time.monotonic() < deadline, f"not {what} within {timeout:.0f} s"
        time.sleep(every)
    return got
