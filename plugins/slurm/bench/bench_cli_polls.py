"""Slurm commands per poll and per minute of ``jobdispatch supervise`` and ``jobdispatch run``,
counted on the real cluster by shims in front of Slurm's programs.

``supervise`` serves N jobs (100; 20 with --quick), each gated, opened and then pending or
running ``sleep 600``, at the adapter's pacing (Slurm: a poll every 30 s, jittered; with
--quick, ``--poll 2``, the floor), until it made 4 quiet polls; then everything is cancelled.
The baseline, counted by the same shims in the same run on the same jobs, is one round of what
the command did before: a status per job for its report (``observer.get``: an squeue and an
sacct each) beside the poll's own two, every half second. ``run`` follows one job
(``sleep 20``) at ``--poll 2`` to its end.

Target (issue 19): at most 2 scheduler commands per poll whatever the number of jobs.

    python plugins/slurm/bench/bench_cli_polls.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from jobdispatch_records_lmdb import LmdbRecords
from jobdispatch_slurm import LocalTransport, Settings, SlurmBackend
from jobdispatch_slurm.testing import (
    CountingShims,
    cluster_problem,
    count_cli_polls,
)

#: How often the command used to poll and report: its old default --poll.
OLD_POLL = 0.5


def _command() -> list[str]:
    script = Path(sys.executable).parent / "jobdispatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobdispatch_cli.main"]


def _per_job_round(jobs: list[str], root: Path) -> tuple[int, float]:
    """Commands of one status per job, as the report made them before (find per job), and
    the seconds the round took."""
    shims = CountingShims(root / "baseline-shims")
    backend = SlurmBackend(Settings(), transport=LocalTransport(env=shims.env()))
    backend.facts()
    backend.user()
    before = len(shims.calls())
    t0 = time.perf_counter()
    for job in jobs:
        backend.find(job)
    return len(shims.calls()) - before, time.perf_counter() - t0


def supervise(n: int, poll: float | None, root: Path) -> None:
    got = count_cli_polls(
        n, root, LmdbRecords, poll=poll, polls=4, timeout=1800, command=_command()
    )
    quiet = [b for b in got.bursts if {c.command for c in b} <= {"squeue", "sacct"}]
    sizes = [len(b) for b in quiet]
    commands, seconds = _per_job_round(list(got.jobs), root)
    baseline = commands + 2
    pace = f"--poll {poll:g}" if poll else "the adapter's pacing (30 s)"
    print(f"jobdispatch supervise, {n} jobs, {pace}:")
    print(f"  launch (submit excluded): {dict(sorted(got.launch.items()))}")
    print(
        f"  quiet polls: {len(quiet)}, commands each: {sizes} "
        f"(max {max(sizes, default=0)}, target <= 2)"
    )
    print(
        f"  steady: {len(got.steady)} commands in {got.window:.1f} s = "
        f"{got.per_minute:.1f} per minute"
    )
    # The old report looped with no pause longer than its poll: as fast as the cluster
    # answered a round, and no faster than every OLD_POLL.
    old_per_minute = baseline * 60 / max(seconds, OLD_POLL)
    print(
        f"  baseline (same run): a report round per job was {baseline} commands "
        f"(2N+2), {seconds:.1f} s a round here = {old_per_minute:.0f} per minute"
    )
    per_poll = statistics.mean(sizes) if sizes else float("nan")
    print(
        f"  ratio per poll, baseline/now: {baseline / per_poll:.0f}x; per minute: "
        f"{old_per_minute / max(got.per_minute, 1e-9):.0f}x"
    )


def run(root: Path) -> None:
    """``jobdispatch run`` of one job: commands per poll while it runs."""
    shims = CountingShims(root / "run-shims")
    config = root / "run.toml"
    config.write_text('default_cluster = "hpc"\n[clusters.hpc]\nadapter = "slurm"\n')
    job = root / "job.toml"
    job.write_text('name = "bench-run"\ncommand = ["sleep", "20"]\n')
    env = shims.env()
    env.update(JOBDISPATCH_CONFIG=str(config), XDG_STATE_HOME=str(root / "run-state"))
    done = subprocess.run(
        [*_command(), "run", str(job), "--poll", "2", "--no-timeline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    calls = shims.calls()
    bursts = CountingShims.bursts(calls, gap=1.0)
    quiet = [len(b) for b in bursts if {c.command for c in b} <= {"squeue", "sacct"}]
    print("jobdispatch run, 1 job, --poll 2:")
    every = dict(sorted(Counter(c.command for c in calls).items()))
    print(f"  exit {done.returncode}; every command: {every}")
    print(f"  quiet polls: {len(quiet)}, commands each: {quiet} (target <= 2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 jobs at --poll 2")
    args, _ = parser.parse_known_args()
    problem = cluster_problem()
    if problem is not None:
        print(f"bench_cli_polls: skipped, no real Slurm cluster ({problem})")
        return
    with tempfile.TemporaryDirectory(prefix="bench-polls-") as tmp:
        root = Path(tmp)
        if args.quick:
            supervise(20, 2.0, root / "supervise")
        else:
            supervise(100, None, root / "supervise")
        run(root)


if __name__ == "__main__":
    main()
