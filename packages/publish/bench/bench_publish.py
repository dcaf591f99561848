"""Benchmark: publishing a large save, and resolving among many published entries.

Run standalone (``python packages/publish/bench/bench_publish.py [--quick]``) or through
``nox -s bench``. It needs the S3 server ``tools/s3/up`` starts and finds it the way the tests do
(``JOBDISPATCH_S3_*`` variables, else the state file). Measured in the same run:

* publishing a 1 GiB save (``--quick``: 64 MiB) against a plain boto3 ``upload_file`` of the same
  file with the same transfer settings; the ratio is what publication costs on top of the upload
  (an existence check, one listing, one conditional write), target within 10 percent;
* resolve latency with 10,000 published entries (``--quick``: 500), on S3 and on a POSIX root,
  against listing the whole log, which is what finding the newest would cost without the
  inverted-step keys.

Prints a table; asserts nothing about timings.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GiB = 1 << 30
MiB = 1 << 20


def s3_settings() -> dict[str, str] | None:
    keys = ("JOBDISPATCH_S3_ENDPOINT", "JOBDISPATCH_S3_ACCESS_KEY", "JOBDISPATCH_S3_SECRET_KEY")
    found = {k: os.environ[k] for k in (*keys, "JOBDISPATCH_S3_REGION") if k in os.environ}
    if not all(k in found for k in keys):
        state = Path(os.environ.get("JOBDISPATCH_S3_STATE", "/var/lib/jobdispatch-s3")) / "env"
        try:
            for raw in state.read_text().splitlines():
                line = raw.strip().removeprefix("export ")
                if "=" in line and not line.startswith("#"):
                    k, _, v = line.partition("=")
                    found.setdefault(k, v)
        except OSError:
            return None
    found.setdefault("JOBDISPATCH_S3_REGION", "us-east-1")
    return found if all(k in found for k in keys) else None


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def make_file(path: Path, size: int) -> None:
    block = os.urandom(8 * MiB)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)


class Bench:
    def __init__(self, server: dict[str, str], quick: bool, workdir: Path) -> None:
        import boto3
        from botocore.config import Config

        self.quick = quick
        self.workdir = workdir
        self.env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": server["JOBDISPATCH_S3_ACCESS_KEY"],
            "AWS_SECRET_ACCESS_KEY": server["JOBDISPATCH_S3_SECRET_KEY"],
            "AWS_ENDPOINT_URL_S3": server["JOBDISPATCH_S3_ENDPOINT"],
            "AWS_REGION": server["JOBDISPATCH_S3_REGION"],
        }
        self.bucket = f"jd-bench-{secrets.token_hex(4)}"
        self.client = boto3.client(
            "s3",
            endpoint_url=server["JOBDISPATCH_S3_ENDPOINT"],
            aws_access_key_id=server["JOBDISPATCH_S3_ACCESS_KEY"],
            aws_secret_access_key=server["JOBDISPATCH_S3_SECRET_KEY"],
            region_name=server["JOBDISPATCH_S3_REGION"],
            config=Config(max_pool_connections=32),
        )
        self.client.create_bucket(Bucket=self.bucket)
        self.rows: list[tuple[str, str, str, str]] = []

    def store(self, prefix: str) -> Any:
        from jobdispatch_publish.config import Settings
        from jobdispatch_publish.root import parse_root
        from jobdispatch_publish.stores import open_store

        return open_store(parse_root(f"s3://{self.bucket}/{prefix}"), Settings(), self.env)

    def empty(self, prefix: str = "") -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if objects:
                self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
                )

    def settle(self) -> None:
        """Give the server's garbage collector time to reclaim a deleted large object (tools/s3/up
        runs it every 5 s; the cluster keeps objects in memory)."""
        if not self.quick:
            time.sleep(7)

    def close(self) -> None:
        self.empty()
        self.client.delete_bucket(Bucket=self.bucket)

    def publish_vs_upload(self) -> None:
        from boto3.s3.transfer import TransferConfig
        from jobdispatch_publish.config import S3Settings
        from jobdispatch_publish.identity import Identity
        from jobdispatch_publish.publish import publish

        size = 64 * MiB if self.quick else GiB
        rounds = 2 if self.quick else 3
        save = self.workdir / "save"
        save.mkdir()
        make_file(save / "model.bin", size)
        defaults = S3Settings()
        config = TransferConfig(
            multipart_threshold=defaults.multipart_threshold,
            multipart_chunksize=defaults.multipart_chunksize,
            max_concurrency=defaults.max_concurrency,
        )
        # Warm both paths (connection pools, the server's first-write costs) before timing.
        warm = self.workdir / "warm"
        warm.mkdir()
        make_file(warm / "w.bin", 24 * MiB)
        self.client.upload_file(str(warm / "w.bin"), self.bucket, "warm/w.bin", Config=config)
        publish(self.store("warm"), Identity("bench", 1, "warm"), warm, 1)
        self.empty("warm/")
        ours, plain = [], []
        for i in range(rounds):
            # Alternate which goes first, and empty the (in-memory) store between runs.
            order = ["plain", "ours"] if i % 2 == 0 else ["ours", "plain"]
            for which in order:
                if which == "plain":
                    key = f"plain/{i}/model.bin"
                    plain.append(
                        timed(
                            lambda key=key: self.client.upload_file(
                                str(save / "model.bin"), self.bucket, key, Config=config
                            )
                        )
                    )
                    self.empty("plain/")
                    self.settle()
                else:
                    store = self.store(f"ours{i}")
                    identity = Identity("bench", 1, str(i))
                    ours.append(timed(lambda s=store, ident=identity: publish(s, ident, save, 1)))
                    self.empty(f"ours{i}/")
                    self.settle()
        label = f"{size // MiB} MiB"
        p, o = statistics.median(plain), statistics.median(ours)
        self.rows.append(
            (
                f"upload {label}: boto3 upload_file",
                f"{p:.2f} s",
                f"{size / p / MiB:.0f} MiB/s",
                "1.00",
            )
        )
        self.rows.append(
            (
                f"publish {label}: jobdispatch-publish",
                f"{o:.2f} s",
                f"{size / o / MiB:.0f} MiB/s",
                f"{o / p:.2f}",
            )
        )
        # What the digest recorded at publication costs by itself (one read and SHA-256 of the
        # save), in this same run: publish does this beside the upload threads.
        from jobdispatch_publish.verify import hash_file

        h = statistics.median(timed(lambda: hash_file(save / "model.bin")) for _ in range(rounds))
        self.rows.append(
            (
                f"sha256 {label} (in publish)",
                f"{h:.2f} s",
                f"{size / h / MiB:.0f} MiB/s",
                f"{h / p:.2f}",
            )
        )

    def resolve_latency(self) -> None:
        from jobdispatch_publish import layout
        from jobdispatch_publish.entry import Entry, FileRecord
        from jobdispatch_publish.posix import PosixStore
        from jobdispatch_publish.resolve import newest, resolve

        count = 500 if self.quick else 10_000
        samples = 20 if self.quick else 50
        store = self.store("many")
        data = "bench/executions/1/0/step-shared.0-0/"
        store.write(data + "m", b"x")

        digest = hashlib.sha256(b"x").hexdigest()

        def entry(step: int) -> bytes:
            record = FileRecord("m", 1, None, digest)
            e = Entry("bench", 1, "0", step, data, (record,), "2026-01-01T00:00:00")
            return e.to_json()

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda s: store.create(layout.entry_key("bench", s), entry(s)), range(count)
                )
            )
        fill = time.perf_counter() - start

        posix_root = self.workdir / "posix"
        posix_root.mkdir()
        posix = PosixStore(posix_root)
        for s in range(count):
            posix.create(layout.entry_key("bench", s), entry(s))
        (posix_root / data).mkdir(parents=True)
        (posix_root / data / "m").write_bytes(b"x")

        def median_ms(fn: Callable[[], Any], n: int = samples) -> float:
            fn()  # warm the connection pool
            return statistics.median(timed(fn) for _ in range(n)) * 1000

        full_list = median_ms(lambda: list(store.keys(layout.log_prefix("bench"))), 5)
        s3_newest = median_ms(lambda: newest(store, "bench"))
        dest = self.workdir / "resume"

        def fetch() -> None:
            resolve(store, "bench", into=dest / secrets.token_hex(4))

        s3_fetch = median_ms(fetch)
        posix_newest = median_ms(lambda: newest(posix, "bench"))
        n = f"{count:,} entries"
        self.rows.append(
            (f"fill: {n} on S3 (16 threads)", f"{fill:.1f} s", f"{count / fill:.0f} /s", "")
        )
        self.rows.append(
            (f"S3: list the whole log, {n}", f"{full_list:.1f} ms", "(baseline)", "1.00")
        )
        self.rows.append(
            (f"S3: resolve newest, {n}", f"{s3_newest:.1f} ms", "", f"{s3_newest / full_list:.3f}")
        )
        self.rows.append(
            (
                f"S3: resolve + fetch, {n}",
                f"{s3_fetch:.1f} ms",
                "pin, fetch, unpin",
                f"{s3_fetch / full_list:.3f}",
            )
        )
        self.rows.append((f"POSIX: resolve newest, {n}", f"{posix_newest:.1f} ms", "", ""))

    def print(self) -> None:
        print_table(("measurement", "time", "rate / note", "ratio"), self.rows)


def print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """``rows`` under ``head`` in columns as wide as their widest cell, between rules (the
    publish benchmarks all print this way)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = "  ".join("-" * w for w in widths)
    print(line)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    print(line)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (64 MiB, 500 entries)")
    args = parser.parse_args(argv)
    server = s3_settings()
    if server is None:
        message = 'bench_publish: no S3 server; start one with eval "$(tools/s3/up)"'
        print(message, file=sys.stderr)
        return 1 if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1" else 0
    with tempfile.TemporaryDirectory(prefix="jd-bench-") as tmp:
        bench = Bench(server, args.quick, Path(tmp))
        try:
            bench.publish_vs_upload()
            bench.resolve_latency()
        finally:
            bench.close()
    bench.print()
    ratio = next(r[3] for r in bench.rows if r[0].startswith("publish"))
    print(f"publish / plain upload ratio: {ratio} (target: at most 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
