"""Benchmark: durable commits and fold-ready reads of the LMDB record store.

Run standalone (``python packages/records-lmdb/bench/bench_records.py [--quick] [--dir DIR]``)
or through ``nox -s bench``. Measured in one run, in one temporary directory (so on one file
system):

* the baseline: this machine's rate of ``write`` + ``fdatasync`` of one 4 KiB page on a
  temporary file (measured before and after the rest, and averaged: shared disks drift), beside
  ``fsync`` and an appending write (whose new size must be synced too). One durable commit
  cannot be faster than one such sync; an LMDB commit makes two (``fdatasync`` of the data
  pages, then the meta page written through an ``O_DSYNC`` descriptor), so 0.5 of the baseline
  is the ceiling for commits;
* durable commits per second (one event each, ``append`` with its revision check) to one job,
  and spread round-robin over 1,000 jobs (after creating them, which is also timed);
* fold-ready reads per second (``read``: the whole View, every event decoded into its type) of
  records of 10, 100, 1,000 and 10,000 events, with the store's decoded cache off (every event
  fetched and decoded: a first read), and re-reads with it on (what a supervisor polling a
  record pays: the revision check and the new events only).

Prints a table with each rate beside the baseline and their ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from jobdispatch.records.events import AnyEvent, CallAnswered, Header, Observed
from jobdispatch.spi import ExecutionObs, ObjectObs, ObjectRef
from jobdispatch.types import Actor, ObjectState
from jobdispatch_conformance.records import make_header
from jobdispatch_records_lmdb import LmdbRecords

T = TypeVar("T")
#: Before/after baselines further apart than this mark a row's ratio as unreliable.
UNSTEADY = 1.5
BY = Actor.supervisor("bench")
AT = datetime(2026, 1, 1, tzinfo=UTC)


def header(job: str) -> Header:
    """The conformance suite's small valid header, created by the bench at ``AT``."""
    return make_header(job, at=AT)


def small_event(i: int) -> AnyEvent:
    return CallAnswered(at=AT, by=BY, call=i, ok=True, detail="ok")


def observation(i: int) -> AnyEvent:
    """What a supervisor records most: an object's observation (about 400 bytes encoded)."""
    obs = ObjectObs(
        ref=ObjectRef(f"{1000 + i}"),
        name=f"jd-bench-1-{i}",
        state=ObjectState.RUNNING,
        executions=(
            ExecutionObs(
                index=0,
                state=ObjectState.RUNNING,
                started_at=AT,
                nodes=("node-001", "node-002", "node-003", "node-004"),
            ),
        ),
        requeue_bit=False,
    )
    return Observed(at=AT, by=BY, obs=obs)


# ------------------------------------------------------------------------------ measurements


def sync_rate(
    directory: Path, seconds: float, sync: Callable[[int], None], *, grow: bool = False
) -> float:
    """Syncs per second of a 4 KiB write on a file in ``directory``: an overwrite of the same
    page, or (``grow``) a page appended, so that the file's size must be made durable too."""
    fd, name = tempfile.mkstemp(dir=directory, prefix="sync-")
    try:
        page = os.urandom(4096)
        os.pwrite(fd, page, 0)
        os.fsync(fd)
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.pwrite(fd, page, 4096 * n if grow else 0)
            sync(fd)
            n += 1
        return n / elapsed
    finally:
        os.close(fd)
        os.unlink(name)


def commits_one_job(directory: Path, n: int) -> float:
    with LmdbRecords(directory / "one-job") as store:
        store.create(header("one"))
        revision = 0
        start = time.perf_counter()
        for i in range(n):
            revision = store.append("one", [small_event(i)], expect_revision=revision)
        return n / (time.perf_counter() - start)


def commits_many_jobs(directory: Path, jobs: int, n: int) -> tuple[float, float]:
    """Creates per second, then appends per second round-robin over ``jobs`` jobs."""
    with LmdbRecords(directory / "many-jobs") as store:
        names = [f"job-{k:05}" for k in range(jobs)]
        start = time.perf_counter()
        for name in names:
            store.create(header(name))
        creates = jobs / (time.perf_counter() - start)
        revisions = dict.fromkeys(names, 0)
        start = time.perf_counter()
        for i in range(n):
            name = names[i % jobs]
            revisions[name] = store.append(name, [small_event(i)], expect_revision=revisions[name])
        return creates, n / (time.perf_counter() - start)


def reads(directory: Path, size: int, seconds: float, *, cached: bool) -> tuple[float, float]:
    """Whole-record reads per second, and events per second. ``cached=False``: every read
    fetches and decodes every event (the store's decoded cache is off); ``cached=True``: a
    re-read, which decodes only what is new (here, nothing) and checks the revision."""
    path = directory / f"read-{size}"
    with LmdbRecords(path) as store:
        if not list(store.list()):
            store.create(header("r"))
            revision = 0
            for lo in range(0, size, 1000):
                batch = [observation(i) for i in range(lo, min(size, lo + 1000))]
                revision = store.append("r", batch, expect_revision=revision)
    with LmdbRecords(path, cache_events=0 if not cached else 50_000) as store:
        assert store.read("r").revision == size
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or n < 3:
            store.read("r")
            n += 1
        return n / elapsed, n * size / elapsed


# ------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (a few seconds)")
    parser.add_argument("--dir", type=Path, help="where to measure (default: a temp directory)")
    args = parser.parse_args(argv)

    sync_seconds = 0.3 if args.quick else 1.0
    commits = 300 if args.quick else 3000
    read_seconds = 0.2 if args.quick else 1.0
    sizes = (10, 100, 1000, 10_000)
    rows: list[tuple[str, float, float, str]] = []  # label, rate, baseline beside it, note
    drift: dict[float, float] = {}  # baseline -> how far its before and after measures differed

    with tempfile.TemporaryDirectory(prefix="bench-records-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"bench_records: {directory} ({'quick' if args.quick else 'full'} run)", flush=True)

        def beside(measure: Callable[[], T]) -> tuple[T, float]:
            """``measure()`` with the baseline taken just before and just after it, averaged:
            a shared disk's sync rate drifts, so each row gets its own."""
            before = sync_rate(directory, sync_seconds, os.fdatasync)
            result = measure()
            after = sync_rate(directory, sync_seconds, os.fdatasync)
            drift[(before + after) / 2] = max(before, after) / max(min(before, after), 1e-9)
            return result, (before + after) / 2

        def sync(fn: Callable[[int], None], *, grow: bool = False) -> Callable[[], float]:
            return lambda: sync_rate(directory, sync_seconds, fn, grow=grow)

        rate, baseline = beside(sync(os.fdatasync))
        rows.append(("write+fdatasync 4 KiB (baseline)", rate, baseline, "1 sync"))
        rate, baseline = beside(sync(os.fsync))
        rows.append(("write+fsync 4 KiB", rate, baseline, "1 sync"))
        rate, baseline = beside(sync(os.fdatasync, grow=True))
        rows.append(("append+fdatasync 4 KiB (file grows)", rate, baseline, "1 sync"))
        rate, baseline = beside(lambda: commits_one_job(directory, commits))
        rows.append(("commit: append 1 event, 1 job", rate, baseline, "2 syncs"))
        (creates, spread), baseline = beside(lambda: commits_many_jobs(directory, 1000, commits))
        rows.append(("commit: create, 1,000 jobs", creates, baseline, "2 syncs"))
        rows.append(("commit: append 1 event, 1,000 jobs", spread, baseline, "2 syncs"))
        for size in sizes:
            (rate, events), baseline = beside(
                lambda size=size: reads(directory, size, read_seconds, cached=False)  # type: ignore[misc]
            )
            label = f"read+decode {size:,}-event record"
            rows.append((label, rate, baseline, f"{events:,.0f} ev/s"))
        for size in sizes:
            (rate, events), baseline = beside(
                lambda size=size: reads(directory, size, read_seconds, cached=True)  # type: ignore[misc]
            )
            label = f"re-read {size:,}-event record (cached)"
            rows.append((label, rate, baseline, f"{events:,.0f} ev/s"))

    width = max(len(r[0]) for r in rows)
    print()
    print(
        f"{'measurement':<{width}}  {'per second':>10}  {'per op':>11}  {'note':>16}  "
        f"{'fdatasync/s':>11}  ratio"
    )
    print(f"{'-' * width}  {'-' * 10}  {'-' * 11}  {'-' * 16}  {'-' * 11}  -----")
    for label, rate, baseline, note in rows:
        per_op = f"{1e3 / rate:.3f} ms" if rate else "-"
        print(
            f"{label:<{width}}  {rate:>10,.0f}  {per_op:>11}  {note:>16}  {baseline:>11,.0f}  "
            f"{rate / baseline:.2f}{' *' if drift.get(baseline, 1.0) > UNSTEADY else ''}"
        )
    print()
    if any(d > UNSTEADY for d in drift.values()):
        print(
            f"*: the baseline before and after that row differed more than {UNSTEADY}x (a shared "
            "or busy disk); its ratio says little."
        )
    print(
        "fdatasync/s: the baseline measured just before and after that row, on the same file "
        "system; ratio: per second / that baseline. A commit makes two syncs: its ceiling is 0.50."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
