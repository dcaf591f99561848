"""Benchmark: one supervisor serving many jobs, the LMDB store against the memory store.

Run standalone (``python packages/supervise/bench/bench_supervise.py [--quick] [--jobs N]``) or
through ``nox -s bench``. In one run, for each store, with the memory adapter (auto-run) and a
manual clock that each poll advances by one second:

* submit N jobs (``Operator.submit``, one durable ``create`` each: timed, not a target);
* launch them: the supervisor's first poll, in which every job runs its rounds of steps
  (authorize, start, canonical, open, observe) until it waits, through the executor's phases
  (one commit of a round's decisions, the calls, one commit of its answers);
* then poll the N running jobs for 20 simulated seconds, so the window spans the renewal of
  every lease (30 s leases are renewed past half their life), and report the longest poll;
* with each poll's processor time beside its wall time: on a machine shared with other work
  the wall time grows with their load, the processor time hardly;
* and time one full garbage collection of what the supervisor holds then: ``serve`` runs one
  between two polls every ``full_collection_every`` (10 minutes), never during a poll.

LMDB runs twice: as the supervisor runs by default (its heap frozen between polls, spec 0004
D9), and with ``freeze_heap=False``, where the collector's full passes land inside polls. The
PostgreSQL store runs too when the server of ``tools/postgres/up`` answers (in a schema of its
own, dropped after), on loopback, so its figures are the store's cost without a network's.

The memory store is the baseline measured in the same run; the targets are issue 19's: the LMDB
launch within 3x of the memory store's, and no poll over 1 s with 10,000 running jobs, renewals
included. Prints a table; asserts nothing.

``--progress`` (issue 26) runs each store twice, without and with progress: every job names a
checkpoint root (ten roots, shared) and a stall rule, the in-memory progress source plays every
running job marking a step every simulated second, and the supervisor reads it (one listing per
root per poll). ``record_every`` is the least allowed, 10 s, so the 20 s window shows the bound
on the record's growth: at most one ``progress-seen`` per job in each of its ``record_every``
windows (phased by the job's id, ``jobdispatch.progress.window``): the first reading, then one
per window begun, two or three per job in the window; the table prints the average and the
most one job recorded in one of its windows (the bound: 1). All jobs are launched in one poll,
so only their phases spread their evidence over the interval.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from jobdispatch import Actor, JobSpec, ManualClock, ProgressSource, StallRule, compose
from jobdispatch.memory import MemoryBackend, Shape
from jobdispatch.memory.progress import MemoryProgress
from jobdispatch.progress import window
from jobdispatch.records import events as ev
from jobdispatch.records.memory import MemoryRecords
from jobdispatch.records.store import Records
from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_supervise import Supervisor
from jobdispatch_supervise.heap import HeapKeeper

#: Simulated seconds of polling after the launch: past the lease's half-life (15 s).
WINDOW = 20
OPS = Actor.human("bench")


class _Stop(Exception):
    """Ends serve from its sleep once the window is over."""


#: How many checkpoint roots the jobs share under ``--progress``.
ROOTS = 10
#: Each job's ``record_every`` under ``--progress``: the least allowed.
EVERY = timedelta(seconds=10)


def _spec(index: int, progress: bool) -> JobSpec:
    if not progress:
        return JobSpec(command=["train"])
    return JobSpec(
        command=["train"],
        progress=ProgressSource(root=f"/ckpt/{index % ROOTS}", record_every=EVERY),
        stall=StallRule(after=timedelta(minutes=10)),
    )


def measure(
    store: Records,
    clock: ManualClock,
    jobs: int,
    *,
    freeze_heap: bool = True,
    progress: bool = False,
) -> dict[str, float]:
    """Submit, launch and poll ``jobs`` jobs on ``store``; the seconds each part took."""
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock)
    cluster = compose(backend, store=store, clock=clock)
    source = MemoryProgress() if progress else None
    started = time.perf_counter()
    ids = [
        cluster.operator.submit(_spec(i, progress), by=OPS, supervised=True).job
        for i in range(jobs)
    ]
    submitted = time.perf_counter() - started
    step = [0]

    polls: list[float] = []
    cpu: list[float] = []
    mark = [time.perf_counter(), time.process_time()]

    def sleep(seconds: float) -> None:
        polls.append(time.perf_counter() - mark[0])
        cpu.append(time.process_time() - mark[1])
        if len(polls) > WINDOW:
            raise _Stop
        clock.advance(timedelta(seconds=1))
        if source is not None:  # every job marks a step each second, between two polls
            step[0] += 1
            now = clock()
            for i, job in enumerate(ids):
                source.mark(f"/ckpt/{i % ROOTS}", job, step[0], now, 1, "0")
        mark[:] = [time.perf_counter(), time.process_time()]

    supervisor = Supervisor(
        backend,
        store,
        clock=clock,
        sleep=sleep,
        poll=1.0,
        sweep_every=timedelta(days=1),
        freeze_heap=freeze_heap,
        progress=source,
    )
    mark[:] = [time.perf_counter(), time.process_time()]
    with contextlib.suppress(_Stop):
        supervisor.serve()
    running = sum(1 for job in store.list() if cluster.observer.get(job).state.value == "running")
    if running != jobs:
        msg = f"only {running} of {jobs} jobs were running after the launch"
        raise SystemExit(msg)
    collected = HeapKeeper(clock)
    collected.collect()
    seen = 0
    per_window: Counter[tuple[str, int]] = Counter()
    if source is not None:
        for job in ids:
            for e in store.read(job).events:
                if isinstance(e, ev.ProgressSeen):
                    seen += 1
                    per_window[job, window(job, EVERY, e.at)] += 1
    listings = sum(source.listings.values()) if source is not None else 0
    return {
        "progress events/job": seen / jobs,
        "most in one window": max(per_window.values(), default=0),
        "listings/poll": listings / len(polls),
        "full collection": collected.last_collection or 0.0,
        "submit": submitted,
        "launch": polls[0],
        "longest poll": max(polls[1:]),
        "median poll": sorted(polls[1:])[len(polls[1:]) // 2],
        "longest poll cpu": max(cpu[1:]),
        "median poll cpu": sorted(cpu[1:])[len(cpu[1:]) // 2],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 jobs instead of 10,000")
    parser.add_argument("--jobs", type=int, help="how many jobs (overrides --quick)")
    parser.add_argument(
        "--progress", action="store_true", help="each store also with every job marking progress"
    )
    parser.add_argument(
        "--only", nargs="*", help="stores to run (memory, lmdb, lmdb unfrozen, postgresql)"
    )
    args = parser.parse_args(argv)
    jobs = args.jobs or (1_000 if args.quick else 10_000)
    print(f"bench_supervise: {jobs} jobs, one supervisor, memory adapter", flush=True)
    results: dict[str, dict[str, float]] = {}
    runs: list[tuple[str, Callable[[ManualClock, Path], Records], bool]] = [
        ("memory", lambda clock, _: MemoryRecords(clock), True),
        ("lmdb", lambda clock, d: LmdbRecords(d / "records", clock), True),
        ("lmdb unfrozen", lambda clock, d: LmdbRecords(d / "unfrozen", clock), False),
    ]
    postgres = _postgres() if not args.only or "postgresql" in args.only else None
    if postgres is not None:
        runs.append(("postgresql", lambda clock, _: postgres.open(clock), True))
    if args.only:
        runs = [r for r in runs if r[0] in args.only or r[0] in ("memory", "lmdb")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, freeze in runs:
            for progress in (False, True) if args.progress else (False,):
                label = f"{name} +progress" if progress else name
                clock = ManualClock()
                store = make(clock, Path(tmp) / label.replace(" ", "-"))
                try:
                    results[label] = measure(
                        store, clock, jobs, freeze_heap=freeze, progress=progress
                    )
                finally:
                    store.close()
                    if name == "postgresql" and postgres is not None:
                        postgres.drop()
                print(f"  {label}: done", flush=True)
    mem, lmdb = results["memory"], results["lmdb"]
    names = list(results)
    width = max(15, *(len(n) + 2 for n in names))
    print(
        f"{'(seconds)':20}"
        + "".join(f"{n:>{width}}" for n in names)
        + f"{'lmdb/memory':>13}  target"
    )
    targets = {"launch": "lmdb within 3x", "longest poll": "no poll over 1 s"}
    rows = (
        "submit",
        "launch",
        "median poll",
        "longest poll",
        "longest poll cpu",
        "median poll cpu",
        "full collection",
        *(("progress events/job", "most in one window", "listings/poll") if args.progress else ()),
    )
    for row in rows:
        ratio = lmdb[row] / mem[row] if mem[row] else float("inf")
        cells = "".join(f"{results[n][row]:{width}.3f}" for n in names)
        print(f"{row:20}{cells}{ratio:12.2f}x  {targets.get(row, '')}")
    print("(a full collection runs between two polls every 10 minutes, never inside one;")
    print(" cpu: this process's processor time, which other load on the machine does not")
    print(" inflate; the PostgreSQL server's own work is not in it)")
    launch_ok = lmdb["launch"] <= 3 * mem["launch"]
    poll_ok = max(r["longest poll"] for r in results.values()) <= 1.0
    print(
        f"targets: launch {'met' if launch_ok else 'MISSED'}; "
        f"longest poll {'met' if poll_ok else 'MISSED'}"
    )
    return 0


class _Postgres:
    """The PostgreSQL of tools/postgres/up, in a schema of its own for one run."""

    def __init__(self, config: dict[str, object]) -> None:
        from jobdispatch_records_postgres import testing

        self.config = config
        self.schema = testing.new_schema_name("bench")

    def open(self, clock: ManualClock) -> Records:
        from jobdispatch_records_postgres import PostgresRecords

        # The bench's clock is pinned as each write's instant, as the memory and LMDB stores
        # judge leases by it: the polls advance it a second each.
        return PostgresRecords({**self.config, "schema": self.schema}, clock)

    def drop(self) -> None:
        from jobdispatch_records_postgres import testing

        testing.drop_schema(dict(self.config), self.schema)


def _postgres() -> _Postgres | None:
    """The test server when it answers (its run is left out, saying why, when it does not)."""
    try:
        from jobdispatch_records_postgres import testing
    except ImportError:
        print("  postgresql: skipped, jobdispatch-records-postgres is not installed")
        return None
    problem = testing.problem()
    if problem is not None:
        print(f"  postgresql: skipped, {problem}")
        return None
    return _Postgres(testing.require())


if __name__ == "__main__":
    sys.exit(main())
