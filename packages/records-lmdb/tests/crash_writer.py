"""The crash test's writer processes (run as a script by test_crash.py; not a test module).

``python crash_writer.py`` is a *zygote*: it imports everything once, then for each command on
stdin forks a fresh writer, relays the writer's reports to stdout, and says how it ended. Forking
from a warm zygote makes a kill cycle cost milliseconds instead of an interpreter start, so the
default run can afford its kills and the long run its hundreds. The zygote never opens the
store, so nothing LMDB holds crosses a fork.

Command:   ``run <job> <revision> <seed> <map_size>``
Replies:   ``pid <n>``, then the writer's reports, then ``exit <status>`` (``-9`` when killed).
Reports (each written by one ``os.write`` only after the call it reports returned):
``A <job> <revision> <count> <prefix>``  an append of ``count`` events committed at ``revision``
``C <job>``                              a job created
``T <token>``                            a lease acquired with this token
"""

from __future__ import annotations

import os
import random
import sys
from datetime import UTC, datetime, timedelta

from jobdispatch.records.events import CallAnswered
from jobdispatch.types import Actor
from jobdispatch_conformance.records import evidence, make_header
from jobdispatch_records_lmdb import LmdbRecords

BY = Actor.supervisor("crash-writer")
TOKENS_JOB = "tokens"


def writer(path: str, job: str, revision: int, seed: int, map_size: int, out: int) -> None:
    rng = random.Random(seed)
    store = LmdbRecords(path, map_size=map_size)
    n = 0
    while n < 100_000:
        n += 1
        roll = rng.random()
        if roll < 0.1:
            side = f"side-{seed}-{n}"
            store.create(make_header(side), [evidence(i) for i in range(rng.randrange(3))])
            os.write(out, f"C {side}\n".encode())
        elif roll < 0.2:
            lease = store.acquire(TOKENS_JOB, f"w{seed}-{n}", timedelta(microseconds=1))
            os.write(out, f"T {lease.token}\n".encode())
        else:
            count = rng.randint(1, 5)
            prefix = f"{seed}-{n}"
            now = datetime.now(UTC)
            batch = [
                CallAnswered(
                    at=now,
                    by=BY,
                    call=i,
                    ok=True,
                    # Some values spill onto LMDB overflow pages: those must not tear either.
                    detail=f"{prefix}-{i}:" + "x" * rng.choice((0, 10, 100, 3000, 9000)),
                )
                for i in range(count)
            ]
            revision = store.append(job, batch, expect_revision=revision)
            os.write(out, f"A {job} {revision} {count} {prefix}\n".encode())


def zygote() -> None:
    path = sys.argv[1]
    for line in sys.stdin:
        _, job, revision, seed, map_size = line.split()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                writer(path, job, int(revision), int(seed), int(map_size), w)
                code = 0
            except BaseException as exc:  # report it: the parent fails the test with it
                os.write(w, f"E {type(exc).__name__}: {exc}\n".encode())
                code = 3
            os._exit(code)
        os.close(w)
        sys.stdout.write(f"pid {pid}\n")
        sys.stdout.flush()
        with os.fdopen(r, "rb", buffering=0) as reports:
            pending = b""
            while chunk := reports.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for report in lines:
                    sys.stdout.write(report.decode() + "\n")
                sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"exit {os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    zygote()
