"""kill -9 at random moments: every commit a writer saw return is there, whole, afterwards.

A zygote (crash_writer.py) forks writer after writer; each appends batches of events (some
large enough for LMDB's overflow pages), creates jobs and takes leases, in a loop, reporting
every call that returned. The test SIGKILLs each writer at a random moment: during its start,
mid-commit, mid map growth, whenever. After every kill it checks, in this process:

* every reported commit is in the record, at the reported revision, with its contents;
* every event decodes (nothing is torn) and revisions run 1..n without a gap;
* every reported job is listed;
* lease tokens never go back, across kills;
* the next writer carries on: this process appends at once (the dead writer's lock is
  recovered), then the next writer continues from there.

Batches too: writers append to six batch jobs with ``append_many`` (several jobs' parts, each a
few evidence events and a decision under the writer's lease) and renew their leases with
``renew_many``, so many kills land while a batch is in flight. After every kill:

* every job's part of every batch is there whole or not at all (the record is a sequence of
  whole parts), and every reported part is there at its reported revision;
* a batch is one write transaction in this store, so an announced batch's parts are all there
  or none (whether or not it was reported);
* every acknowledged renewal is still in force: this process renews each lease with its clock
  set just before the expiry the writer was told, which succeeds only if that renewal (or a
  later one) is stored; and tokens never go back, growing past any lease this process released.

The default run kills 40 writers; ``--crash-kills=500`` is the long run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType

import attrs
import pytest
from jobdispatch.clock import ManualClock
from jobdispatch.records.events import AttemptStarted, CallAnswered, View
from jobdispatch.records.store import Lease
from jobdispatch_conformance.records import evidence, make_header
from jobdispatch_records_lmdb import LmdbRecords

WRITER = Path(__file__).with_name("crash_writer.py")
DEFAULT_KILLS = 40
LINE_TIMEOUT = 60.0


def _load_writer() -> ModuleType:
    """crash_writer.py is a script beside this file, not an importable module."""
    spec = importlib.util.spec_from_file_location("crash_writer", WRITER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CW = _load_writer()


@attrs.define
class Batches:
    """What the writers said about their batches, and the checks of it after each kill."""

    announced: dict[str, list[str]] = attrs.Factory(dict)  # prefix -> its jobs
    applied: dict[str, dict[str, int]] = attrs.Factory(dict)  # prefix -> job -> revision
    held: dict[str, Lease] = attrs.Factory(dict)  # job -> the lease last reported
    released: dict[str, int] = attrs.Factory(dict)  # job -> the token this process released
    revisions: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(CW.BATCH_JOBS, 0))
    renewals: int = 0
    landed_unreported: set[str] = attrs.Factory(set)  # batches stored but never reported

    def report(self, kind: str, rest: list[str]) -> None:
        if kind == "b":
            self.announced[rest[0]] = rest[1:]
        elif kind == "B":
            self.applied[rest[0]] = {
                job: int(revision) for job, revision in (p.split(":") for p in rest[1:])
            }
        elif kind in ("L", "R"):
            self.renewals += kind == "R"
            if rest[0] == "-":
                return
            expires = datetime.fromisoformat(rest[0])
            for part in rest[1:]:
                job, token = part.split(":")
                lease = Lease(job, CW.BATCH_HOLDER, int(token), expires)
                before = self.held.get(job)
                assert before is None or lease.token >= before.token, f"{job}: token went back"
                if job in self.released:
                    assert lease.token > self.released[job], f"{job}: a released token again"
                    del self.released[job]
                self.held[job] = lease

    def check(self, store: LmdbRecords, judge: LmdbRecords, clock: ManualClock) -> None:
        found: dict[str, dict[str, int]] = {}  # prefix -> job -> the revision its part ends at
        for job in CW.BATCH_JOBS:
            view = store.read(job)
            events, i, last_token = view.events, 0, 0
            while i < len(events):
                first = events[i]
                assert isinstance(first, CallAnswered), (job, i + 1, first)
                head = first.detail.split(":", 1)[0]
                prefix, place = head.rsplit("-", 1)
                count = int(place.split("/")[1])
                for k in range(count):
                    event = events[i + k] if i + k < len(events) else None
                    assert isinstance(event, CallAnswered), f"{job}: part {prefix} is torn"
                    assert event.detail.startswith(f"{prefix}-{k}/{count}:"), (job, i + k + 1)
                closing = events[i + count] if i + count < len(events) else None
                assert isinstance(closing, AttemptStarted), f"{job}: part {prefix} is torn"
                assert closing.submission == count, (job, i + count + 1)
                assert closing.token is not None and closing.token >= max(last_token, 1)
                last_token = closing.token
                i += count + 1
                found.setdefault(prefix, {})[job] = i
            self.revisions[job] = view.revision
        for prefix, parts in self.applied.items():
            assert found.get(prefix) == parts, (
                f"batch {prefix}: reported {parts}, stored {found.get(prefix)}"
            )
        for prefix, jobs in self.announced.items():
            stored = found.get(prefix, {})
            # One write transaction per batch: all of its parts, or none.
            assert not stored or sorted(stored) == sorted(jobs), (prefix, jobs, stored)
            if stored and prefix not in self.applied:
                self.landed_unreported.add(prefix)
        # Every acknowledged renewal is in force: renewing with the clock just before the
        # expiry the writer was told succeeds only if that expiry (or a later one) is stored.
        by_expiry: dict[datetime, list[Lease]] = {}
        for lease in self.held.values():
            by_expiry.setdefault(lease.expires, []).append(lease)
        for expires, leases in by_expiry.items():
            clock.set(expires - timedelta(microseconds=1))
            answers = judge.renew_many(leases, CW.BATCH_TTL)
            for lease, answer in zip(leases, answers, strict=True):
                assert isinstance(answer, Lease), f"{lease.job}: acknowledged lease lost: {answer}"
                assert answer.token == lease.token

    def release_some(self, store: LmdbRecords, rng: random.Random) -> None:
        """Give some batch jobs up, so the next writer must take them with greater tokens."""
        leases = [lease for lease in self.held.values() if rng.random() < 0.5]
        store.release_many(leases)
        for lease in leases:
            self.released[lease.job] = lease.token
            del self.held[lease.job]


class Zygote:
    """The writer-forking process, and its output as a queue of lines."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = LINE_TIMEOUT) -> str:
        got = self.lines.get(timeout=timeout)
        if got is None:
            pytest.fail(f"the zygote ended (status {self.proc.wait()})")
        return got

    def run(self, job: str, revision: int, seed: int, map_size: int, batch: dict[str, int]) -> int:
        assert self.proc.stdin is not None
        revisions = ",".join(f"{k}:{v}" for k, v in batch.items())
        self.proc.stdin.write(f"run {job} {revision} {seed} {map_size} {revisions}\n")
        self.proc.stdin.flush()
        first = self.line()
        assert first.startswith("pid "), first
        return int(first.split()[1])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _kill_a_writer(
    zygote: Zygote, rng: random.Random, job: str, revision: int, batches: Batches
) -> tuple[list[str], bool]:
    """Start a writer and SIGKILL it at a random moment: one time in five anywhere from before
    its store is open to its first commits, otherwise mid-stream after its first report.

    Returns what it reported and whether the kill took (else it had exited cleanly)."""
    # Map sizes far below the data make most writers grow the map as they go.
    map_size = rng.choice((1 << 16, 1 << 20, 1 << 26))
    pid = zygote.run(job, revision, rng.randrange(1 << 30), map_size, batches.revisions)
    lines: list[str] = []
    if rng.random() < 0.2:
        time.sleep(rng.uniform(0, 0.02))
    else:
        lines.append(zygote.line())
        time.sleep(rng.uniform(0, 0.05))
    with contextlib.suppress(ProcessLookupError):  # it may have failed: see below
        os.kill(pid, signal.SIGKILL)
    while not (line := zygote.line()).startswith("exit "):
        lines.append(line)
    status = int(line.split()[1])
    errors = [ln for ln in lines if ln.startswith("E ")]
    assert not errors, errors
    if status == -signal.SIGKILL:
        return lines, True
    assert status == 0, f"writer ended with {status}"
    return lines, False


@attrs.define
class Singles:
    """What the writers said about their single calls (the batches are :class:`Batches`'):
    each append (job -> revision -> how many events and their prefix), each job created and
    each lease token taken."""

    reported: dict[str, dict[int, tuple[int, str]]] = attrs.Factory(lambda: defaultdict(dict))
    created: list[str] = attrs.Factory(list)
    tokens: list[int] = attrs.Factory(list)

    def take(self, lines: list[str], batches: Batches, last: int) -> int:
        """Note a writer's reports; returns the last revision it reported appending (``last``
        when it reported none)."""
        for report in lines:
            kind, *rest = report.split()
            if kind == "A":
                rjob, at, appended_count, prefix = rest
                self.reported[rjob][int(at)] = (int(appended_count), prefix)
                last = int(at)
            elif kind == "C":
                self.created.append(rest[0])
            elif kind == "T":
                self.tokens.append(int(rest[0]))
            else:
                batches.report(kind, rest)
        return last

    def check(self, store: LmdbRecords, job: str, cycle: int) -> View:
        """What must hold of the single calls after a kill; returns ``job``'s record.

        A write first. A writer killed after writing its meta page but before publishing the
        new transaction id in lock.mdb leaves a commit that readers see only once the next
        writer has recovered the lock. Nobody was told of that commit, so nothing is lost; but
        reading first could see it "appear" just after."""
        tokens = self.tokens
        assert tokens == sorted(set(tokens)), "lease tokens went back"
        mine = store.acquire("tokens", f"parent-{cycle}", timedelta(microseconds=1))
        assert not tokens or mine.token > tokens[-1]
        tokens.append(mine.token)
        view = store.read(job)  # decodes every event, checks 1..n without a gap
        top = max(self.reported[job], default=0)
        assert view.revision >= top, f"{job}: reported revision {top}, stored {view.revision}"
        for revision, (count, prefix) in self.reported[job].items():
            for i in range(count):
                event = view.events[revision - count + i]
                assert event.detail.startswith(f"{prefix}-{i}:"), (job, revision, i)  # type: ignore[union-attr]
        return view

    def check_listed(self, store: LmdbRecords) -> None:
        listed = set(store.list())
        missing = [j for j in self.created if j not in listed]
        assert not missing, f"created but not listed: {missing[:5]}"


def test_commits_survive_sigkill(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    kills_wanted = (
        request.config.getoption("crash_kills", default=None)
        or int(os.environ.get("JOBDISPATCH_CRASH_KILLS", "0"))
        or DEFAULT_KILLS
    )
    seed = int(
        os.environ.get("JOBDISPATCH_CRASH_SEED", str(random.SystemRandom().randrange(1 << 30)))
    )
    rng = random.Random(seed)
    print(f"crash test: {kills_wanted} kills, seed {seed} (JOBDISPATCH_CRASH_SEED to replay)")

    path = tmp_path / "records"
    # A tiny first map: writers grow it as they go, and some are killed while at it.
    store = LmdbRecords(path, map_size=1 << 16)
    store.create(make_header("tokens"))
    for batch_job in CW.BATCH_JOBS:
        store.create(make_header(batch_job))
    judge_clock = ManualClock()
    judge = LmdbRecords(path, judge_clock)  # shares the environment; judges by its own clock
    batches = Batches()
    singles = Singles()
    revisions: dict[str, int] = {}
    kills = clean_exits = early = unreported = 0
    started = time.monotonic()
    zygote = Zygote(path)
    try:
        cycle = 0
        while kills < kills_wanted:
            cycle += 1
            job = f"crash-{cycle // 10}"
            if job not in revisions:
                store.create(make_header(job))
                revisions[job] = 0
            lines, killed = _kill_a_writer(zygote, rng, job, revisions[job], batches)
            if killed:
                kills += 1
                early += not lines
            else:
                clean_exits += 1
            last = singles.take(lines, batches, revisions[job])

            # ---- what must hold after the kill
            view = singles.check(store, job, cycle)
            # A commit that landed but was never reported: the kill hit inside commit().
            unreported += view.revision > last
            batches.check(store, judge, judge_clock)
            if rng.random() < 0.3:
                batches.release_some(store, rng)
            singles.check_listed(store)
            # The next writer carries on: first this process, then the next writer from here.
            revisions[job] = store.append(job, [evidence(cycle)], expect_revision=view.revision)
            assert revisions[job] == view.revision + 1
    finally:
        zygote.close()
    batches.check(store, judge, judge_clock)
    judge.close()

    # Everything, once more, after the last kill.
    reported = singles.reported
    appended = 0
    for job in revisions:
        view = store.read(job)
        appended += view.revision
        for revision, (count, prefix) in reported[job].items():
            assert view.events[revision - 1].detail.startswith(f"{prefix}-{count - 1}:")  # type: ignore[union-attr]
    store.close()
    elapsed = time.monotonic() - started
    print(
        f"crash test: {kills} kills ({early} before any report, {unreported} after a commit "
        f"landed but before it returned), {clean_exits} clean exits, "
        f"{sum(len(r) for r in reported.values())} appends reported, {appended} events, "
        f"{len(singles.created)} jobs created, {len(singles.tokens)} tokens; "
        f"{len(batches.announced)} batches "
        f"announced, {len(batches.applied)} reported "
        f"({sum(len(p) for p in batches.applied.values())} parts), "
        f"{len(batches.landed_unreported)} landed unreported, {batches.renewals} batch renewals; "
        f"{elapsed:.1f} s"
    )
