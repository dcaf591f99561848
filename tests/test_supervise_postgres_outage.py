"""``jobdispatch supervise`` rides out outages of its PostgreSQL store, however long.

Each test starts a PostgreSQL server of its own (tests/private_postgres.py: the shared one is
never stopped) and a supervisor of the local adapter on it, then takes the store away for
longer than every timeout of the store (``connect_timeout`` 10 s, ``call_timeout`` 30 s):

* the server SIGKILLed (every process of it) and held down for 30 s;
* the supervisor cut off for 60 s by a relay that stops forwarding without closing anything;
* the supervisor started while the server is down.

The supervisor must keep running, say once that the store is away and once that it is back,
act on nothing meanwhile, and settle its jobs right after: the job that ended during the
outage, and one submitted after it. Each job ran exactly once, and the fencing tokens of its
decisions never went back. How long the first commit took after the server answered again
is printed (``-s``); nothing is asserted about time except generous bounds against hangs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.testing import eventually
from netns_hosts import DEADLINE, Relay
from private_postgres import PrivateServer
from psycopg import sql

POLL = 0.5
SCHEMA = "outage"
#: How long the store is away in each case (what issue 34 asks): past connect_timeout (10 s)
#: and, for the partition, past call_timeout (30 s) and the lease ttl (30 s) too.
KILLED_FOR = 30.0
CUT_FOR = 60.0
AWAY = "the record store does not answer"
BACK = "the record store answers"


class Site:
    """A local-adapter cluster whose store is the private server: a configuration for the
    supervisor (``dsn`` given: directly, or through a relay) and one for the test's own
    commands (directly), the same schema and ``state_dir``."""

    def __init__(self, root: Path, server: PrivateServer) -> None:
        self.root = root
        self.server = server
        self.marks = root / "marks"
        self.marks.mkdir()
        # Wide enough that no log line is wrapped: the test counts them.
        self.env = cli_process.environment(XDG_STATE_HOME=str(root / "xdg"), COLUMNS="400")
        self.config = self.write_config("cli", server.dsn)
        self.supervisors: list[subprocess.Popen[bytes]] = []

    def write_config(self, name: str, dsn: str) -> Path:
        path = self.root / f"{name}.toml"
        store = {**cli_process.postgres_store(self.server, SCHEMA), "dsn": dsn}
        path.write_text(cli_process.local_config(self.root / "local", poll=0.05, store=store))
        return path

    def run(self, *args: str) -> Any:
        """``jobdispatch --config CLI ARGS --json``, parsed."""
        return cli_process.run_json(["--config", str(self.config), *args], self.env)

    def submit(self, name: str) -> str:
        """A job whose one rank notes that it started, then waits for ``release.NAME``."""
        job_file = self.root / f"{name}.toml"
        rank = (
            'echo "$JOBDISPATCH_JOB" >> "$0/starts"; '
            'until [ -e "$0/release.$1" ]; do sleep 0.1; done'
        )
        job_file.write_text(
            f'name = "{name}"\ncommand = {json.dumps(["sh", "-c", rank, str(self.marks), name])}\n'
        )
        job: str = self.run("submit", str(job_file))["job"]
        return job

    def release(self, name: str) -> None:
        (self.marks / f"release.{name}").touch()

    def states(self) -> dict[str, str]:
        return {s["job"]: s["state"] for s in self.run("list")}

    def started(self, job: str) -> int:
        path = self.marks / "starts"
        return path.read_text().split().count(job) if path.exists() else 0

    def supervise(self, config: Path) -> subprocess.Popen[bytes]:
        proc = cli_process.start(
            ["--config", str(config), "supervise", "--poll", f"{POLL:g}"],
            self.env,
            self.root / "supervise.log",
        )
        self.supervisors.append(proc)
        return proc

    def log(self) -> str:
        return (self.root / "supervise.log").read_text(errors="replace")

    def events(self) -> int:
        """How many events the store holds, read directly (the first new commit after an
        outage is the first time this grows)."""
        import psycopg

        password = self.server.password_file.read_text().strip()
        with psycopg.connect(self.server.dsn, password=password, connect_timeout=5) as conn:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.events").format(sql.Identifier(SCHEMA))
            ).fetchone()
        assert row is not None
        return int(row[0])

    def tokens_never_go_back(self, job: str) -> None:
        from jobdispatch_records_postgres import PostgresRecords

        with PostgresRecords(self.server.config(SCHEMA)) as store:
            tokens = [e.token for e in store.read(job).events if e.token is not None]
        assert tokens == sorted(tokens), (job, tokens)

    def close(self) -> None:
        for proc in self.supervisors:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)


@pytest.fixture
def server() -> Iterator[PrivateServer]:
    made = PrivateServer()
    yield made
    made.close()


@pytest.fixture
def site(tmp_path: Path, server: PrivateServer) -> Iterator[Site]:
    made = Site(tmp_path, server)
    yield made
    made.close()


def _hold(proc: subprocess.Popen[bytes], seconds: float, site: Site) -> None:
    """Wait ``seconds``, failing as soon as the supervisor exits."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert proc.poll() is None, f"the supervisor exited ({proc.returncode}):\n{site.log()}"
        time.sleep(0.5)


def _first_commit_after(site: Site, before: int) -> float:
    """Seconds from now until the store holds more than ``before`` events."""
    t0 = time.monotonic()
    eventually(
        lambda: site.events() > before,
        "the first commit after the outage",
        within=DEADLINE,
        every=0.1,
    )
    return time.monotonic() - t0


def _settles(site: Site, proc: subprocess.Popen[bytes], jobs: list[str]) -> None:
    def settled() -> bool:
        assert proc.poll() is None, f"the supervisor exited ({proc.returncode}):\n{site.log()}"
        states = site.states()
        return all(states.get(job) == "succeeded" for job in jobs)

    eventually(settled, f"jobs {jobs} to succeed", within=DEADLINE, every=0.1)
    for job in jobs:
        assert site.started(job) == 1, (job, site.started(job))  # ran once, never again
        site.tokens_never_go_back(job)


def _told_once(site: Site, proc: subprocess.Popen[bytes]) -> None:
    """Stopped by SIGTERM, the supervisor exits 0 having said once that the store was away
    and once that it was back, with none of the driver's per-attempt warnings."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, site.log()
    log = site.log()
    assert log.count(AWAY) == 1, log
    assert log.count(BACK) == 1, log
    assert "error connecting" not in log, log


def _started_and_seen_running(site: Site, job: str) -> None:
    """Wait until ``job`` started once and the store says it runs."""
    eventually(
        lambda: site.started(job),
        f"{job} to start",
        holds=lambda n: n == 1,
        within=DEADLINE,
        every=0.1,
    )
    eventually(
        lambda: site.states().get(job),
        f"{job} to be seen running",
        holds="running".__eq__,
        within=DEADLINE,
        every=0.1,
    )


def _back_and_settled(site: Site, proc: subprocess.Popen[bytes], during: str, before: Any) -> float:
    """Once the store answers again: how long the supervisor took to commit (seconds), after
    which the job that ended while it was away and a new one both settle, each told once."""
    took = _first_commit_after(site, before)
    after = site.submit("after")
    site.release("after")
    _settles(site, proc, [during, after])
    _told_once(site, proc)
    return took


def test_a_supervisor_rides_out_its_server_killed_for_30_s(
    site: Site, server: PrivateServer
) -> None:
    during = site.submit("during")
    proc = site.supervise(site.config)
    _started_and_seen_running(site, during)
    before = site.events()
    server.kill()
    site.release("during")  # it ends while nobody can record it
    _hold(proc, KILLED_FOR, site)
    server.start()
    took = _back_and_settled(site, proc, during, before)
    print(f"\nserver killed for {KILLED_FOR:g} s: first commit {took:.2f} s after it answered")


def test_run_rides_out_its_server_killed_for_30_s(site: Site, server: PrivateServer) -> None:
    """``jobdispatch run`` supervises in a thread and reports from the record in the
    foreground: neither exits while the store is away (the report exited 5 before), and the
    job's outcome is told once the store answers."""
    job_file = site.root / "run.toml"
    rank = 'echo run >> "$0/starts"; until [ -e "$0/release.run" ]; do sleep 0.1; done'
    job_file.write_text(
        f'name = "run"\ncommand = {json.dumps(["sh", "-c", rank, str(site.marks)])}\n'
    )
    log = site.root / "run.log"
    proc = cli_process.start(
        ["--config", str(site.config), "run", str(job_file), "--poll", "0.5"], site.env, log
    )
    site.supervisors.append(proc)
    starts = site.marks / "starts"
    eventually(
        lambda: starts.exists() and "run" in starts.read_text(),
        "the job to start",
        within=DEADLINE,
        every=0.1,
    )
    eventually(
        lambda: "running" in log.read_text(),
        "run to report the job running",
        within=DEADLINE,
        every=0.1,
    )
    server.kill()
    site.release("run")  # it ends while nobody can record it
    end = time.monotonic() + KILLED_FOR
    while time.monotonic() < end:
        assert proc.poll() is None, f"run exited ({proc.returncode}):\n{log.read_text()}"
        time.sleep(0.5)
    server.start()
    assert proc.wait(timeout=300) == 0, log.read_text()
    text = log.read_text()
    assert "outcome: succeeded" in text, text
    assert starts.read_text().split().count("run") == 1  # ran once, never again


def test_a_supervisor_rides_out_a_partition_of_60_s(site: Site, server: PrivateServer) -> None:
    relay = Relay(("127.0.0.1", server.port))
    try:
        through = site.write_config(
            "relayed", f"postgresql://jobdispatch@127.0.0.1:{relay.port}/jobdispatch"
        )
        during = site.submit("during")
        proc = site.supervise(through)
        _started_and_seen_running(site, during)
        before = site.events()
        relay.cut()
        site.release("during")
        _hold(proc, CUT_FOR, site)
        assert site.events() == before  # nothing reached the store while cut off
        relay.mend()
        took = _back_and_settled(site, proc, during, before)
        print(f"\ncut off for {CUT_FOR:g} s: first commit {took:.2f} s after the relay mended")
    finally:
        relay.close()


def test_a_supervisor_started_during_an_outage_waits_then_serves(
    site: Site, server: PrivateServer
) -> None:
    waiting = site.submit("waiting")  # the schema and a job exist before the outage
    server.kill()
    proc = site.supervise(site.config)
    eventually(
        lambda: AWAY in site.log() or proc.poll() is not None,
        "the supervisor to say the store does not answer",
        within=DEADLINE,
        every=0.1,
    )
    _hold(proc, 15.0, site)  # past the store's connect_timeout (10 s)
    server.start()
    site.release("waiting")
    _settles(site, proc, [waiting])
    _told_once(site, proc)
