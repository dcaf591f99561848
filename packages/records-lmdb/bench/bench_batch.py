"""Benchmark: group commit. Batched commits of the LMDB store against single ones, against the
memory store, and against this disk's sync rate; and the launch of 10,000 jobs' records.

Run standalone (``python packages/records-lmdb/bench/bench_batch.py [--quick] [--dir DIR]``)
or through ``nox -s bench``. Measured in one run, in one temporary directory (so on one file
system), each figure beside its baseline:

* the baseline: ``write`` + ``fdatasync`` of one 4 KiB page on a temporary file, measured
  before and after the rest (a shared disk drifts), beside ``fsync``. A durable commit cannot
  be faster than one such sync, and an LMDB commit makes two (the data pages, then the meta
  page), so 0.5 of the baseline is the ceiling for commits per second;
* single commits (``append`` of one event, jobs taken round-robin) and batched commits
  (``append_many`` of one event to each of 1, 10, 100 and 1,000 jobs; ``renew_many`` of as
  many leases), on LMDB and on the memory store: commits per second, jobs per second and the
  cost per job, LMDB beside memory;
* the launch of 10,000 jobs' records: the creates (one each: ``create`` has no batch form),
  then the commits the supervisor makes to launch a job, as it makes them for one job today
  (acquire; authorize; attempt started; its reply; the held object observed; canonical
  chosen; open decided; the running object observed) and a lease renewal, each phase one
  batch over every job; LMDB against memory, phase by phase, with the cost per job. The same
  commits made one at a time are measured on a sample of the jobs, per job, for comparison.

The target of issue 19 is a launch within 3x of the memory store. Prints tables; asserts
nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from bench_records import AT, BY, header, observation, small_event, sync_rate
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import AppendRequest, Lease, Records
from jobdispatch.spi import ObjectRef
from jobdispatch_records_lmdb import LmdbRecords

T = TypeVar("T")
HOLDER = "bench-supervisor"
TTL = timedelta(minutes=5)
BATCH_SIZES = (1, 10, 100, 1000)

#: The launch's phases after the acquisition: what each commits for job number i, and whether
#: it needs the lease (decisions do).
Phase = tuple[str, Callable[[int], ev.AnyEvent]]


def _ref(i: int) -> ObjectRef:
    return ObjectRef(f"{100_000 + i}")


LAUNCH: tuple[Phase, ...] = (
    ("authorize", lambda i: ev.SubmissionAuthorized(at=AT, by=BY, n=1, trigger="submit")),
    ("attempt started", lambda i: ev.AttemptStarted(at=AT, by=BY, submission=1, attempt=1)),
    (
        "attempt replied",
        lambda i: ev.AttemptReplied(
            at=AT, by=BY, submission=1, attempt=1, reply=ev.Reply.CREATED, ref=_ref(i)
        ),
    ),
    ("observed (held)", observation),
    (
        "canonical chosen",
        lambda i: ev.CanonicalChosen(at=AT, by=BY, submission=1, ref=_ref(i), attempt=1),
    ),
    (
        "open decided",
        lambda i: ev.OpenDecided(
            at=AT, by=BY, submission=1, ref=_ref(i), deadline=AT + timedelta(minutes=10)
        ),
    ),
    ("observed (running)", observation),
)


def _answered(answers: Sequence[object], what: str) -> None:
    refused = [a for a in answers if isinstance(a, Exception)]
    if refused:
        msg = f"{what}: {len(refused)} parts refused, the first: {refused[0]}"
        raise SystemExit(msg)


# ------------------------------------------------------------------------------ measurements


def single_commits(store: Records, jobs: list[str], n: int) -> float:
    """Commits per second of ``append`` (one event), the jobs taken round-robin."""
    revisions = {job: store.read(job).revision for job in jobs}
    start = time.perf_counter()
    for i in range(n):
        job = jobs[i % len(jobs)]
        revisions[job] = store.append(job, [small_event(i)], expect_revision=revisions[job])
    return n / (time.perf_counter() - start)


def batched_commits(store: Records, jobs: list[str], size: int, batches: int) -> float:
    """Batches per second of ``append_many`` of one event to each of ``size`` jobs."""
    revisions = {job: store.read(job).revision for job in jobs[:size]}
    start = time.perf_counter()
    for b in range(batches):
        requests = [
            AppendRequest(job=job, events=(small_event(b),), expect_revision=revisions[job])
            for job in jobs[:size]
        ]
        answers = store.append_many(requests)
        _answered(answers, "append_many")
        for job, answer in zip(jobs[:size], answers, strict=True):
            revisions[job] = answer  # type: ignore[assignment]
    return batches / (time.perf_counter() - start)


def batched_renewals(store: Records, jobs: list[str], size: int, batches: int) -> float:
    """Batches per second of ``renew_many`` of ``size`` leases."""
    acquired = store.acquire_many(jobs[:size], HOLDER, TTL)
    _answered(acquired, "acquire_many")
    leases = [lease for lease in acquired if isinstance(lease, Lease)]
    start = time.perf_counter()
    for _ in range(batches):
        renewed = store.renew_many(leases, TTL)
        _answered(renewed, "renew_many")
        leases = [lease for lease in renewed if isinstance(lease, Lease)]
    elapsed = time.perf_counter() - start
    store.release_many(leases)
    return batches / elapsed


def launch(store: Records, jobs: list[str]) -> dict[str, float]:
    """Seconds per phase of launching ``jobs``: one create each, then one batch per phase."""
    took: dict[str, float] = {}
    start = time.perf_counter()
    for job in jobs:
        store.create(header(job))
    took["create (one each)"] = time.perf_counter() - start
    start = time.perf_counter()
    acquired = store.acquire_many(jobs, HOLDER, TTL)
    took["acquire"] = time.perf_counter() - start
    _answered(acquired, "acquire_many")
    leases = [lease for lease in acquired if isinstance(lease, Lease)]
    for revision, (name, event) in enumerate(LAUNCH):
        start = time.perf_counter()
        requests = [
            AppendRequest(job=lease.job, events=(event(i),), expect_revision=revision, owner=lease)
            for i, lease in enumerate(leases)
        ]
        answers = store.append_many(requests)
        took[name] = time.perf_counter() - start
        _answered(answers, name)
    start = time.perf_counter()
    _answered(store.renew_many(leases, TTL), "renew_many")
    took["renew"] = time.perf_counter() - start
    return took


def launch_one_by_one(store: Records, jobs: list[str]) -> float:
    """Seconds per job of the same launch with every commit on its own (the single forms)."""
    start = time.perf_counter()
    for i, job in enumerate(jobs):
        store.create(header(job))
        lease = store.acquire(job, HOLDER, TTL)
        for revision, (_, event) in enumerate(LAUNCH):
            store.append(job, [event(i)], expect_revision=revision, owner=lease)
        store.renew(lease, TTL)
    return (time.perf_counter() - start) / len(jobs)


# ------------------------------------------------------------------------------------- main


def _fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (1,000-job launch)")
    parser.add_argument("--dir", type=Path, help="where to measure (default: a temp directory)")
    parser.add_argument("--jobs", type=int, help="jobs to launch (default 10,000; quick 1,000)")
    args = parser.parse_args(argv)

    sync_seconds = 0.3 if args.quick else 1.0
    singles = 200 if args.quick else 1000
    launched = args.jobs or (1000 if args.quick else 10_000)
    sample = 50 if args.quick else 200

    with tempfile.TemporaryDirectory(prefix="bench-batch-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"bench_batch: {directory} ({'quick' if args.quick else 'full'} run)", flush=True)
        syncs: list[float] = []

        def beside(measure: Callable[[], T]) -> tuple[T, float]:
            """``measure()`` with the baseline taken just before and after it, averaged: a
            shared disk's sync rate drifts, so each row gets its own."""
            before = sync_rate(directory, sync_seconds, os.fdatasync)
            result = measure()
            after = sync_rate(directory, sync_seconds, os.fdatasync)
            syncs.extend((before, after))
            return result, (before + after) / 2

        fsync = sync_rate(directory, sync_seconds, os.fsync)

        # ---- commits: single and batched, LMDB and memory
        jobs = [f"job-{k:05}" for k in range(max(BATCH_SIZES))]
        rows: list[tuple[str, float, float, int, float]] = []  # label, /s, memory /s, jobs, sync/s
        lmdb = LmdbRecords(directory / "commits")
        memory = MemoryRecords()
        try:
            for store in (lmdb, memory):
                for job in jobs:
                    store.create(header(job))
            rate, baseline = beside(lambda: single_commits(lmdb, jobs, singles))
            rows.append(
                ("append (single)", rate, single_commits(memory, jobs, singles * 10), 1, baseline)
            )
            for what, measure in (
                ("append_many", batched_commits),
                ("renew_many", batched_renewals),
            ):
                for size in BATCH_SIZES:
                    count = max(3, (1 if args.quick else 3) * singles // size)
                    rate, baseline = beside(
                        lambda m=measure, n=size, c=count: m(lmdb, jobs, n, c)  # type: ignore[misc]
                    )
                    on_memory = measure(memory, jobs, size, count * 3)
                    rows.append((f"{what} x {size:,}", rate, on_memory, size, baseline))
        finally:
            lmdb.close()

        # ---- the launch
        names = [f"launch-{k:05}" for k in range(launched)]
        with LmdbRecords(directory / "launch") as store:
            lmdb_launch, launch_sync = beside(lambda: launch(store, names))
        memory_launch = launch(MemoryRecords(), names)
        one = [f"one-{k:05}" for k in range(sample)]
        with LmdbRecords(directory / "one-by-one") as store:
            lmdb_single = launch_one_by_one(store, one)
        memory_single = launch_one_by_one(MemoryRecords(), one)

    print()
    print(
        f"baseline: write+fdatasync 4 KiB, {min(syncs):,.0f} to {max(syncs):,.0f} a second "
        f"over the run ({_fmt_us(1 / max(syncs))} to {_fmt_us(1 / min(syncs))} a sync), "
        f"measured before and after each row; write+fsync {fsync:,.0f}/s. An LMDB commit "
        "makes two syncs: its ceiling is 0.50 of the baseline."
    )
    print()
    width = max(len(r[0]) for r in rows)
    print(
        f"{'commits':<{width}}  {'LMDB/s':>9}  {'sync/s':>7}  {'ratio':>5}  {'LMDB jobs/s':>11}  "
        f"{'LMDB per job':>13}  {'memory/s':>9}  {'memory per job':>14}  {'LMDB/memory':>11}"
    )
    print(
        f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 5}  {'-' * 11}  {'-' * 13}  {'-' * 9}  "
        f"{'-' * 14}  {'-' * 11}"
    )
    for label, lmdb_rate, memory_rate, size, baseline in rows:
        per_lmdb, per_memory = 1 / (lmdb_rate * size), 1 / (memory_rate * size)
        print(
            f"{label:<{width}}  {lmdb_rate:>9,.0f}  {baseline:>7,.0f}  "
            f"{lmdb_rate / baseline:>5.2f}  "
            f"{lmdb_rate * size:>11,.0f}  {_fmt_us(per_lmdb):>13}  {memory_rate:>9,.0f}  "
            f"{_fmt_us(per_memory):>14}  "
            f"{per_lmdb / per_memory:>10.1f}x"
        )
    print()
    print(
        f"launch of {launched:,} jobs' records, each phase one batch over every job "
        f"(fdatasync {launch_sync:,.0f}/s around it):"
    )
    width = 32
    print(
        f"  {'phase':<{width}}  {'LMDB':>9}  {'memory':>9}  {'LMDB per job':>13}  "
        f"{'memory per job':>14}  {'LMDB/memory':>11}"
    )
    for name, lmdb_s in lmdb_launch.items():
        memory_s = memory_launch[name]
        print(
            f"  {name:<{width}}  {lmdb_s:>8.3f}s  {memory_s:>8.3f}s  "
            f"{_fmt_us(lmdb_s / launched):>13}  {_fmt_us(memory_s / launched):>14}  "
            f"{lmdb_s / memory_s:>10.1f}x"
        )
    create = "create (one each)"
    for label, keep in (
        ("the launch's commits (batched)", lambda k: k != create),
        ("with the creates", lambda k: True),
    ):
        lmdb_s = sum(v for k, v in lmdb_launch.items() if keep(k))
        memory_s = sum(v for k, v in memory_launch.items() if keep(k))
        print(
            f"  {label:<{width}}  {lmdb_s:>8.3f}s  {memory_s:>8.3f}s  "
            f"{_fmt_us(lmdb_s / launched):>13}  {_fmt_us(memory_s / launched):>14}  "
            f"{lmdb_s / memory_s:>10.1f}x"
        )
    print(
        f"  one commit at a time ({sample} jobs)  LMDB {_fmt_us(lmdb_single)} a job, memory "
        f"{_fmt_us(memory_single)} a job ({lmdb_single / memory_single:.1f}x); for "
        f"{launched:,} jobs that is {lmdb_single * launched:.1f}s on LMDB"
    )
    print()
    print(
        "ratio: LMDB commits per second / the sync rate beside them. LMDB/memory: the cost "
        "per job on LMDB over the same on the memory store (validating: it encodes what it "
        "keeps), in this run. "
        "Issue 19's target: a launch within 3x of the memory store."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
