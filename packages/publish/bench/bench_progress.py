"""Benchmark: what a progress mark costs a job, and what reading 10,000 jobs' progress costs.

Run standalone: ``python packages/publish/bench/bench_progress.py [--quick] [--jobs N]``. The S3
rows need the server ``tools/s3/up`` starts (found as the tests find it) and are left out
without it. Every figure is a median of repeats, and each comes with a baseline measured in the
same run on the same machine, so the ratio means something on a loaded machine:

* a progress call in Python on a POSIX root, when it writes (one ``rename``) and when the throttle
  skips it (most calls), against a plain open/write/rename of a small file, the least a write
  of a file on that file system costs; target: under 5 ms;
* the command ``jobdispatch-publish progress --step N`` when throttled, against ``python -c
  pass`` (the process start-up that any command pays);
* on S3, a writing mark (``PutObject`` + ``DeleteObjects``) against one plain ``put_object``;
* the reader over ``--jobs`` jobs (10,000; ``--quick``: 1,000), each with a mark, a publication
  and a resumed entry under one root, against the bare listing of the same folder
  (``os.scandir``; on S3 a plain boto3 ``list_objects_v2`` pagination), taken in turn.

Prints a table; asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_publish import print_table, s3_settings

Row = tuple[str, str, str, str]


def median_s(fn: Callable[[], Any], n: int) -> float:
    """The median wall time of ``n`` calls of ``fn``."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def paired_s(a: Callable[[], Any], b: Callable[[], Any], n: int) -> tuple[float, float]:
    """Medians of ``n`` runs each of ``a`` and ``b``, taken in turn (a, b, b, a, a, b, ...) after
    one unmeasured run of each, so that a server warming up or a load that changes during the
    run weighs on both alike."""
    a()
    b()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = ((0, a), (1, b)) if i % 2 == 0 else ((1, b), (0, a))
        for which, fn in order:
            start = time.perf_counter()
            fn()
            times[which].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def per_call_s(fn: Callable[[int], Any], calls: int, repeats: int = 5) -> float:
    """The median over ``repeats`` of the mean time of ``calls`` calls of ``fn(i)``."""
    results = []
    i = 0
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(i)
            i += 1
        results.append((time.perf_counter() - start) / calls)
    return statistics.median(results)


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


class StepClock:
    """A clock that moves ``by`` seconds at each reading: every mark is due (or none is)."""

    def __init__(self, by: float) -> None:
        self.now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
        self.by = dt.timedelta(seconds=by)

    def __call__(self) -> dt.datetime:
        self.now += self.by
        return self.now


def fill(root_key: Callable[[str], None], jobs: int, threads: int) -> None:
    """Leave a mark, a publication and a resumed entry for each of ``jobs`` jobs."""
    from jobdispatch_publish import layout
    from jobdispatch_publish.identity import Identity

    base = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    keys = []
    for n in range(jobs):
        ident = Identity(f"job{n:06d}", 1 + n % 3, "0")
        at = base + dt.timedelta(seconds=n % 600)
        keys.append(layout.progress_key("resumed", ident, n, at))
        keys.append(layout.progress_key("published", ident, n + 100, at))
        keys.append(layout.progress_key("mark", ident, n + 150, at + dt.timedelta(seconds=30)))
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(root_key, keys))


class Bench:
    def __init__(self, quick: bool, jobs: int, workdir: Path) -> None:
        self.quick = quick
        self.jobs = jobs
        self.workdir = workdir
        self.rows: list[Row] = []

    def add(self, what: str, seconds: float, note: str = "", ratio: str = "") -> None:
        self.rows.append((what, fmt(seconds), note, ratio))

    # -- POSIX: the job's side -------------------------------------------------------------------

    def posix_marks(self) -> None:
        from jobdispatch_publish.identity import Identity
        from jobdispatch_publish.marks import Marker
        from jobdispatch_publish.posix import PosixStore

        root = self.workdir / "marks"
        root.mkdir()
        calls = 200 if self.quick else 1000
        folder = self.workdir / "plain"
        folder.mkdir()

        def plain(i: int) -> None:
            temp = folder / f".tmp-{i}"
            with open(temp, "wb") as f:
                f.write(b"{}")
            os.rename(temp, folder / "latest")

        baseline = per_call_s(plain, calls)
        self.add("plain open/write/rename", baseline, "a 2-byte file, POSIX", "1.00 (baseline)")

        store = PosixStore(root)
        writing = Marker(store, Identity("job-w", 1, "0"), interval=60, clock=StepClock(61))
        writing.mark(0)  # the first call lists the job's keys once, to adopt a predecessor's
        w = per_call_s(lambda i: writing.mark(i + 1), calls)
        self.add("progress(), a mark written", w, "one rename", f"{w / baseline:.2f}")

        skipping = Marker(store, Identity("job-s", 1, "0"), interval=60, clock=StepClock(0.001))
        skipping.mark(0)
        s = per_call_s(lambda i: skipping.mark(i + 1), calls * 50)
        self.add("progress(), throttled", s, "no I/O", f"{s / baseline:.3f}")

        from jobdispatch_publish import marks

        env = {
            "JOBDISPATCH_JOB": "job-f",
            "JOBDISPATCH_SUBMISSION": "1",
            "JOBDISPATCH_EXECUTION": "0",
            "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
        }
        marks._default.clear()
        marks.progress(0, env=env)
        f = per_call_s(lambda i: marks.progress(i + 1, env=env), calls * 50)
        marks._default.clear()
        self.add("jobdispatch_publish.progress(n)", f, "throttled, 60 s", f"{f / baseline:.3f}")

    def posix_command(self) -> None:
        root = self.workdir / "cmd"
        root.mkdir()
        env = {
            **os.environ,
            "JOBDISPATCH_JOB": "job-c",
            "JOBDISPATCH_SUBMISSION": "1",
            "JOBDISPATCH_EXECUTION": "0",
            "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
            "JOBDISPATCH_PROGRESS_STATE": str(self.workdir / "cmd-state.json"),
        }
        n = 5 if self.quick else 11
        pass_s = median_s(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), n)
        helper = [sys.executable, "-m", "jobdispatch_publish", "progress"]
        subprocess.run([*helper, "--step", "0"], env=env, check=True)
        steps = iter(range(1, 1000))
        cmd_s = median_s(
            lambda: subprocess.run([*helper, "--step", str(next(steps))], env=env, check=True), n
        )
        self.add("process: python -c pass", pass_s, "", "1.00 (baseline)")
        self.add(
            "process: jobdispatch-publish progress", cmd_s, "throttled", f"{cmd_s / pass_s:.2f}"
        )

    # -- POSIX: the reader ----------------------------------------------------------------------

    def posix_reader(self) -> None:
        from jobdispatch_publish.posix import PosixStore
        from jobdispatch_publish.reader import read_progress

        root = self.workdir / "reader"
        folder = root / "_progress"
        folder.mkdir(parents=True)

        def touch(key: str) -> None:
            os.close(os.open(root / key, os.O_WRONLY | os.O_CREAT, 0o666))

        fill(touch, self.jobs, 4)
        store = PosixStore(root)
        n = 5 if self.quick else 9

        def scan() -> None:
            with os.scandir(folder) as it:
                for _ in it:
                    pass

        snapshot = read_progress(store)
        assert len(snapshot.jobs) == self.jobs, len(snapshot.jobs)
        bare, read = paired_s(scan, lambda: read_progress(store), n)
        keys = f"{snapshot.listed:,} keys"
        self.add(f"POSIX: scandir of {self.jobs:,} jobs' progress", bare, keys, "1.00 (baseline)")
        self.add(f"POSIX: read_progress, {self.jobs:,} jobs", read, keys, f"{read / bare:.2f}")

    # -- S3 ------------------------------------------------------------------------------------

    def s3(self, server: dict[str, str]) -> None:
        import boto3
        from botocore.config import Config
        from jobdispatch_publish.config import Settings
        from jobdispatch_publish.identity import Identity
        from jobdispatch_publish.marks import Marker
        from jobdispatch_publish.reader import read_progress
        from jobdispatch_publish.root import parse_root
        from jobdispatch_publish.stores import open_store

        client = boto3.client(
            "s3",
            endpoint_url=server["JOBDISPATCH_S3_ENDPOINT"],
            aws_access_key_id=server["JOBDISPATCH_S3_ACCESS_KEY"],
            aws_secret_access_key=server["JOBDISPATCH_S3_SECRET_KEY"],
            region_name=server["JOBDISPATCH_S3_REGION"],
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=32),
        )
        bucket = f"jd-bench-progress-{secrets.token_hex(4)}"
        client.create_bucket(Bucket=bucket)
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": server["JOBDISPATCH_S3_ACCESS_KEY"],
            "AWS_SECRET_ACCESS_KEY": server["JOBDISPATCH_S3_SECRET_KEY"],
            "AWS_ENDPOINT_URL_S3": server["JOBDISPATCH_S3_ENDPOINT"],
            "AWS_REGION": server["JOBDISPATCH_S3_REGION"],
        }
        try:
            store = open_store(parse_root(f"s3://{bucket}/marks"), Settings(), env)
            calls = 20 if self.quick else 60
            plain = per_call_s(
                lambda i: client.put_object(Bucket=bucket, Key=f"plain/{i}", Body=b"{}"), calls
            )
            self.add("S3: plain put_object", plain, "2 bytes", "1.00 (baseline)")
            marker = Marker(store, Identity("job-w", 1, "0"), interval=60, clock=StepClock(61))
            marker.mark(0)
            w = per_call_s(lambda i: marker.mark(i + 1), calls)
            self.add("S3: progress(), a mark written", w, "PUT + DELETE", f"{w / plain:.2f}")

            reader_store = open_store(parse_root(f"s3://{bucket}/reader"), Settings(), env)

            def put(key: str) -> None:
                client.put_object(Bucket=bucket, Key=f"reader/{key}", Body=b"")

            fill(put, self.jobs, 32)
            n = 3 if self.quick else 5

            def bare_list() -> None:
                pages = client.get_paginator("list_objects_v2")
                for _ in pages.paginate(Bucket=bucket, Prefix="reader/_progress/"):
                    pass

            snapshot = read_progress(reader_store)
            assert len(snapshot.jobs) == self.jobs, len(snapshot.jobs)
            bare, read = paired_s(bare_list, lambda: read_progress(reader_store), n)
            keys = f"{snapshot.listed:,} keys, {-(-snapshot.listed // 1000)} pages"
            self.add(f"S3: bare listing, {self.jobs:,} jobs", bare, keys, "1.00 (baseline)")
            self.add(f"S3: read_progress, {self.jobs:,} jobs", read, keys, f"{read / bare:.2f}")
        finally:
            pages = client.get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=bucket):
                objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if objs:
                    client.delete_objects(Bucket=bucket, Delete={"Objects": objs, "Quiet": True})
            client.delete_bucket(Bucket=bucket)

    def print(self) -> None:
        print_table(("measurement", "median", "note", "ratio"), self.rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and 1,000 jobs")
    parser.add_argument("--jobs", type=int, help="jobs under the reader's root (10,000)")
    args = parser.parse_args(argv)
    jobs = args.jobs or (1000 if args.quick else 10_000)
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as tmp:
        bench = Bench(args.quick, jobs, Path(tmp))
        bench.posix_marks()
        bench.posix_command()
        bench.posix_reader()
        server = s3_settings()
        if server is None:
            print("no S3 server (run tools/s3/up): S3 rows left out", file=sys.stderr)
        else:
            bench.s3(server)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cores")
    bench.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
