"""The simulator's command line.

    python -m jobdispatch_sim run --seeds 2000          # a sweep, with the coverage report
    python -m jobdispatch_sim run --seed 1014           # one seed, its options and whole trace
    python -m jobdispatch_sim run --seed 7 --mutant no-fencing
    python -m jobdispatch_sim run --seed-file tools/sim/regressions.txt   # every seed that failed
    python -m jobdispatch_sim run --start 2000000 --seeds 200000         # seeds CI never runs
    python -m jobdispatch_sim mutants                   # every mutant must be caught

A sweep fails on any violation, and (from ``--coverage-gate`` seeds on, 500 by default) when a
required situation never occurred. Exit status 0 means every promise held and was exercised.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from jobdispatch_sim.coverage import REQUIRED, Coverage
from jobdispatch_sim.mutants import MUTANTS
from jobdispatch_sim.runner import Result, run_seed, sweep


def _workers(value: int | None) -> int:
    return value if value else max(1, min(4, os.cpu_count() or 1))


def read_seed_file(path: Path) -> list[int]:
    """The seeds of a regression list: one per line, ``#`` starts a comment, blank lines are
    skipped. A line that is not a seed is an error naming the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"cannot read the seed file {path}: {exc.strerror or exc}"
        raise SystemExit(msg) from None
    seeds: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        word = line.split("#", 1)[0].strip()
        if not word:
            continue
        if not word.isdigit():
            msg = f"{path}:{number}: {word!r} is not a seed (a non-negative integer)"
            raise SystemExit(msg)
        seeds.append(int(word))
    return seeds


def _run(args: argparse.Namespace) -> int:
    if args.seed is not None:
        result = run_seed(args.seed, args.mutant, trace=True)
        print(result.report())
        return 0 if result.ok else 1
    seeds: Sequence[int]
    workers = _workers(args.workers)
    if args.seed_file is not None:
        seeds = read_seed_file(args.seed_file)
        print(f"sim: {len(seeds)} seeds from {args.seed_file}, {workers} workers")
    else:
        seeds = range(args.start, args.start + args.seeds)
        print(
            f"sim: seeds {seeds.start}..{seeds.stop - 1} ({len(seeds)}), {workers} workers"
            + (f", mutant {args.mutant}" if args.mutant else "")
        )
    began = time.perf_counter()
    coverage = Coverage()
    failed: list[Result] = []
    jobs = settled = 0
    for i, result in enumerate(sweep(seeds, args.mutant, workers=workers), start=1):
        coverage.merge(result.coverage)
        jobs += result.jobs
        settled += result.settled
        if not result.ok:
            failed.append(result)
            if len(failed) <= 3:
                print(result.report(), flush=True)
            else:  # one line each, so a long sweep cut short still names every failing seed
                detail = str(result.violations[0]) if result.violations else "failed"
                print(f"  FAILED seed {result.seed}: {detail[:160]}", flush=True)
            if args.stop:
                break
        if i % 1000 == 0:
            print(
                f"  {i} seeds, {len(failed)} failing, {time.perf_counter() - began:.0f}s",
                flush=True,
            )
    elapsed = time.perf_counter() - began
    print("coverage (* required):")
    for line in coverage.table():
        print("  " + line)
    missing = coverage.missing(REQUIRED)
    print(
        f"sim: {len(seeds)} seeds, {len(failed)} failing, {jobs} jobs ({settled} settled), "
        f"{elapsed:.1f}s, {len(seeds) / elapsed:.1f} seeds/s"
    )
    if failed:
        print("failing seeds: " + " ".join(str(r.seed) for r in failed[:50]))
        print(f"replay: {failed[0].replay()}")
        return 1
    if missing and len(seeds) >= args.coverage_gate:
        print("sim: required situations never happened: " + "; ".join(missing))
        return 1
    return 0


def _mutants(args: argparse.Namespace) -> int:
    names = args.only or list(MUTANTS)
    workers = _workers(args.workers)
    print(f"mutants: {len(names)}, at most {args.max_seeds} seeds each, {workers} workers")
    missed = []
    rows = []
    for name in names:
        began = time.perf_counter()
        caught: Result | None = None
        ran = 0
        for result in sweep(range(args.max_seeds), name, workers=workers):
            ran += 1
            if not result.ok:
                caught = result
                break
        took = time.perf_counter() - began
        if caught is None:
            missed.append(name)
            rows.append(f"  {name:<26} NOT CAUGHT in {ran} seeds ({took:.1f}s)")
        else:
            v = caught.violations[0]
            rows.append(
                f"  {name:<26} caught by seed {caught.seed:<4} ({ran} seeds, {took:.1f}s): "
                f"invariant {v.invariant}, {v.detail[:90]}"
            )
        print(rows[-1], flush=True)
    if missed:
        print("mutants: not caught: " + ", ".join(missed))
        return 1
    print("mutants: every one caught")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jobdispatch-sim", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run seeds (the default command)")
    run.add_argument("--seed", type=int, help="replay one seed and print its whole trace")
    run.add_argument("--seeds", type=int, default=2000, help="how many seeds to sweep")
    run.add_argument("--start", type=int, default=0, help="the first seed of the sweep")
    run.add_argument(
        "--seed-file",
        type=Path,
        help="sweep the seeds listed in this file (one per line, # comments) instead",
    )
    run.add_argument("--mutant", choices=sorted(MUTANTS), help="run under one mutant")
    run.add_argument("--workers", type=int, default=0, help="processes (default: cores, <=4)")
    run.add_argument("--stop", action="store_true", help="stop at the first failing seed")
    run.add_argument(
        "--coverage-gate",
        type=int,
        default=500,
        help="from this many seeds on, a required situation that never happened fails the run",
    )
    mut = sub.add_parser("mutants", help="show every mutant caught within --max-seeds")
    mut.add_argument("--max-seeds", type=int, default=1000)
    mut.add_argument("--workers", type=int, default=0)
    mut.add_argument("--only", nargs="*", choices=sorted(MUTANTS))
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("run", "mutants", "-h", "--help"):
        argv = ["run", *argv]
    args = parser.parse_args(argv)
    if args.command == "mutants":
        return _mutants(args)
    return _run(args)
