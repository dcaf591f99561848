"""Notices arrive at least once, and twice only when a delivery's record was lost: supervisors
in several processes share one PostgreSQL store (a private server, tests/private_postgres.py)
and are SIGKILLed at random moments, many of them in the middle of a delivery, over a scripted
run on the local adapter with preemptions, recoveries, a spent budget and successes.

A real HTTP receiver on loopback (slow on purpose: each request takes a while, so kills land in
deliveries) records every notice it took, with the sender's holder id. At the end:

* every notice each record implies arrived at least once;
* every duplicate is explained: each arrival of a key but the one the record names as
  delivered came from a supervisor that was SIGKILLed, and the record holds no delivery by it
  (its send landed, its ``notice-delivered`` never did);
* every record holds exactly one delivery of each notice to the sink.

The counts (events, deliveries, duplicates and their explanations) are printed (``-s``) and
written to ``$JOBDISPATCH_KILL_REPORT`` when set.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.testing import eventually
from private_postgres import PrivateServer

pg = pytest.importorskip("jobdispatch_records_postgres")
from jobdispatch.notices import delivered, notices  # noqa: E402
from jobdispatch.records import events as ev  # noqa: E402
from jobdispatch.types import NoticeKind  # noqa: E402
from jobdispatch_supervise.testing import Receiver  # noqa: E402

SCHEMA = "jobdispatch_notices_kill"
SUPERVISORS = 3
LEASE_TTL = 2.0
POLL = 0.05
#: Each request waits this long before it is answered: kills land in deliveries.
RECEIVER_DELAY = 0.15
#: Preemptions per job, in order: 0 (succeeds at once), 1 and 2 (recovered, then succeeds),
#: 3 (the budget of 2 spent: the job fails, escalated).
PREEMPTIONS = (0, 1, 2, 3, 2, 1)
BOUND = 600.0


class Run:
    """The cluster (local adapter, PostgreSQL store), its supervisors, and what was done."""

    def __init__(self, root: Path, server: PrivateServer, hook: Receiver) -> None:
        self.root = root
        self.server = server
        self.marks = root / "marks"
        self.marks.mkdir()
        secret = root / "secret"
        secret.write_text("kill-test-secret\n")
        self.env = cli_process.environment(XDG_STATE_HOME=str(root / "xdg"), COLUMNS="400")
        kinds = json.dumps([str(k) for k in NoticeKind])
        self.config = root / "config.toml"
        store = cli_process.postgres_store(server, SCHEMA)
        self.config.write_text(
            cli_process.local_config(root / "local", grace=0.3, poll=0.05, store=store)
            + "\n[escalations.hook]\n"
            'sink = "webhook"\n'
            f'url = "{hook.url}"\n'
            f'secret_file = "{secret}"\n'
            f"notify = {kinds}\n"
            "rate_per_minute = 6000\n"
            "cooldown = 0\n"
        )
        self.supervisors: list[subprocess.Popen[bytes]] = []
        self.killed: set[int] = set()
        self.kills_in_flight = 0
        self.log = root / "supervise.log"

    def cli(self, *args: str, json_out: bool = True) -> Any:
        if json_out:
            return cli_process.run_json(["--config", str(self.config), *args], self.env)
        done = cli_process.run(["--config", str(self.config), *args], self.env)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def submit(self, name: str) -> str:
        """A job whose rank notes each start, then waits for ``release.NAME``; preempted
        resubmits under a budget of 2."""
        rank = (
            'echo "$JOBDISPATCH_JOB" >> "$0/starts"; '
            'until [ -e "$0/release.$1" ]; do sleep 0.05; done'
        )
        path = self.root / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\n'
            f"command = {json.dumps(['sh', '-c', rank, str(self.marks), name])}\n"
            "[[recovery.rules]]\n"
            'on = ["preempted"]\n'
            'action = "resubmit"\n'
            "budget = 2\n"
        )
        job: str = self.cli("submit", str(path))["job"]
        return job

    def starts(self, job: str) -> int:
        path = self.marks / "starts"
        return path.read_text().split().count(job) if path.exists() else 0

    def supervise(self) -> subprocess.Popen[bytes]:
        proc = cli_process.start(
            [
                *("--config", str(self.config), "supervise"),
                *("--poll", f"{POLL:g}", "--lease-ttl", f"{LEASE_TTL:g}s"),
            ],
            self.env,
            self.log,
        )
        self.supervisors.append(proc)
        return proc

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.supervisors if p.poll() is None]

    def kill_one(self, rng: random.Random, hook: Receiver) -> None:
        live = self.live()
        if not live:
            return
        victim = rng.choice(live)
        # Was a request (any supervisor's) being answered at that moment? Counted, not needed.
        if hook.in_flight():
            self.kills_in_flight += 1
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        self.killed.add(victim.pid)

    def close(self) -> None:
        for proc in self.supervisors:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.supervisors:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=60)

    def records(self) -> dict[str, ev.View]:
        from jobdispatch_records_postgres import PostgresRecords

        with PostgresRecords(self.server.config(SCHEMA)) as store:
            return {job: store.read(job) for job in store.list()}


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    made = PrivateServer()
    yield made
    made.close()


def _pid(holder: str) -> int:
    """The process id in a holder id (``host:pid:token``)."""
    return int(holder.split(":")[-2])


@pytest.mark.timeout(3 * BOUND)  # the scripted run and the deliveries after it, each bounded
def test_supervisors_killed_at_random_deliver_every_notice_and_duplicate_only_lost_records(
    tmp_path: Path, server: PrivateServer
) -> None:
    rng = random.Random(int(os.environ.get("JOBDISPATCH_KILL_SEED", "30")))
    with Receiver(delay=RECEIVER_DELAY) as hook:
        run = Run(tmp_path, server, hook)
        try:
            _play(run, hook, rng)
        finally:
            run.close()
        report = _account(run, hook)
    print("\nkill test:", json.dumps(report, indent=2))
    if os.environ.get("JOBDISPATCH_KILL_REPORT"):
        Path(os.environ["JOBDISPATCH_KILL_REPORT"]).write_text(json.dumps(report, indent=2))


def _play(run: Run, hook: Receiver, rng: random.Random) -> None:
    jobs = {run.submit(f"job{i}"): (f"job{i}", n) for i, n in enumerate(PREEMPTIONS)}
    for _ in range(SUPERVISORS):
        run.supervise()
    stop = threading.Event()

    def killer() -> None:
        while not stop.wait(rng.uniform(0.3, 1.5)):
            run.kill_one(rng, hook)
            run.supervise()

    chaos = threading.Thread(target=killer, daemon=True)
    chaos.start()
    try:
        preempted = dict.fromkeys(jobs, 0)
        deadline = time.monotonic() + BOUND
        while True:
            assert time.monotonic() < deadline, f"the scripted run did not finish: {preempted}"
            states = {s["job"]: s for s in run.cli("list")}
            if all(states[j]["state"] in ("succeeded", "failed") for j in jobs):
                break
            for job, (name, times) in jobs.items():
                started = run.starts(job)
                if started == preempted[job] + 1 and states[job]["state"] == "running":
                    if preempted[job] < times:
                        run.cli("local", "preempt", job, "--no-wait", json_out=False)
                        preempted[job] += 1
                    else:
                        (run.marks / f"release.{name}").touch()
            time.sleep(0.2)
    finally:
        stop.set()
        chaos.join(timeout=60)
    if not run.live():
        run.supervise()
    # After the last kill: every record's notices delivered (the sweep serves settled jobs).
    expected = _expected(run)
    eventually(
        lambda: all(
            (n.id, "hook") in delivered(v)
            for v in run.records().values()
            for n in expected[v.header.job]
        ),
        "every notice recorded as delivered",
        within=BOUND,
        every=0.1,
    )
    states = {s["job"]: s["state"] for s in run.cli("list")}
    for job, (_, times) in jobs.items():
        assert states[job] == ("failed" if times > 2 else "succeeded"), (job, states[job])


def _expected(run: Run) -> dict[str, tuple[Any, ...]]:
    return {job: notices(view) for job, view in run.records().items()}


def _account(run: Run, hook: Receiver) -> dict[str, Any]:
    records = run.records()
    arrivals = hook.arrivals
    by_key: dict[str, list[str]] = {}
    for a in arrivals:
        by_key.setdefault(a.headers["X-Jobdispatch-Key"], []).append(
            a.headers["X-Jobdispatch-Sender"]
        )
    events = 0
    explanations: list[dict[str, Any]] = []
    for view in records.values():
        recorded_by: dict[str, list[str]] = {}
        for e in view.events:
            if isinstance(e, ev.NoticeDelivered) and e.sink == "hook":
                recorded_by.setdefault(e.notice, []).append(e.by.id)
            elif isinstance(e, ev.EscalationDelivered) and e.sink == "hook":
                recorded_by.setdefault(str(e.escalation), []).append(e.by.id)
        for notice in notices(view):
            events += 1
            senders = by_key.get(notice.key, [])
            assert senders, f"{notice.key} never arrived"
            recorders = recorded_by.get(notice.id, [])
            assert len(recorders) == 1, (notice.key, recorders)  # one delivery record each
            if len(senders) == 1:
                continue
            # A duplicate: every arrival but one from a supervisor that was killed and whose
            # delivery record is not in the record.
            unrecorded = [s for s in senders if s not in recorders]
            lost = [s for s in unrecorded if _pid(s) in run.killed]
            assert len(unrecorded) == len(senders) - 1 and lost == unrecorded, (
                notice.key,
                senders,
                recorders,
            )
            explanations.append(
                {
                    "key": notice.key,
                    "arrivals": len(senders),
                    "recorded_by": recorders[0],
                    "lost_records_of": unrecorded,
                    "why": "sent by a supervisor SIGKILLed before its notice-delivered committed",
                }
            )
    deliveries = len(arrivals)
    kinds = Counter(a.json()["kind"] for a in arrivals)
    return {
        "jobs": len(records),
        "events": events,
        "deliveries": deliveries,
        "duplicates": deliveries - len(by_key),
        "supervisors_started": len(run.supervisors),
        "sigkills": len(run.killed),
        "sigkills_while_a_request_was_open": run.kills_in_flight,
        "arrivals_by_kind": dict(sorted(kinds.items())),
        "explanations": explanations,
    }
