"""The metrics tests' harness: scripted runs (jobdispatch_supervise.scripted) over a real LMDB
store, since the endpoint surveys the stores that can be surveyed; and how to read samples.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jobdispatch import ManualClock
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_supervise.scripted import PREEMPT_RESUBMIT, Scripted
from prometheus_client.core import Metric

__all__ = ["PREEMPT_RESUBMIT", "Scenario", "by_name", "samples"]


class Scenario(Scripted[LmdbRecords]):
    """Scripted runs over an LMDB store at ``path``."""

    def __init__(self, path: Path) -> None:
        clock = ManualClock()
        super().__init__(LmdbRecords(str(path), clock=clock), clock)


def samples(metrics: Iterable[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``metrics`` by (name, sorted labels), as a scrape would show them."""
    out = {}
    for family in metrics:
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def by_name(found: dict[Any, float], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one series name, by labels (without ``cluster``)."""
    return {
        tuple(kv for kv in labels if kv[0] != "cluster"): value
        for (n, labels), value in found.items()
        if n == name
    }
