"""Benchmark: batched durable commits on the PostgreSQL store, beside the LMDB store in the
same run.

Run standalone (``python packages/records-postgres/bench/bench_records.py [--quick]``) or
through ``nox -s bench``, with the server of ``tools/postgres/up`` running (without one it
says so and measures nothing; under ``JOBDISPATCH_REQUIRE_SERVICES=1`` that is an error).

For batches of 1, 10, 100 and 1,000 jobs (one event each, ``append_many`` with every job's
revision check), and for ``renew_many`` of as many leases (what a supervisor pays each lease
period), it measures batches per second and job commits per second on

* the baseline: the LMDB store in a temporary directory on this host, the same calls;
* PostgreSQL on loopback, ``fsync`` and ``synchronous_commit`` on: each batch one
  transaction, one WAL flush.

Prints a table with each rate beside the baseline and their ratio; asserts nothing. The ratio
says what sharing the store across hosts costs per commit; batches are what make it
affordable (the WAL flush and the round trips are paid once per batch, not per job).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from jobdispatch.records.events import CallAnswered, Header
from jobdispatch.records.store import AppendRequest, Lease, Records
from jobdispatch.types import Actor
from jobdispatch_conformance.records import make_header
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_records_postgres import PostgresRecords, testing

BY = Actor.supervisor("bench")
AT = datetime(2026, 1, 1, tzinfo=UTC)
SIZES = (1, 10, 100, 1000)


def header(job: str) -> Header:
    """The conformance suite's small valid header, created by the bench at ``AT``."""
    return make_header(job, at=AT)


def rate(seconds: float, body: Callable[[int], None]) -> float:
    """Calls of ``body(i)`` per second, for at least ``seconds`` (and at least 3 calls)."""
    start = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - start < seconds:
        body(n)
        n += 1
    return n / (time.perf_counter() - start)


def measure(store: Records, size: int, seconds: float) -> tuple[float, float]:
    """(append batches per second, renew batches per second) for batches of ``size`` jobs."""
    jobs = [f"b{size}-{i:04}" for i in range(size)]
    for job in jobs:
        store.create(header(job))
    revisions = dict.fromkeys(jobs, 0)

    def append(n: int) -> None:
        event = CallAnswered(at=AT, by=BY, call=n, ok=True, detail="ok")
        answers = store.append_many(
            [AppendRequest(job=j, events=(event,), expect_revision=revisions[j]) for j in jobs]
        )
        for job, answer in zip(jobs, answers, strict=True):
            assert isinstance(answer, int), answer
            revisions[job] = answer

    appends = rate(seconds, append)
    leases = [lease for lease in store.acquire_many(jobs, "bench", timedelta(hours=1))]
    held: list[Lease] = [lease for lease in leases if isinstance(lease, Lease)]
    assert len(held) == len(jobs)

    def renew(_: int) -> None:
        answers = store.renew_many(held, timedelta(hours=1))
        assert all(isinstance(a, Lease) for a in answers)

    renews = rate(seconds, renew)
    return appends, renews


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    args = parser.parse_args(argv)
    seconds = 0.3 if args.quick else 2.0
    why = testing.problem()
    if why is not None:
        print(f"bench_records (postgres): skipped: {why}")
        return 1 if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1" else 0
    config: dict[str, Any] = testing.server_config() or {}
    config["schema"] = testing.new_schema_name("bench")
    rows: list[tuple[str, float, float]] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-lmdb-") as directory,
            LmdbRecords(directory) as lmdb_store,
            PostgresRecords(config) as pg_store,
        ):
            for size in SIZES:
                base_append, base_renew = measure(lmdb_store, size, seconds)
                pg_append, pg_renew = measure(pg_store, size, seconds)
                rows.append((f"append_many of {size}", base_append * size, pg_append * size))
                rows.append((f"renew_many of {size}", base_renew * size, pg_renew * size))
    finally:
        testing.drop_schema(config, config["schema"])
    print("job commits per second (batches per second x batch size); one process, one host")
    print(f"{'batch':<22}{'LMDB (baseline)':>18}{'PostgreSQL':>14}{'ratio':>9}")
    for name, base, pg in rows:
        print(f"{name:<22}{base:>18,.0f}{pg:>14,.0f}{pg / base:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
