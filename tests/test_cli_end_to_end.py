"""The ``jobdispatch`` command end to end, through real subprocesses: the installed console
script, the LMDB store, the local adapter's runners, and a supervisor killed with SIGKILL in the
middle of a recovery.

What a crash must never do is checked against the runner's own records (the execution files in
the local state directory), not against what the supervisor says about itself.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.errors import Unavailable
from jobdispatch.testing import PATIENCE, eventually
from jobdispatch.types import ObjectState
from jobdispatch_local.layout import scan
from jobdispatch_local.testing import make_backend, shut_down

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "train.py"
TIMEOUT = 90.0


class Home:
    """A private configuration and state for the command, and ways to run it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "state"
        self.local = self.state / "local"
        config = root / "config" / "jobdispatch"
        config.mkdir(parents=True)
        (config / "config.toml").write_text(cli_process.local_config(self.local))
        self.env = cli_process.environment(
            XDG_CONFIG_HOME=str(root / "config"), XDG_STATE_HOME=str(self.state)
        )
        self.procs: list[subprocess.Popen[bytes]] = []

    def run(self, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        return cli_process.run(args, self.env, timeout=timeout)

    def json(self, *args: str) -> Any:
        return cli_process.run_json(args, self.env, timeout=TIMEOUT)

    def settled(
        self,
        job: str,
        what: str = "the job to settle",
        *,
        within: float = PATIENCE,
        every: float = 0.5,
    ) -> Any:
        """The job's status (``status --json``) once it is settled: waited for, as ``what``."""
        return eventually(
            lambda: self.json("status", job),
            what,
            holds=lambda s: s["settled"],
            within=within,
            every=every,
        )

    def start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        proc = cli_process.start(args, self.env, self.root / log)
        self.procs.append(proc)
        return proc

    def job_file(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def executions(self, job: str) -> list[dict[str, Any]]:
        """Every execution the runners recorded for the job, each tagged with its object."""
        out = []
        for obj in scan(self.local, f"jd-{job}-"):
            for e in obj.executions():
                out.append({**e, "object": obj.name})
        return out

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        leftovers = shut_down(self.local)
        assert not leftovers, f"processes outlived the test: {leftovers}"


def train_job(home: Home, steps: int, step_seconds: float, wait_at: int, budget: int = 3) -> Path:
    """The example's training job, whose first submission waits after step ``wait_at`` until it
    is preempted: a test preempts it when it is ready, however long the preempting command
    takes to start on a loaded machine, and never finds the job already ended."""
    return home.job_file(
        "train.toml",
        f"""\
name = "train"
command = [
    "{sys.executable}", "{TRAIN}",
    "--steps", "{steps}", "--step-seconds", "{step_seconds}", "--wait-at", "{wait_at}",
]
nodes = 2
working_dir = "{home.root}"

[env]
CHECKPOINT_DIR = "{home.root / "checkpoints"}"

[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = {budget}
""",
    )


def assert_one_execution_at_a_time(executions: list[dict[str, Any]]) -> None:
    """No two executions of the job overlap in time, by the runners' own clocks."""
    spans = sorted(
        (
            datetime.fromisoformat(e["started_at"]),
            datetime.fromisoformat(e["ended_at"]),
            e["object"],
        )
        for e in executions
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert start >= end, f"{second} started at {start} while {first} ran until {end}"


# ------------------------------------------------------------------------------------ tests


def test_plugins_lists_memory_local_and_lmdb(home: Home) -> None:
    data = home.json("plugins")
    adapters = {e["name"] for e in data["registries"]["adapter"]}
    stores = {e["name"] for e in data["registries"]["record-store"]}
    assert {"memory", "local"} <= adapters
    assert "lmdb" in stores
    table = home.run("plugins")
    assert table.returncode == 0
    for name in ("memory", "local", "lmdb"):
        assert name in table.stdout


def test_bad_job_files_name_the_line_and_the_field(home: Home) -> None:
    toml = home.job_file(
        "bad.toml",
        'name = "x"\ncommand = ["true"]\n\n[[recovery.rules]]\non = ["preemptd"]\n'
        'action = "resubmit"\nbudget = 2\n',
    )
    done = home.run("submit", str(toml))
    assert done.returncode == 2
    assert f"{toml}:5: recovery.rules[0].on[0]: unknown cause 'preemptd'" in done.stderr
    yaml = home.job_file("bad.yaml", "name: x\ncommand: [true]\nnodes: -2\nprocs_per_nod: 2\n")
    done = home.run("plan", str(yaml))
    assert done.returncode == 2
    assert f"{yaml}:3: nodes: must be at least 1, got -2" in done.stderr
    assert f"{yaml}:4: procs_per_nod: unknown key" in done.stderr
    assert home.json("list") == [], "nothing was submitted"


def recovery_steps_by(home: Home, job: str, pid: int) -> list[str]:
    """The recovery decisions (for submission 2) the supervisor with this pid committed."""
    from jobdispatch.records import events as ev
    from jobdispatch_records_lmdb import LmdbRecords

    store = LmdbRecords(home.state / "jobdispatch" / "records" / "local")
    try:
        view = store.read(job)
    finally:
        store.close()
    mine = []
    for e in view.events:
        if f":{pid}:" not in str(e.by) or getattr(e, "submission", getattr(e, "n", 0)) != 2:
            continue
        if isinstance(
            e,
            ev.SubmissionAuthorized
            | ev.AttemptStarted
            | ev.AttemptReplied
            | ev.CanonicalChosen
            | ev.OpenDecided,
        ):
            mine.append(e.kind)
    return mine


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3])
def test_a_supervisor_killed_mid_recovery_loses_nothing_and_runs_nothing_twice(
    home: Home, delay: float
) -> None:
    """Submit; supervise; freeze the supervisor and preempt the job; let the supervisor go and
    SIGKILL it ``delay`` seconds into its recovery; start another; the job still finishes, from
    its checkpoint, with exactly one execution running at any time."""
    job = home.json("submit", str(train_job(home, steps=24, step_seconds=0.1, wait_at=6)))["job"]
    supervise = ("supervise", "--poll", "0.05", "--lease-ttl", "2s")
    first = home.start(*supervise, log="supervisor-1.log")
    backend = make_backend(home.local)

    def running_and_checkpointed() -> bool:
        ckpts = list((home.root / "checkpoints" / job).glob("*/step-*.json"))
        running = [o for o in backend.find(job).objects if o.state is ObjectState.RUNNING]
        return bool(running) and len(ckpts) >= 3

    eventually(running_and_checkpointed, "the first execution to run and checkpoint")
    [running] = [o for o in backend.find(job).objects if o.state is ObjectState.RUNNING]
    # Preempted here rather than by `jobdispatch local preempt`: the frozen supervisor may hold
    # the LMDB store's writer lock (it renews its lease every poll), and the command opens the
    # store for writing, so it would wait for a supervisor that waits for us.
    for _ in range(50):
        first.send_signal(signal.SIGSTOP)
        try:
            backend.preempt(running.ref)  # returns once the execution has ended
            break
        except Unavailable:
            # Frozen while it held the object's lock (it was looking at it): let it finish.
            first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
    else:
        raise AssertionError("the supervisor held the object's lock at every freeze")
    first.send_signal(signal.SIGCONT)
    time.sleep(delay)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    done_by_first = recovery_steps_by(home, job, first.pid)
    print(f"killed {delay}s into the recovery, after: {done_by_first or 'nothing'}")

    second = home.start(*supervise, log="supervisor-2.log")
    eventually(
        lambda: any(
            o.identity and o.identity[1] == 2 and o.state is ObjectState.ENDED
            for o in backend.find(job).objects
        ),
        "the second submission to run to its end",
        every=0.05,
    )
    status = home.settled(job, "the job to settle under the second supervisor")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0, (home.root / "supervisor-2.log").read_text()
    assert "stopped" in (home.root / "supervisor-2.log").read_text()

    assert status["state"] == "succeeded", status
    assert [s["n"] for s in status["submissions"]] == [1, 2], status
    assert status["submissions"][0]["executions"][0]["cause"]["kind"] == "preempted"
    assert status["plan"]["rules"][0]["firings"] == 1

    executions = home.executions(job)
    assert_one_execution_at_a_time(executions)
    # Exactly the canonical object of each submission ran (a crash between an attempt's
    # decision and its Start may make the second supervisor use attempt 2: still one object).
    ran = sorted({e["object"] for e in executions})
    canonical = sorted(s["canonical"]["id"] for s in status["submissions"])
    assert ran == canonical, f"objects that ran: {ran}; canonical: {canonical}"
    others = [o for o in backend.find(job).objects if o.name not in canonical]
    assert all(not o.executions and o.state is ObjectState.ENDED for o in others), others
    logs = home.run("logs", job, "--rank", "0")
    assert logs.returncode == 0
    assert "resuming from step" in logs.stdout, logs.stdout
    assert "done: w" in logs.stdout


def test_run_recovers_the_training_example_from_its_checkpoint(home: Home) -> None:
    """The README's command on a fast variant of the example: preempted from a second
    terminal, it resumes from its newest checkpoint and succeeds; run exits 0."""
    path = train_job(home, steps=40, step_seconds=0.08, wait_at=5)
    runner = home.start("run", str(path), "--poll", "0.05", log="run.log")
    log = home.root / "run.log"
    job = eventually(lambda: _job_from(log.read_text()), "run to print the job", every=0.05)

    def checkpointed() -> bool:
        return len(list((home.root / "checkpoints" / job).glob("*/step-*.json"))) >= 3

    eventually(checkpointed, "a few checkpoints", every=0.05)
    assert home.run("local", "preempt", job).returncode == 0
    assert runner.wait(timeout=TIMEOUT) == 0, log.read_text()
    text = log.read_text()
    assert "ended: preempted" in text
    assert "recovering → succeeded" in text or "recovering -> succeeded" in text
    assert "outcome: succeeded" in text
    second = home.run("logs", job, "--submission", "2")
    assert "resuming from step" in second.stdout
    assert_one_execution_at_a_time(home.executions(job))


def test_the_example_job_file_plans(home: Home) -> None:
    plan = home.json("plan", str(ROOT / "examples" / "train.toml"))
    assert plan["rules"][0]["enforcer"] == "supervisor"
    assert plan["rules"][0]["rule"]["budget"] == 3


def _job_from(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("job "):
            return line.split()[1]
    return None


def test_interrupting_run_leaves_the_job_to_a_supervisor(home: Home) -> None:
    """Ctrl-C stops supervising, not the job: run exits 130, the ranks go on, and a
    supervisor started later sees the job to its end."""
    # The job runs until the test lets it end (by creating ``release``), so it is still running
    # when run is interrupted and checked, however slow the machine.
    release = home.root / "release"
    path = home.job_file(
        "nap.toml",
        f'name = "nap"\ncommand = ["sh", "-c", "until [ -e {release} ]; do sleep 0.05; done"]\n',
    )
    runner = home.start("run", str(path), "--poll", "0.05", log="run.log")
    log = home.root / "run.log"
    job = eventually(lambda: _job_from(log.read_text()), "run to print the job", every=0.05)
    backend = make_backend(home.local)
    eventually(
        lambda: any(o.state is ObjectState.RUNNING for o in backend.find(job).objects),
        "the job to run",
    )
    runner.send_signal(signal.SIGINT)
    assert runner.wait(timeout=30) == 130, log.read_text()
    assert "goes on" in log.read_text()
    assert any(o.state is ObjectState.RUNNING for o in backend.find(job).objects)
    supervisor = home.start("supervise", "--poll", "0.05", log="supervisor.log")
    release.touch()
    status = home.settled(job)
    supervisor.send_signal(signal.SIGINT)
    assert supervisor.wait(timeout=30) == 0
    assert status["state"] == "succeeded"
    assert len(status["submissions"]) == 1


def _start_demo(home: Home, preempt_after: str) -> tuple[subprocess.Popen[bytes], Path, str]:
    """What ``./dev demo`` runs (examples/demo.py, which runs ``run --follow`` on the example job
    file itself), started with the home's configuration; returns it, its log and the job id."""
    demo = (ROOT / "dev").read_text()
    assert "python examples/demo.py" in demo, "the test runs what ./dev demo runs"
    log = home.root / "demo.log"
    script = [sys.executable, str(ROOT / "examples" / "demo.py")]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*script, "--preempt-after", preempt_after, "--", "--poll", "0.05"],
            env=home.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    home.procs.append(proc)
    job = eventually(lambda: _job_from(log.read_text()), "the demo to print the job", every=0.05)
    return proc, log, job


def _assert_the_demo_recovered(
    home: Home, demo: subprocess.Popen[bytes], log: Path, job: str
) -> None:
    assert demo.wait(timeout=TIMEOUT) == 0, log.read_text()
    text = log.read_text()
    assert text.count("ended: preempted (scheduler)") == 1, text
    assert "submission 1 execution 0 ended: preempted (scheduler)" in text, text
    assert "recovering → succeeded" in text or "recovering -> succeeded" in text, text
    second = home.run("logs", job, "--submission", "2", "--rank", "0").stdout
    assert "resuming from step 30" in second, second
    assert "done: w" in second, second
    assert_one_execution_at_a_time(home.executions(job))


def test_the_readme_demo_waits_for_the_reader_to_preempt_it(home: Home) -> None:
    """The README's demo, step by step: once rank 0 says it is waiting to be preempted, preempt
    it with `jobdispatch local preempt` as the reader does from a second terminal; the job
    recovers from its checkpoint at step 30 and succeeds, and the demo preempts nothing more.
    The first submission waits for the preemption (here the demo's own deadline is an hour), so
    how long the reader (or this machine) takes to get there changes nothing."""
    demo, log, job = _start_demo(home, preempt_after="3600")
    eventually(
        lambda: "step 30: waiting to be preempted" in log.read_text(),
        "rank 0 to say it waits for the preemption",
        every=0.2,
    )
    preempted = home.run("local", "preempt", job)
    assert preempted.returncode == 0, preempted.stderr
    _assert_the_demo_recovered(home, demo, log, job)
    assert "so the demo does" not in log.read_text()


def test_the_readme_demo_preempts_the_job_itself_when_nobody_does(home: Home) -> None:
    """`./dev demo` alone runs to its end: with nobody at a second terminal, the demo preempts
    the first submission itself once its deadline passed (here at once), as the command would,
    and shows the recovery."""
    demo, log, job = _start_demo(home, preempt_after="0")
    _assert_the_demo_recovered(home, demo, log, job)
    assert f"jobdispatch local preempt jd-{job}-1-" in log.read_text()
