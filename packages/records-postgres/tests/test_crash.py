"""kill -9 a writer at random moments: every batch it saw commit is there, whole; a batch cut
short is there for every job or for none; tokens never go back; the next writer goes on.

The kills land anywhere: while the writer connects, mid-transaction, while COMMIT is on its
way. PostgreSQL aborts the dead client's transaction and frees its row locks, so this is the
store's transactions (one per batch) and the server's WAL at work, not the store's own code.
"""

from __future__ import annotations

import json
import queue
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from jobdispatch.records.events import CallAnswered
from jobdispatch.records.store import Lease
from jobdispatch.testing import eventually
from jobdispatch_conformance.records import make_header
from jobdispatch_records_postgres import PostgresRecords

WRITER = Path(__file__).with_name("crash_writer.py")
# Each writer is a fresh interpreter (a few seconds on a loaded machine): kept few.
KILLS = 5
JOBS = [f"job-{i:02}" for i in range(20)]
LINE_TIMEOUT = 120.0
_TTL = timedelta(seconds=30)


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _acquire_all(store: PostgresRecords) -> list[Lease]:
    """Every job's lease for the checker. A writer killed after its acquire_many and before its
    release_many leaves its leases held until they expire (``_TTL``): wait that out, bounded."""

    def acquire_or_let_go() -> list[Lease]:
        """The leases acquired: all of them, or none (those taken are released again)."""
        held = [a for a in store.acquire_many(JOBS, "checker", _TTL) if isinstance(a, Lease)]
        if len(held) == len(JOBS):
            return held
        store.release_many(held)
        return []

    return eventually(
        acquire_or_let_go,
        f"every job's lease, free once a killed writer's expire ({_TTL})",
        within=_TTL.total_seconds() + LINE_TIMEOUT,
        every=1.0,
    )


def test_sigkilled_writers_lose_nothing_and_tear_nothing(
    new_config: Callable[[], dict[str, Any]],
) -> None:
    config = new_config()
    rng = random.Random(20)
    store = PostgresRecords(config)
    for job in JOBS:
        store.create(make_header(job))
    acknowledged = -1
    last_token = 0
    batch = 0
    try:
        for kill in range(KILLS):
            proc = subprocess.Popen(
                [sys.executable, str(WRITER), json.dumps(config), str(batch), *JOBS],
                stdout=subprocess.PIPE,
                text=True,
            )
            lines = _lines(proc)
            # Some kills land before the writer is even ready, most after a few commits.
            wanted = rng.choice([0, 1, 2, 4])
            seen = 0
            while seen < wanted:
                line = lines.get(timeout=LINE_TIMEOUT)
                assert line is not None, f"writer {kill} ended by itself"
                if line.startswith("appended "):
                    acknowledged = int(line.split()[1])
                    seen += 1
                elif line.startswith("leased "):
                    token = int(line.split()[1])
                    assert token > last_token
                    last_token = token
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=LINE_TIMEOUT)
            assert proc.stdout is not None
            proc.stdout.close()
            views = [store.read(job) for job in JOBS]
            revisions = {view.revision for view in views}
            # One batch is one transaction: every job has it, or none does.
            assert len(revisions) == 1, revisions
            (revision,) = revisions
            # Every batch the writer saw commit is there, at its revision, with its contents.
            assert revision >= acknowledged + 1
            for view in views:
                assert all(isinstance(e, CallAnswered) for e in view.events), view.events
                details = [e.detail for e in view.events if isinstance(e, CallAnswered)]
                assert details == [f"batch-{i}" for i in range(revision)]
            batch = revision
            # The dead writer's row locks are gone: this process takes every lease at once
            # (once the leases a writer killed between acquire and release still held have
            # expired), and its tokens are past every one the writer was handed.
            leases = _acquire_all(store)
            token = leases[0].token
            assert token > last_token
            last_token = token
            store.release_many(leases)
    finally:
        store.close()
