"""The metrics endpoint scraped by a real Prometheus (tools/prometheus/up), after a scripted
run on the local adapter: two supervisors share a PostgreSQL store, one is SIGKILLed in the
middle of the run, every job is preempted and recovered, partly by the survivor after its
takeover. PromQL through Prometheus's HTTP API must then give exactly the counts the record
holds, the counters must never have reset, and every panel of the shipped Grafana dashboard
must return data.

The store is a PostgreSQL server of the test's own (tests/private_postgres.py). Without
Prometheus or PostgreSQL's binaries the tests skip, and fail under
JOBDISPATCH_REQUIRE_SERVICES=1 (CI starts both first).
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.testing import eventually

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "train.py"
PACKAGE = ROOT / "packages" / "metrics" / "src" / "jobdispatch_metrics"
DASHBOARD = PACKAGE / "grafana" / "dashboard.json"
JOBS = 4
#: Generous: a loaded 2-core machine. A deadline only turns a hang into a failure.
DEADLINE = 240.0
STATE_FILE = Path(os.environ.get("JOBDISPATCH_PROM_STATE", "/var/lib/jobdispatch-prometheus"))


def _skip_or_fail(why: str) -> None:
    if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {why}")
    pytest.skip(why)


class Prometheus:
    """The server tools/prometheus/up started: its HTTP API, and its targets folder."""

    def __init__(self) -> None:
        found = {k: os.environ[k] for k in ("JOBDISPATCH_PROM_URL", "JOBDISPATCH_PROM_TARGETS")
                 if os.environ.get(k)}  # fmt: skip
        if len(found) < 2:
            try:
                for line in (STATE_FILE / "env").read_text().splitlines():
                    key, _, value = line.removeprefix("export ").partition("=")
                    found.setdefault(key, value)
            except OSError:
                pass
        if "JOBDISPATCH_PROM_URL" not in found or "JOBDISPATCH_PROM_TARGETS" not in found:
            _skip_or_fail('no Prometheus: run `eval "$(tools/prometheus/up)"`')
        self.url = found["JOBDISPATCH_PROM_URL"]
        self.targets = Path(found["JOBDISPATCH_PROM_TARGETS"])
        try:
            urllib.request.urlopen(f"{self.url}/-/ready", timeout=10).close()
        except OSError as exc:
            _skip_or_fail(f"Prometheus at {self.url} does not answer: {exc}")

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` gives now."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=30) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def by(self, promql: str, *labels: str) -> Counter[tuple[str, ...]]:
        """``promql``'s samples as counts, keyed by the values of ``labels``."""
        return Counter(
            {tuple(r["metric"].get(k, "") for k in labels): int(float(r["value"][1]))
             for r in self.query(promql)}
        )  # fmt: skip

    def scrape(self, run: str, port: int) -> Path:
        """Have the server scrape 127.0.0.1:``port`` with the label run=``run``."""
        target = self.targets / f"{run}.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"run": run}}]))
        tmp.chmod(0o644)
        tmp.rename(target)
        return target


class Fleet:
    """One local cluster whose records are in a private PostgreSQL server, its supervisors,
    its metrics endpoint, and the Prometheus scraping it."""

    def __init__(self, root: Path, prometheus: Prometheus) -> None:
        from private_postgres import PrivateServer

        self.root = root
        self.prometheus = prometheus
        self.run_label = f"jd-{secrets.token_hex(4)}"
        self.server = PrivateServer()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.target: Path | None = None
        self.local = root / "local"
        home = root / "config" / "jobdispatch"
        home.mkdir(parents=True)
        store = cli_process.postgres_store(self.server, "metrics")
        (home / "config.toml").write_text(cli_process.local_config(self.local, store=store))
        # Wide lines: the supervisors' logs are read for their holder ids.
        self.env = cli_process.environment(
            XDG_CONFIG_HOME=str(root / "config"), XDG_STATE_HOME=str(root / "xdg"), COLUMNS="500"
        )

    def json(self, *args: str) -> Any:
        return cli_process.run_json(args, self.env)

    def start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        proc = cli_process.start(args, self.env, self.root / log)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.root / name).read_text(errors="replace")

    def submit(self, name: str) -> str:
        job = self.root / f"{name}.toml"
        job.write_text(
            f'name = "{name}"\n'
            f'command = ["{sys.executable}", "{TRAIN}", "--steps", "6", "--step-seconds", '
            '"0.05", "--wait-at", "2"]\n'
            f'working_dir = "{self.root}"\n\n'
            f'[env]\nCHECKPOINT_DIR = "{self.root / "checkpoints"}"\n\n'
            '[[recovery.rules]]\non = ["preempted"]\naction = "resubmit"\nbudget = 3\n'
        )
        return str(self.json("submit", str(job))["job"])

    def close(self) -> None:
        from jobdispatch_local.testing import shut_down

        if self.target is not None:
            self.target.unlink(missing_ok=True)
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        shut_down(self.local)
        self.server.close()


def _holder(log: str) -> str | None:
    found = re.search(r"\bas\s+(\S+),\s+polling", log)
    return found.group(1) if found else None


def _holder_in(fleet: Fleet, i: int) -> str | None:
    """Supervisor ``i``'s holder id, once its log names it."""
    return _holder(fleet.log(f"supervisor-{i}.log"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The scripted run, once for the module's tests: JOBS jobs shared by two supervisors;
    once both hold leases and every job runs, the first is SIGKILLed and every job is
    preempted; the survivor takes the first's jobs over when their leases lapse and recovers
    them all. The endpoint (a process of its own, read-only) is scraped throughout; the
    survivor is left running for the tests."""
    prometheus = Prometheus()
    fleet = Fleet(tmp_path_factory.mktemp("fleet"), prometheus)
    try:
        jobs = [fleet.submit(f"train-{i}") for i in range(JOBS)]
        fleet.jobs = jobs  # type: ignore[attr-defined]
        endpoint = fleet.start(
            "metrics", "--listen", "127.0.0.1:0", "--lease-ttl", "3s", log="metrics.log"
        )
        port = eventually(
            lambda: (
                (m := re.search(r"127\.0\.0\.1:(\d+)/metrics", fleet.log("metrics.log")))
                and int(m.group(1))
            ),
            "the endpoint's address",
            within=DEADLINE,
            every=0.2,
        )
        assert endpoint.poll() is None
        fleet.target = prometheus.scrape(fleet.run_label, port)
        supervise = ("supervise", "--poll", "0.1", "--lease-ttl", "3s")
        first = fleet.start(*supervise, log="supervisor-1.log")
        fleet.start(*supervise, log="supervisor-2.log")
        holders = [
            eventually(
                functools.partial(_holder_in, fleet, i),
                f"supervisor {i} to start",
                within=DEADLINE,
                every=0.2,
            )
            for i in (1, 2)
        ]
        run = fleet.run_label

        def both_hold_leases_and_all_run() -> bool:
            leases = prometheus.by(f'jobdispatch_supervisor_leases{{run="{run}"}}', "supervisor")
            running = prometheus.by(f'jobdispatch_jobs{{run="{run}",state="running"}}')
            return all(leases[(h,)] > 0 for h in holders) and running[()] == JOBS

        eventually(
            both_hold_leases_and_all_run,
            "both supervisors to hold leases and every job to run",
            within=DEADLINE,
            every=0.2,
        )
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        for job in jobs:
            done = subprocess.run(
                [*cli_process.command(), "local", "preempt", job],
                env=fleet.env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, done.stderr
        eventually(
            lambda: all(fleet.json("status", job)["settled"] for job in jobs),
            "every job to settle under the survivor",
            every=1.0,
            within=DEADLINE,
        )
        yield fleet
    finally:
        fleet.close()


def _record_counts(fleet: Fleet) -> dict[str, Counter[tuple[str, ...]]]:
    """What the record holds, as `jobdispatch status --json` reads it for each job."""
    endings: Counter[tuple[str, ...]] = Counter()
    outcomes: Counter[tuple[str, ...]] = Counter()
    recoveries: Counter[tuple[str, ...]] = Counter()
    states: Counter[tuple[str, ...]] = Counter()
    for job in fleet.jobs:  # type: ignore[attr-defined]
        status = fleet.json("status", job)
        states[(status["state"],)] += 1
        for sub in status["submissions"]:
            for x in sub["executions"]:
                if x.get("cause"):
                    endings[(x["cause"]["kind"], x["cause"]["provenance"])] += 1
        if status["state"] in ("succeeded", "failed", "cancelled"):
            cause = status["cause"]
            outcomes[(status["state"], cause["kind"], cause["provenance"])] += 1
        for rule in status["plan"]["rules"]:
            if rule["firings"]:
                recoveries[(str(rule["index"]), rule["rule"]["action"], rule["enforcer"])] += rule[
                    "firings"
                ]
    return {"endings": endings, "outcomes": outcomes, "recoveries": recoveries, "states": states}


def test_promql_gives_exactly_the_counts_the_record_holds(fleet: Fleet) -> None:
    expected = _record_counts(fleet)
    # Not a vacuous comparison: every job was preempted once, recovered once, and succeeded.
    assert expected["states"] == {("succeeded",): JOBS}
    assert sum(expected["recoveries"].values()) == JOBS
    assert expected["endings"][("preempted", "scheduler")] == JOBS
    prom, run = fleet.prometheus, fleet.run_label
    queries = {
        "endings": (
            f'sum by (cause, provenance) (jobdispatch_execution_endings_total{{run="{run}"}})',
            ("cause", "provenance"),
        ),
        "outcomes": (
            f'sum by (state, cause, provenance) (jobdispatch_job_outcomes_total{{run="{run}"}})',
            ("state", "cause", "provenance"),
        ),
        "recoveries": (
            f'sum by (rule, action, enforcer) (jobdispatch_recoveries_total{{run="{run}"}})',
            ("rule", "action", "enforcer"),
        ),
        "states": (f'sum by (state) (jobdispatch_jobs{{run="{run}"}})', ("state",)),
    }

    def scraped() -> dict[str, Counter[tuple[str, ...]]]:
        return {key: +prom.by(q, *labels) for key, (q, labels) in queries.items()}

    # Prometheus shows what it scraped last: wait until it has scraped the settled records.
    eventually(
        lambda: scraped() == expected,
        "Prometheus to scrape the settled records",
        every=1.0,
        within=DEADLINE,
    )
    assert scraped() == expected


def test_the_counters_never_reset_through_the_takeover(fleet: Fleet) -> None:
    prom, run = fleet.prometheus, fleet.run_label
    for name in ("jobdispatch_execution_endings_total", "jobdispatch_recoveries_total"):
        resets = prom.query(f'sum(resets({name}{{run="{run}"}}[1h]))')
        assert [float(r["value"][1]) for r in resets] == [0.0], (name, resets)
        grew = prom.query(f'sum(max_over_time({name}{{run="{run}"}}[1h]))')
        assert float(grew[0]["value"][1]) > 0, name


def test_the_survivor_is_the_one_live_supervisor(fleet: Fleet) -> None:
    prom, run = fleet.prometheus, fleet.run_label
    eventually(
        lambda: prom.by(f'jobdispatch_supervisors_live{{run="{run}"}}') == {(): 1},
        "the killed supervisor to drop out of the members",
        within=DEADLINE,
        every=0.2,
    )
    survivor = _holder(fleet.log("supervisor-2.log"))
    ages = prom.by(f'jobdispatch_supervisor_last_poll_age_seconds{{run="{run}"}}', "supervisor")
    assert survivor is not None and (survivor,) in ages


def _panel_queries(run: str) -> list[tuple[str, str]]:
    """Each panel's queries as Grafana would send them with every cluster chosen, narrowed to
    this run's endpoint (so that no other run's series can answer for it)."""
    dashboard = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            assert 'cluster=~"$cluster"' in expr, (panel["title"], expr)
            expr = expr.replace('cluster=~"$cluster"', f'cluster=~".*",run="{run}"')
            out.append((panel["title"], expr.replace("$__rate_interval", "5m")))
    return out


def test_every_panel_of_the_dashboard_returns_data(fleet: Fleet) -> None:
    queries = _panel_queries(fleet.run_label)
    assert len(queries) >= 10
    prom = fleet.prometheus
    empty = [(title, expr) for title, expr in queries if not prom.query(expr)]
    assert not empty, f"panels whose query returns nothing: {empty}"
