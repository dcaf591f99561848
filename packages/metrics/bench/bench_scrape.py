"""Benchmark: a metrics scrape over 10,000 jobs, beside a plain read of the same records in
the same run, on LMDB and (when tools/postgres/up's server answers) on PostgreSQL.

Run standalone (``python packages/metrics/bench/bench_scrape.py [--quick] [--jobs N]``) or
through ``nox -s bench``. For each store it fills a fresh one with N records (each a job's
whole story: launched, preempted, resubmitted by its rule, run again, and for most an outcome;
a few still pending or running), then measures, in turns, the median over several rounds of

* the baseline, a plain read: every job listed and read with ``read_many`` (batches of 500)
  through a store opened afresh, so nothing is decoded yet: what ``jobdispatch list`` pays;
* a first scrape: a new collector over a store opened afresh, read-only, exposition text
  rendered (every record read, decoded, folded and summed);
* a repeated scrape with nothing changed, by that same collector (the survey alone).

Prints each time and its ratio to the baseline; asserts nothing (the issue's targets, a scrape
under 1 s and a repeated one under 0.1 s, are printed beside them for the reader).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jobdispatch.records import events as ev
from jobdispatch.records.store import Records
from jobdispatch.testing import PREEMPTED, SUCCESS, Story, observation
from jobdispatch.triggers import End
from jobdispatch.types import Action, CauseKind, ObjectState, Rule, State
from jobdispatch_metrics import RecordCollector
from jobdispatch_records_lmdb import LmdbRecords
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

ROUNDS = 5
BATCH = 500


def story(job: str, i: int) -> Story:
    """A job's record: most ran, were preempted, resubmitted and succeeded (17 events); one
    in ten is still running its second submission, one in twenty never started."""
    s = Story.with_rules(
        Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=3), job_id=job
    )
    if i % 20 == 0:
        return s
    running, ended = ObjectState.RUNNING, ObjectState.ENDED
    s.later(5).launched(1, f"{job}-a", running=False)
    s.observe(observation(job, 1, 1, f"{job}-a", running, _run(running)))
    s.later(60).observe(observation(job, 1, 1, f"{job}-a", ended, _run(ended, PREEMPTED)))
    s.later(1).launched(2, f"{job}-b", trigger=End(f"{job}-a", 0), rule=0, cause=PREEMPTED)
    if i % 10 == 1:
        return s
    s.later(60).observe(observation(job, 2, 1, f"{job}-b", ended, _run(ended, SUCCESS)))
    s.later(1).add(ev.OutcomeDecided, state=State.SUCCEEDED, cause=SUCCESS)
    s.add(ev.Settled)
    return s


def _run(state: ObjectState, cause: Any = None) -> Any:
    from jobdispatch.spi import ExecutionObs
    from jobdispatch.testing import T0

    return ExecutionObs(index=0, state=state, cause=cause, started_at=T0)


def fill(store: Records, jobs: int) -> list[str]:
    ids = []
    for i in range(jobs):
        s = story(f"b{i:06d}", i)
        store.create(s.header, s.events)
        ids.append(s.job_id)
        if (i + 1) % 2000 == 0:
            print(f"  {i + 1} records written", file=sys.stderr)
    return ids


def plain_read(open_store: Callable[[], Records]) -> float:
    store = open_store()
    try:
        start = time.perf_counter()
        jobs = list(store.list())
        for at in range(0, len(jobs), BATCH):
            store.read_many(jobs[at : at + BATCH])
        return time.perf_counter() - start
    finally:
        store.close()


def scrapes(open_store: Callable[[], Records], cluster: str) -> tuple[float, float, int]:
    """(first scrape, repeated scrape with nothing changed, exposition bytes)."""
    store = open_store()
    try:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(RecordCollector(store, cluster=cluster))
        start = time.perf_counter()
        text = generate_latest(registry)
        first = time.perf_counter() - start
        start = time.perf_counter()
        again = generate_latest(registry)
        repeated = time.perf_counter() - start
        assert again.count(b"\n") == text.count(b"\n")
        return first, repeated, len(text)
    finally:
        store.close()


def measure(name: str, open_store: Callable[[], Records], rounds: int) -> None:
    reads, firsts, repeats = [], [], []
    size = 0
    for _ in range(rounds):  # in turns, so that a busy moment of the machine hits all three
        reads.append(plain_read(open_store))
        first, repeated, size = scrapes(open_store, name)
        firsts.append(first)
        repeats.append(repeated)
    report(
        f"{name}: medians of {rounds} rounds (exposition {size} bytes)",
        statistics.median(reads),
        ("first scrape (read, fold, sum, render)", statistics.median(firsts), "< 1 s"),
        ("repeated scrape, nothing changed", statistics.median(repeats), "< 0.1 s"),
    )


def report(title: str, base: float, *rows: tuple[str, float, str]) -> None:
    """Print medians beside the plain read's (``base``), each as seconds and as a multiple of
    it, with the target a row states (this benchmark's and the dashboard's table)."""
    rows = (("plain read (list + read_many)", base, ""), *rows)
    width = max(len(what) for what, _, _ in rows)
    targets = any(target for _, _, target in rows)
    print(f"\n{title}")
    print(f"  {'what':<{width}} {'seconds':>9} {'× plain read':>13}" + "  target" * targets)
    for what, seconds, target in rows:
        line = f"  {what:<{width}} {seconds:>9.3f} {seconds / base:>13.4f}"
        print(f"{line}  {target}" if targets else line)


def on_each_store(
    what: str,
    measure: Callable[[str, Callable[[], Records], int], None],
    schema: str,
) -> None:
    """The benchmarks' frame (this one's and the dashboard's): parse ``--quick`` and
    ``--jobs``, fill a fresh LMDB store and, when tools/postgres/up's server answers, a fresh
    PostgreSQL schema named after ``schema``, with the same records, and call ``measure(name,
    open the store read-only, rounds)`` on each."""
    parser = argparse.ArgumentParser(description=f"{what}, beside a plain read")
    parser.add_argument("--quick", action="store_true", help="1,000 jobs and 3 rounds")
    parser.add_argument("--jobs", type=int, default=None, help="how many records (10,000)")
    args = parser.parse_args()
    jobs = args.jobs or (1000 if args.quick else 10_000)
    rounds = 3 if args.quick else ROUNDS
    print(f"{what} over {jobs} jobs, beside a plain read of the same records")

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "records")
        writer = LmdbRecords(path)
        print("filling the LMDB store...", file=sys.stderr)
        fill(writer, jobs)
        try:
            measure("lmdb", lambda: LmdbRecords(path, readonly=True), rounds)
        finally:
            writer.close()

    try:
        from jobdispatch_records_postgres import PostgresRecords, testing
    except ImportError:
        print("\npostgresql: jobdispatch-records-postgres is not installed; not measured")
        return
    why = testing.problem()
    if why is not None:
        print(f"\npostgresql: not measured: {why}")
        return
    config = {**testing.server_config(), "schema": testing.new_schema_name(schema)}
    try:
        pg = PostgresRecords(config)
        print("filling the PostgreSQL store...", file=sys.stderr)
        fill(pg, jobs)
        pg.close()
        measure("postgresql", lambda: PostgresRecords(config, readonly=True), rounds)
    finally:
        testing.drop_schema(config, config["schema"])


if __name__ == "__main__":
    on_each_store("metrics scrape", measure, "bench_metrics")
