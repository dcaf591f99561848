"""``jobdispatch supervise`` on several hosts over one PostgreSQL store (spec 0013 D7).

Each "host" is a network namespace joined to this one by a veth pair (``netns_hosts``) and a
UTS namespace of its own named ``h0``, ``h1``, ... (so each supervisor's default holder,
``HOSTNAME:PID:NONCE``, says which host it runs on). On each, the real command runs:
``jobdispatch --store postgresql://USER@GATEWAY:PORT/DB supervise``, reaching the database
through its link and the relay only. The hosts share the file system and the process table,
so one cluster config naming the local adapter with one shared ``state_dir`` gives every
supervisor the same scheduler, and the jobs are real processes.

The jobs are submitted with ``jobdispatch submit``. Each rank appends a ``start`` line when it
begins and an ``end`` line when it is let go (the test creates ``release``), and holds an
exclusive ``flock`` on a file of its job and rank for its whole life: a second execution of a
job starting while another still runs finds the lock taken and writes an ``overlap`` line. So
duplicates are audited from what the ranks did, not from what an adapter or a supervisor says.

Shown: the jobs spread over the live supervisors (a newcomer gets its share, a SIGKILLed one's
jobs move to the others under greater tokens); a supervisor whose link is taken down loses its
leases, the other takes its jobs over and recovers a node lost meanwhile (the runner SIGKILLed,
as the local adapter's own tests lose a node) exactly once, and once back the first is fenced:
none of its late decisions commits. Then every job settles with 0 duplicate executions, 0 lost
jobs and 0 budgets overspent. Needs root (namespaces), ``unshare`` and the server; skips without
them, and fails under JOBDISPATCH_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.testing import eventually
from jobdispatch.types import ObjectState
from jobdispatch_local.testing import make_backend, shut_down
from netns_hosts import (
    DEADLINE,
    Host,
    Relay,
    holders,
    host_of,
    make_hosts,
    owned_by,
    require,
    spread,
)

pg_testing = pytest.importorskip("jobdispatch_records_postgres.testing")
from jobdispatch_records_postgres import PostgresRecords, Settings  # noqa: E402

LEASE_TTL = 3.0
POLL = 0.2
BUDGET = 1
SETTLED = ("succeeded", "failed", "cancelled")

#: A rank (``sh -c RANK MARKS INTERVAL``): take the job-and-rank lock (or say it overlaps), say
#: it started, wait to be let go (``release``, or ``release.JOB`` for its job alone; looking
#: every INTERVAL seconds), say it ended. ``9>&-`` keeps the lock out of the short-lived
#: children, so a rank SIGKILLed with its runner lets the lock go at once.
RANK = r"""
m="$0"; k="$JOBDISPATCH_JOB $JOBDISPATCH_SUBMISSION $JOBDISPATCH_EXECUTION $RANK"
exec 9>>"$m/$JOBDISPATCH_JOB.$RANK.lock"
flock -n 9 || echo "overlap $k" >> "$m/overlaps"
echo "start $k $(date +%s.%N 9>&-)" >> "$m/runs"
until [ -e "$m/release" ] || [ -e "$m/release.$JOBDISPATCH_JOB" ]; do sleep "$1" 9>&-; done
echo "end $k $(date +%s.%N 9>&-)" >> "$m/runs"
"""


class World:
    """The hosts, the relay, one cluster config (local adapter, shared ``state_dir``, the
    ``[store]`` table), the ranks' marks folder, and the supervisors started so far."""

    def __init__(self, root: Path, config: dict[str, Any], hosts: list[Host]) -> None:
        self.root = root
        self.hosts = hosts
        self.settings = Settings.from_config(config)
        self.config = config
        self.state = root / "local"
        self.marks = root / "marks"
        self.marks.mkdir()
        self.relay = Relay(
            (self.settings.conninfo["host"], int(self.settings.conninfo.get("port", "5432")))
        )
        home = root / "config" / "jobdispatch"
        home.mkdir(parents=True)
        (home / "config.toml").write_text(
            'default_cluster = "hosts"\n'
            "[clusters.hosts]\n"
            'adapter = "local"\n'
            f'state_dir = "{self.state}"\n'
            "grace = 0.5\n"
            "poll = 0.05\n"
            "\n[store]\n"
            'kind = "postgresql"\n'
            f'dsn = "{config["dsn"]}"\n'
            f'password_file = "{config["password_file"]}"\n'
            f'schema = "{config["schema"]}"\n'
        )
        self.env = cli_process.environment(
            XDG_CONFIG_HOME=str(root / "config"), XDG_STATE_HOME=str(root / "xdg")
        )
        self.store = PostgresRecords(config)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.started: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------ the command

    def run(self, *args: str) -> Any:
        """``jobdispatch ARGS --json`` from this namespace, its output parsed."""
        return cli_process.run_json(args, self.env)

    def submit(self, n: int, interval: float = 0.2, at_once: int = 6) -> list[str]:
        """``n`` jobs of 2 nodes, each resubmitted once on a lost node, submitted ``at_once``
        at a time; their ranks look for their release every ``interval`` seconds."""
        job_file = self.root / "job.toml"
        job_file.write_text(
            'name = "ranks"\n'
            f"command = {json.dumps(['sh', '-c', RANK, str(self.marks), f'{interval:g}'])}\n"
            "nodes = 2\n"
            "[[recovery.rules]]\n"
            'on = ["node-lost"]\n'
            'action = "resubmit"\n'
            f"budget = {BUDGET}\n"
        )
        jobs: list[str] = []
        while len(jobs) < n:
            procs = [
                subprocess.Popen(
                    [*cli_process.command(), "submit", str(job_file), "--json"],
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(min(at_once, n - len(jobs)))
            ]
            for proc in procs:
                out, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, err
                jobs.append(json.loads(out)["job"])
        return jobs

    # ------------------------------------------------------------------ the supervisors

    def spawn(self, index: int, ttl: float = LEASE_TTL) -> subprocess.Popen[bytes]:
        """``jobdispatch supervise`` on host ``index``, reaching the store through its link;
        returns once it said which holder it is (and that holder names its host)."""
        host = self.hosts[index]
        url = (
            f"postgresql://{self.settings.conninfo['user']}@{host.gateway}:{self.relay.port}/"
            f"{self.settings.conninfo['dbname']}"
        )
        log = self.root / f"h{index}.log"
        proc = cli_process.start(
            ["--store", url, "supervise", "--lease-ttl", f"{ttl:g}s", "--poll", f"{POLL:g}"],
            self.env,
            log,
            prefix=[
                *("ip", "netns", "exec", host.name, "unshare", "--uts", "--"),
                *("sh", "-c", 'hostname "$0" && exec "$@"', f"h{index}"),
            ],
        )
        self.procs[index] = proc
        self.started.append(proc)

        def announced() -> str | None:
            # ip netns exec, unshare and sh all exec: the pid is the supervisor's own. A log
            # appended to by an earlier supervisor of this host names another pid.
            assert proc.poll() is None, log.read_text()
            said = re.findall(r"\sas\s+(\S+:\d+:\S+),", log.read_text())
            return next((h for h in said if h.split(":")[1] == str(proc.pid)), None)

        holder = eventually(announced, f"supervisor h{index} to start", within=DEADLINE, every=0.1)
        assert holder.split(":")[0] == f"h{index}", holder
        return proc

    def log(self, index: int) -> str:
        return (self.root / f"h{index}.log").read_text()

    # ------------------------------------------------------------------ what ran

    def lines(self, name: str) -> list[list[str]]:
        path = self.marks / name
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def executions(self, job: str) -> dict[tuple[int, int], dict[str, Any]]:
        """Every execution of ``job`` the ranks told of, by (submission, execution): when its
        first rank started, when its last rank ended (None unless every rank ended)."""
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for kind, who, sub, exe, rank, at in self.lines("runs"):
            if who != job:
                continue
            e = found.setdefault((int(sub), int(exe)), {"starts": {}, "ends": {}})
            e["starts" if kind == "start" else "ends"][rank] = float(at)
        for e in found.values():
            e["start"] = min(e["starts"].values())
            e["end"] = max(e["ends"].values()) if len(e["ends"]) == len(e["starts"]) else None
        return found

    def running(self, jobs: list[str], submission: int = 1) -> bool:
        """Whether both ranks of each job's ``submission`` have started."""
        return all(
            len(self.executions(job).get((submission, 0), {}).get("starts", {})) == 2
            for job in jobs
        )

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        shut_down(self.state)
        self.store.close()
        self.relay.close()
        for host in self.hosts:
            host.remove()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    require(pg_testing.problem())
    server = pg_testing.server_config()
    assert server is not None
    config = {**server, "schema": pg_testing.new_schema_name("clihosts")}
    hosts = make_hosts(3, "unshare", "flock")
    w = World(tmp_path, config, hosts)
    try:
        yield w
    finally:
        w.close()
        pg_testing.drop_schema(config, config["schema"])


def _settle(world: World, jobs: list[str], timeout: float = DEADLINE) -> dict[str, Any]:
    """Let every rank go, wait for every job to settle, and return their statuses (those of
    ``jobdispatch list``, each what ``jobdispatch status`` says: one command for all)."""
    (world.marks / "release").touch()

    def settled() -> dict[str, Any] | None:
        statuses = {row["job"]: row for row in world.run("list")}
        done = all(statuses.get(job, {}).get("state") in SETTLED for job in jobs)
        return statuses if done else None

    return eventually(settled, "every job to settle", within=timeout, every=0.1)


def _audit(world: World, jobs: list[str], lost: dict[str, list[float]]) -> dict[str, list[Any]]:
    """What went wrong, by kind, from what the ranks wrote and what the store holds; nothing
    when all is well. ``lost``: each job's nodes the test lost, by when its runner was killed.

    A job runs once, plus once for each node lost under it while its budget lasts: more
    executions (or two at once, which a rank's lock tells) are duplicates. Each lost execution
    ended without its ranks' end lines (they died with the runner) and the next began after
    the loss; a job lost past its budget failed, every other succeeded, its last execution
    having run to its end. Every job is in the store, no rule fired past its budget, and each
    job's decisions carry non-decreasing tokens."""
    statuses = _settle(world, jobs, timeout=max(DEADLINE, 3.0 * len(jobs)))
    listed = set(world.store.list())
    found: dict[str, list[Any]] = {
        "duplicate": list(world.lines("overlaps")),
        "lost": [job for job in jobs if job not in listed],
        "overspent": [],
        "wrong": [],
    }
    for job in jobs:
        kills = sorted(lost.get(job, []))
        status = statuses[job]
        if any(rule["firings"] > BUDGET for rule in status["plan"]["rules"]):
            found["overspent"].append((job, status["plan"]["rules"]))
        runs = world.executions(job)
        expected = [(i + 1, 0) for i in range(min(len(kills), BUDGET) + 1)]
        if len(runs) > len(expected):
            found["duplicate"].append((job, runs, kills))
        if sorted(runs) != expected:
            found["wrong"].append((job, "executions", runs, kills))
            continue
        state = "succeeded" if len(kills) <= BUDGET else "failed"
        if status["state"] != state:
            found["wrong"].append((job, "state", status["state"], kills))
        ordered = [runs[k] for k in expected]
        for i, e in enumerate(ordered):
            killed = kills[i] if i < len(kills) else None
            if killed is None:
                ok = e["end"] is not None
            else:  # its ranks died with their runner; a next one began after
                later = ordered[i + 1]["start"] if i + 1 < len(ordered) else float("inf")
                ok = e["end"] is None and e["start"] < killed < later
            if not ok:
                found["wrong"].append((job, "execution", expected[i], runs, kills))
        tokens = [e.token or 0 for e in world.store.read(job).events if e.decision]
        if tokens != sorted(tokens):
            found["wrong"].append((job, "tokens", tokens))
    return found


def _check(world: World, jobs: list[str], lost: dict[str, list[float]]) -> None:
    found = _audit(world, jobs, lost)
    assert found == {"duplicate": [], "lost": [], "overspent": [], "wrong": []}, found


def _lose_a_node(world: World, job: str) -> float | None:
    """SIGKILL the runner of ``job``'s running object once both ranks of its execution have
    started, as the local adapter's tests lose a node (its ranks die with it: node-lost,
    provenance scheduler); returns when, or None when nothing of the job was running."""
    found = make_backend(world.state).find(job).objects
    running = [o for o in found if o.state is ObjectState.RUNNING and o.identity]
    if len(running) != 1 or running[0].identity is None:
        return None
    if not world.running([job], submission=running[0].identity[1]):
        return None
    at = time.time()
    return at if make_backend(world.state).kill_runner(running[0].ref) else None


def test_the_jobs_spread_and_a_killed_supervisors_jobs_move(world: World) -> None:
    jobs = world.submit(6)
    world.spawn(0)
    eventually(
        lambda: spread(world.settings, jobs) == {"h0": 6},
        "h0 owning every job",
        within=DEADLINE,
        every=0.1,
    )
    eventually(lambda: world.running(jobs), "every job's ranks running", within=DEADLINE, every=0.1)
    world.spawn(1)
    eventually(
        lambda: spread(world.settings, jobs) == {"h0": 3, "h1": 3},
        "h1 getting half",
        within=DEADLINE,
        every=0.1,
    )
    third = world.spawn(2)
    eventually(
        lambda: spread(world.settings, jobs) == {"h0": 2, "h1": 2, "h2": 2},
        "two each",
        within=DEADLINE,
        every=0.1,
    )
    before = holders(world.settings)
    third_jobs = [j for j in jobs if host_of(before[j][0] or "") == "h2"]
    assert len(third_jobs) == 2, before
    third.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    eventually(
        lambda: spread(world.settings, jobs) == {"h0": 3, "h1": 3},
        "h2's jobs moving",
        within=DEADLINE,
        every=0.1,
    )
    # Not asserted (timings never are); spec 0013 D7 quotes it against the lease ttl.
    print(f"\nh2's jobs moved {time.monotonic() - killed:.1f} s after its SIGKILL")
    after = holders(world.settings)
    for job in third_jobs:
        assert host_of(after[job][0] or "h2") != "h2", (job, after[job])
        assert (after[job][1] or 0) > (before[job][1] or 0), (job, before[job], after[job])
    _check(world, jobs, lost={})


def test_a_supervisor_cut_off_is_fenced_and_a_node_lost_meanwhile_recovers_once(
    world: World,
) -> None:
    jobs = world.submit(3)
    world.spawn(0)
    before = eventually(
        lambda: owned_by(world.settings, "h0", jobs),
        "h0 owning every job",
        within=DEADLINE,
        every=0.1,
    )
    eventually(lambda: world.running(jobs), "every job's ranks running", within=DEADLINE, every=0.1)
    world.spawn(1)
    cut = world.hosts[0]
    cut.link(up=False)
    after = eventually(
        lambda: owned_by(world.settings, "h1", jobs),
        "h1 taking every job over",
        within=DEADLINE,
        every=0.1,
    )
    # h0 still runs but holds nothing: its leases lapsed on the database's clock.
    assert world.procs[0].poll() is None, world.log(0)
    # A node lost while h0 is away: h1 resubmits the job, once.
    lost = _lose_a_node(world, jobs[0])
    assert lost is not None
    eventually(
        lambda: world.running(jobs[:1], submission=2),
        "the resubmission's ranks running",
        within=DEADLINE,
        every=0.1,
    )
    cut.link(up=True)
    # h0 is back when it holds a share again, under new tokens.
    eventually(
        lambda: spread(world.settings, jobs).get("h0", 0) >= 1,
        "h0 back with a share",
        within=DEADLINE,
        every=0.1,
    )
    _check(world, jobs, lost={jobs[0]: [lost]})
    # None of h0's late decisions committed: every decision under a token older than the
    # takeover's comes before every one under the takeover's token or a later one, and none
    # carries a token h0 did not hold before the cut.
    for job in jobs:
        taken = after[job][1]
        assert taken is not None
        tokens = [e.token or 0 for e in world.store.read(job).events if e.decision]
        split = next((i for i, t in enumerate(tokens) if t >= taken), len(tokens))
        assert all(t < taken for t in tokens[:split]), (job, tokens, taken)
        assert all(t >= taken for t in tokens[split:]), (job, tokens, taken)
        assert all(t <= (before[job][1] or 0) for t in tokens[:split]), (job, tokens)


SOAK = os.environ.get("JOBDISPATCH_SOAK") == "1"
#: The soak's store on a PostgreSQL server of its own, which it SIGKILLs among its faults.
SERVER_KILLS = os.environ.get("JOBDISPATCH_SOAK_SERVER_KILLS") == "1"


@pytest.fixture
def soak_world(tmp_path: Path) -> Iterator[tuple[World, Any]]:
    """The soak's world, on the shared server, or (``JOBDISPATCH_SOAK_SERVER_KILLS=1``) on a
    private one it may kill (tests/private_postgres.py), answered beside it (else None)."""
    if not SERVER_KILLS:
        require(pg_testing.problem())
        server_config = pg_testing.server_config()
        assert server_config is not None
        private = None
    else:
        from private_postgres import PrivateServer

        private = PrivateServer()
        server_config = {"dsn": private.dsn, "password_file": str(private.password_file)}
    config = {**server_config, "schema": pg_testing.new_schema_name("clihosts")}
    w = World(tmp_path, config, make_hosts(3, "unshare", "flock"))
    try:
        yield w, private
    finally:
        w.close()
        if private is not None:
            private.close()
        else:
            pg_testing.drop_schema(config, config["schema"])


@pytest.mark.skipif(not SOAK, reason="the soak runs on request: JOBDISPATCH_SOAK=1")
@pytest.mark.timeout(3 * 3600)
def test_soak_of_the_command(soak_world: tuple[World, Any]) -> None:
    """The soak of test_supervisors_on_several_hosts.py with the command and real processes,
    at a smaller scale (each job is two shells on this machine): 3 supervisors,
    JOBDISPATCH_SOAK_JOBS jobs (default 30) and JOBDISPATCH_SOAK_FAULTS faults (default 20),
    each a SIGKILL (the supervisor restarted a moment later) or a partition of half to one and
    a half lease ttls (JOBDISPATCH_SOAK_TTL, default 5 s); between faults, random nodes lost
    and jobs let go. Then every job is let go and the audit must find nothing. Prints its
    figures (spec 0013 D7 records a run).

    With ``JOBDISPATCH_SOAK_SERVER_KILLS=1`` the store is a server of its own and a third of
    the faults SIGKILL it, held down 2 to 20 s (spec 0013 D9); a supervisor that exits by
    itself is counted (and restarted), and there must be none."""
    import random

    world, server = soak_world

    rng = random.Random(int(os.environ.get("JOBDISPATCH_SOAK_SEED", "13")))
    n_jobs = int(os.environ.get("JOBDISPATCH_SOAK_JOBS", "30"))
    n_faults = int(os.environ.get("JOBDISPATCH_SOAK_FAULTS", "20"))
    ttl = float(os.environ.get("JOBDISPATCH_SOAK_TTL", "5"))
    started = time.monotonic()
    jobs = world.submit(n_jobs, interval=1.0)
    for i in range(3):
        world.spawn(i, ttl)
    lost: dict[str, list[float]] = {}
    let_go: set[str] = set()
    kills = partitions = server_kills = 0
    exits: list[int | None] = []

    def count_exits() -> None:
        for i, proc in list(world.procs.items()):
            if proc.poll() is not None:
                exits.append(proc.returncode)
                print(f"soak: supervisor h{i} exited ({proc.returncode}):\n{world.log(i)[-2000:]}")
                world.spawn(i, ttl)

    for fault in range(n_faults):
        print(f"soak: fault {fault} at {time.monotonic() - started:.0f} s", flush=True)
        count_exits()
        for job in rng.sample(jobs, k=min(len(jobs), 4)):
            if job in let_go or len(lost.get(job, [])) > BUDGET:
                continue
            if rng.random() < 0.6:
                at = _lose_a_node(world, job)
                if at is not None:
                    lost.setdefault(job, []).append(at)
            elif world.running([job], submission=len(lost.get(job, [])) + 1):
                (world.marks / f"release.{job}").touch()
                let_go.add(job)
        victim = rng.randrange(3)
        if server is not None and rng.random() < 1 / 3:
            server.kill()
            server_kills += 1
            time.sleep(rng.uniform(2, 20))
            server.start()
        elif rng.random() < 0.5:
            world.procs[victim].send_signal(signal.SIGKILL)
            world.procs[victim].wait(timeout=30)
            kills += 1
            time.sleep(rng.uniform(0, ttl / 2))
            world.spawn(victim, ttl)
        else:
            world.hosts[victim].link(up=False)
            partitions += 1
            time.sleep(rng.uniform(ttl / 2, ttl * 1.5))  # sometimes past its leases' expiry
            world.hosts[victim].link(up=True)
    count_exits()
    found = _audit(world, jobs, lost)
    count_exits()
    states: dict[str, int] = {}
    for row in world.run("list"):
        states[row["state"]] = states.get(row["state"], 0) + 1
    print(
        f"\nsoak (command, local adapter): {n_jobs} jobs, 3 supervisors, lease ttl {ttl:g} s, "
        f"{kills} SIGKILLs, {partitions} partitions, {server_kills} server SIGKILLs, "
        f"{len(exits)} supervisor exits {exits}, "
        f"{sum(len(v) for v in lost.values())} nodes lost, {len(let_go)} let go during faults; "
        f"{len(found['duplicate'])} duplicate executions, {len(found['lost'])} lost jobs, "
        f"{len(found['overspent'])} overspent budgets, {len(found['wrong'])} other faults, "
        f"states {states}; {time.monotonic() - started:.0f} s"
    )
    assert found == {"duplicate": [], "lost": [], "overspent": [], "wrong": []}, found
    assert exits == [], exits
