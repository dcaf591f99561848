"""The crash test's writer processes (run as a script by test_crash.py; not a test module).

``python crash_writer.py`` is a *zygote*: it imports everything once, then for each command on
stdin forks a fresh writer, relays the writer's reports to stdout, and says how it ended. Forking
from a warm zygote makes a kill cycle cost milliseconds instead of an interpreter start, so the
default run can afford its kills and the long run its hundreds. The zygote never opens the
store, so nothing LMDB holds crosses a fork.

Command:   ``run <job> <revision> <seed> <map_size> <batch-job>:<revision>,...``
Replies:   ``pid <n>``, then the writer's reports, then ``exit <status>`` (``-9`` when killed).
Reports (each written by one ``os.write`` only after the call it reports returned):
``A <job> <revision> <count> <prefix>``  an append of ``count`` events committed at ``revision``
``C <job>``                              a job created
``T <token>``                            a lease acquired with this token
``L <expires> <job>:<token> ...``         leases of the batch jobs acquired in one acquire_many
``R <expires> <job>:<token> ...``         leases of the batch jobs renewed in one renew_many
``b <prefix> <job> ...``                  an append_many with these parts is about to be made
                                         (written *before* the call: it may or may not land)
``B <prefix> <job>:<revision> ...``       that append_many returned, every part applied

The batch jobs (``batch-0`` ... , created by the test) are written only by the writers, in
batches: each part is ``count`` evidence events (detail ``<prefix>-<i>/<count>:...``) and one
decision under the writer's lease, so a part torn by a kill shows in the record's layout.
"""

from __future__ import annotations

import os
import random
import sys
from datetime import UTC, datetime, timedelta

from jobdispatch.records.events import AnyEvent, AttemptStarted, CallAnswered
from jobdispatch.records.store import AppendRequest, Lease
from jobdispatch.types import Actor
from jobdispatch_conformance.records import evidence, make_header
from jobdispatch_records_lmdb import LmdbRecords

BY = Actor.supervisor("crash-writer")
TOKENS_JOB = "tokens"
BATCH_JOBS = tuple(f"batch-{i}" for i in range(6))
#: Every writer holds the batch jobs under one name: the next writer re-acquires the dead
#: one's live leases under the same tokens, unless the test released them meanwhile.
BATCH_HOLDER = "crash-writer"
BATCH_TTL = timedelta(hours=1)


def _leases_line(kind: str, leases: list[Lease]) -> bytes:
    expires = leases[0].expires.isoformat() if leases else "-"
    parts = " ".join(f"{lease.job}:{lease.token}" for lease in leases)
    return f"{kind} {expires} {parts}\n".encode()


def batch_part(prefix: str, count: int, rng: random.Random) -> tuple[AnyEvent, ...]:
    """One job's part of a batch: ``count`` evidence events, then one decision (the store
    stamps it with the part's lease token)."""
    now = datetime.now(UTC)
    events: list[AnyEvent] = [
        CallAnswered(
            at=now,
            by=BY,
            call=i,
            ok=True,
            detail=f"{prefix}-{i}/{count}:" + "x" * rng.choice((0, 10, 100, 3000)),
        )
        for i in range(count)
    ]
    events.append(AttemptStarted(at=now, by=BY, submission=count, attempt=1))
    return tuple(events)


def writer(
    path: str,
    job: str,
    revision: int,
    seed: int,
    map_size: int,
    revisions: dict[str, int],
    out: int,
) -> None:
    rng = random.Random(seed)
    store = LmdbRecords(path, map_size=map_size)
    # The batch jobs' revisions come from the test, which has just read them: reading their
    # growing records here would make every writer slower than the last.
    acquired = store.acquire_many(BATCH_JOBS, BATCH_HOLDER, BATCH_TTL)
    assert all(isinstance(a, Lease) for a in acquired), acquired
    owned: dict[str, Lease] = {a.job: a for a in acquired if isinstance(a, Lease)}
    os.write(out, _leases_line("L", list(owned.values())))
    n = 0
    while n < 100_000:
        n += 1
        roll = rng.random()
        if roll < 0.25:
            prefix = f"{seed}-{n}"
            parts = rng.sample(BATCH_JOBS, rng.randint(1, len(BATCH_JOBS)))
            requests = [
                AppendRequest(
                    job=part,
                    events=batch_part(prefix, rng.randint(1, 4), rng),
                    expect_revision=revisions[part],
                    owner=owned[part],
                )
                for part in parts
            ]
            os.write(out, f"b {prefix} {' '.join(parts)}\n".encode())
            answers = store.append_many(requests)
            assert all(isinstance(a, int) for a in answers), answers
            for part, answer in zip(parts, answers, strict=True):
                revisions[part] = int(answer)  # type: ignore[arg-type]
            done = " ".join(f"{part}:{revisions[part]}" for part in parts)
            os.write(out, f"B {prefix} {done}\n".encode())
        elif roll < 0.35:
            renewed = store.renew_many(list(owned.values()), BATCH_TTL)
            assert all(isinstance(a, Lease) for a in renewed), renewed
            owned = {a.job: a for a in renewed if isinstance(a, Lease)}
            os.write(out, _leases_line("R", list(owned.values())))
        elif roll < 0.4:
            side = f"side-{seed}-{n}"
            store.create(make_header(side), [evidence(i) for i in range(rng.randrange(3))])
            os.write(out, f"C {side}\n".encode())
        elif roll < 0.5:
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
        _, job, revision, seed, map_size, batch = line.split()
        revisions = {k: int(v) for k, v in (p.split(":") for p in batch.split(","))}
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                writer(path, job, int(revision), int(seed), int(map_size), revisions, w)
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
