"""Scheduler commands per poll: one query for many jobs against polling each job.

For N jobs (1,000; 100 with --quick), one supervisor poll through ``find_all`` (the adapter's
MultiFinder: one squeue and one sacct) is counted beside the same poll done per job (``find``
per job, which is what ``find_all`` does for an adapter without MultiFinder) and per object
(``inspect``), through a transport that counts commands. Both polls run in the same process
on the same data, and their answers are checked to agree.

By default the commands are answered from recorded output in the real cluster's formats
(no cluster needed). With ``--real`` and the cluster from tools/slurm/up, N gated jobs are
submitted (20; 10 with --quick), polled the same two ways, and cancelled. It prints which.

    python plugins/slurm/bench/bench_find.py [--quick] [--real]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobdispatch.spi import StartRequest, find_all
from jobdispatch.types import JobSpec
from jobdispatch_slurm import CountingTransport, LocalTransport, Settings, SlurmBackend
from jobdispatch_slurm.recorded import RecordedTransport, synthetic


def _measure(
    counter: CountingTransport, poll: Callable[[], Any]
) -> tuple[int, dict[str, int], float, Any]:
    counter.reset()
    t0 = time.perf_counter()
    answer = poll()
    elapsed = time.perf_counter() - t0
    return counter.total, dict(counter.counts), elapsed, answer


def _summary(found: dict[str, Any]) -> dict[str, list[tuple[str, str, int]]]:
    return {
        job: sorted((o.ref.id, str(o.state), len(o.executions)) for o in d.objects)
        for job, d in found.items()
    }


def run(
    n: int, backend: SlurmBackend, counter: CountingTransport, where: str, prefix: str = "b"
) -> bool:
    jobs = [f"{prefix}{i:05d}" for i in range(n)]
    backend.facts()  # the capability probe is cached per cluster: not part of a poll
    backend.user()
    many = _measure(counter, lambda: find_all(backend, jobs))
    # Per job, every find reads the user's whole queue and history (names cannot be listed in
    # advance, 0008 §6), so it is quadratic: it is measured on the first ``sample`` jobs and
    # its count and time scaled to n (the count is exactly linear: 2 commands per job).
    sample = jobs[: min(n, 100)]
    each = _measure(counter, lambda: {job: backend.find(job) for job in sample})
    scale = n / len(sample)
    each = (
        round(each[0] * scale),
        {k: round(v * scale) for k, v in each[1].items()},
        each[2] * scale,
        each[3],
    )
    refs = [o.ref for d in many[3].values() for o in d.objects]
    per_object = _measure(counter, lambda: [backend.inspect(r) for r in refs])
    agree = {j: many[3][j] for j in sample} == each[3] or _summary(
        {j: many[3][j] for j in sample}
    ) == _summary(each[3])
    print(f"scheduler commands per poll of {n} jobs ({len(refs)} objects), {where}:")
    print(f"  {'strategy':<34} {'commands':>9} {'per job':>8} {'seconds':>8}  by command")
    for label, (total, counts, secs, _) in (
        ("find_all (MultiFinder: one query)", many),
        (f"find per job (x{scale:g} of {len(sample)})", each),
        ("inspect per object", per_object),
    ):
        detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"  {label:<34} {total:>9} {total / n:>8.3f} {secs:>8.3f}  {detail}")
    print(f"  answers agree: {agree}; ratio per-job/one-query: {each[0] / max(many[0], 1):.0f}x")
    return agree and many[0] == 2


def recorded(n: int) -> bool:
    jobs = [f"b{i:05d}" for i in range(n)]
    squeue, sacct = synthetic(jobs)
    counter = CountingTransport(RecordedTransport(squeue, sacct))
    backend = SlurmBackend(
        Settings(user="root", output_dir="/nonexistent/bench-output"), transport=counter
    )
    return run(n, backend, counter, "recorded output (no cluster)")


def real(n: int) -> bool:
    from jobdispatch_slurm.testing import cluster_problem

    problem = cluster_problem()
    if problem is not None:
        print(f"real cluster: skipped ({problem})")
        return True
    counter = CountingTransport(LocalTransport())
    backend = SlurmBackend(Settings(), transport=counter)
    prefix = "b" + uuid.uuid4().hex[:8]  # this run's jobs only, not an earlier run's
    refs = []
    try:
        for i in range(n):
            spec = JobSpec(command=("true",))
            refs.append(
                backend.start(
                    StartRequest(job=f"{prefix}{i:05d}", submission=1, attempt=1, spec=spec)
                )
            )
        return run(n, backend, counter, "the real cluster (tools/slurm/up), gated jobs", prefix)
    finally:
        for ref in refs:
            backend.stop(ref, "benchmark done")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs")
    parser.add_argument("--real", action="store_true", help="also poll the real cluster")
    args = parser.parse_args(argv)
    ok = recorded(100 if args.quick else 1000)
    if args.real:
        ok = real(10 if args.quick else 20) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
