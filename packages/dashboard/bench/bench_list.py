"""Benchmark: the dashboard's jobs list over 10,000 jobs, beside a plain read of the same
records in the same run, on LMDB and (when tools/postgres/up's server answers) on PostgreSQL.

Run standalone (``python packages/dashboard/bench/bench_list.py [--quick] [--jobs N]``) or
through ``nox -s bench``. The records are the metrics benchmark's (its ``fill``: each job
launched, preempted, resubmitted by its rule and, for most, succeeded), so the two read alike.
For each store it measures, in turns, the median over several rounds of

* the baseline, a plain read: every job listed and read with ``read_many`` through a store
  opened afresh (the metrics benchmark's ``plain_read``);
* a first list page: a new board over a store opened afresh, ``GET /`` answered through
  Starlette's TestClient (every record read, folded into its row, filtered, the newest 500
  rendered);
* the same page again with nothing changed (the survey alone, then the rendering);
* a filtered page (``?state=failed``) with nothing changed.

Prints each time and its ratio to the baseline; asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jobdispatch.records.store import Records
from jobdispatch_dashboard import Board, ClusterSource, make_app
from starlette.testclient import TestClient

# The metrics benchmark's records and baseline, so that both benchmarks read the same thing.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "metrics" / "bench"))
from bench_scrape import on_each_store, plain_read, report


def pages(open_store: Callable[[], Records]) -> tuple[float, float, float, int]:
    """(first list page, the same again, a filtered one again, the first page's bytes)."""
    stores: list[Records] = []

    def opened() -> Records:
        stores.append(open_store())
        return stores[-1]

    board = Board([ClusterSource("bench", "local", "bench", "bench", opened)])
    client = TestClient(make_app(board))
    try:
        timed = []
        size = 0
        for path in ("/", "/", "/?state=failed"):
            start = time.perf_counter()
            answer = client.get(path)
            timed.append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.text[:500]
            size = size or len(answer.content)
        return timed[0], timed[1], timed[2], size
    finally:
        for store in stores:
            store.close()


def measure(name: str, open_store: Callable[[], Records], rounds: int) -> None:
    reads, firsts, repeats, filtered = [], [], [], []
    size = 0
    for _ in range(rounds):  # in turns, so that a busy moment of the machine hits all
        reads.append(plain_read(open_store))
        first, again, narrowed, size = pages(open_store)
        firsts.append(first)
        repeats.append(again)
        filtered.append(narrowed)
    report(
        f"{name}: medians of {rounds} rounds (list page {size} bytes)",
        statistics.median(reads),
        ("first list page (read, fold, render)", statistics.median(firsts), ""),
        ("list page again, nothing changed", statistics.median(repeats), ""),
        ("filtered page (state=failed), unchanged", statistics.median(filtered), ""),
    )


if __name__ == "__main__":
    on_each_store("dashboard jobs list", measure, "bench_dashboard")
