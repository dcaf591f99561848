"""A supervisor *process* paused (SIGSTOP) inside the local adapter's open must not freeze the
store for anybody else.

Supervisor A is stopped exactly between recording an object's gate lifted and spawning its
runner: it runs the real ``jobdispatch`` command line in a wrapper that replaces
``jobdispatch_local.backend._spawn`` with a function that stops its own process first (the
hook lives in this test only; the adapter never looks for it). While A stays stopped:

- a second supervisor B starts and finishes an unrelated job;
- ``jobdispatch local ps`` and ``jobdispatch list`` answer;
- B takes A's job over once A's lease has passed and runs it, once.

Then A resumes and carries on with its stale open: the runner it spawns late must start
nothing, so the job's program ran exactly once. What ran is checked against the runners' own
records and against a file every execution of the program appends to, not against what either
supervisor says about itself.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.testing import eventually
from jobdispatch_local.layout import ObjectDir, scan
from test_cli_end_to_end import Home as CliHome

#: Generous bounds on waits for things that happen in well under a second when nothing is
#: wrong; they only turn a hang into a failure (nothing here measures time).
TIMEOUT = 60.0

PAUSE_IN_OPEN = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path

    import jobdispatch_local.backend as backend
    from jobdispatch_cli.main import main

    real = backend._spawn
    marker = Path(os.environ["JD_TEST_PAUSED_MARKER"])

    def paused_spawn(obj):
        marker.write_text(obj.name)
        os.kill(os.getpid(), signal.SIGSTOP)  # a GC pause, a frozen VM: exactly here
        real(obj)

    backend._spawn = paused_spawn
    sys.argv = ["jobdispatch", *sys.argv[1:]]
    sys.exit(main())
""")


def _stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


class Home(CliHome):
    """The end-to-end tests' private configuration and state, which also starts programs
    other than the command (the pausing wrapper) and continues a stopped one before killing it.
    """

    def spawn(self, argv: list[str], log: str, **env: str) -> subprocess.Popen[bytes]:
        with (self.root / log).open("ab") as out:
            proc = subprocess.Popen(
                argv, env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT
            )
        self.procs.append(proc)
        return proc

    def job(self, name: str, runs: Path) -> str:
        path = self.root / f"{name}.toml"
        line = f'echo "$JOBDISPATCH_OBJECT $JOBDISPATCH_EXECUTION" >> {runs}; sleep 0.3'
        path.write_text(f"name = {name!r}\ncommand = {json.dumps(['sh', '-c', line])}\n")
        return str(self.json("submit", str(path))["job"])

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        super().close()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    """This test's own home (the pausing one), in place of tests/conftest.py's."""
    h = Home(tmp_path)
    yield h
    h.close()


def test_a_supervisor_paused_inside_open_freezes_nothing_and_is_taken_over(home: Home) -> None:
    runs = home.root / "runs.txt"
    a = home.job("a", runs)
    marker = home.root / "paused"
    wrapper = home.root / "pause_in_open.py"
    wrapper.write_text(PAUSE_IN_OPEN)
    sup_a = home.spawn(
        [sys.executable, str(wrapper), "supervise", "--lease-ttl", "2s", "--poll", "0.1"],
        "supervisor-a.log",
        JD_TEST_PAUSED_MARKER=str(marker),
    )
    eventually(lambda: marker.exists() and _stopped(sup_a.pid), "supervisor A to stop inside open")
    obj_a = ObjectDir(home.local / "objects" / marker.read_text())
    assert obj_a.read_control()["opened"], "A recorded the gate lifted before it stopped"
    assert obj_a.read_runner() is None, "and stopped before any runner existed"

    b = home.job("b", runs)
    sup_b = home.start("supervise", "--lease-ttl", "2s", "--poll", "0.1", log="supervisor-b.log")

    # Every observer answers while A stays stopped.
    ps = home.run("local", "ps", "--all", "--json")
    assert ps.returncode == 0, ps.stderr
    assert obj_a.name in {o["ref"]["id"] for o in json.loads(ps.stdout)}
    assert {row["job"] for row in home.json("list")} == {a, b}

    def settled(job: str) -> Any:
        status = home.json("status", job)
        return status if status["state"] in ("succeeded", "failed", "cancelled") else None

    # B runs the unrelated job, then takes A's job over once A's lease has passed.
    assert eventually(lambda: settled(b), "job b to settle")["state"] == "succeeded"
    status_a = eventually(lambda: settled(a), "job a to settle under supervisor B")
    assert status_a["state"] == "succeeded"
    assert _stopped(sup_a.pid), "all of this happened while A was stopped"
    first_runner = obj_a.read_runner()
    assert first_runner is not None

    # A wakes and finishes its stale open: the runner it spawns late must start nothing.
    sup_a.send_signal(signal.SIGCONT)

    def late_runner_left() -> bool:
        runner = obj_a.read_runner()
        return bool(
            runner is not None and runner["pid"] != first_runner["pid"] and runner.get("done")
        )

    eventually(late_runner_left, "the runner A spawned late to take the object and leave it")
    for proc in (sup_a, sup_b):
        proc.send_signal(signal.SIGTERM)
    for proc in (sup_a, sup_b):
        assert proc.wait(timeout=TIMEOUT) == 0, (home.root / "supervisor-a.log").read_text()

    # Exactly one execution of each job's program, each in its job's first object.
    objects = {obj.name: obj.executions() for obj in scan(home.local)}
    assert sorted(objects) == sorted([f"jd-{a}-1-1", f"jd-{b}-1-1"])
    assert all(len(executions) == 1 for executions in objects.values()), objects
    assert sorted(runs.read_text().split("\n")[:-1]) == sorted([f"jd-{a}-1-1 0", f"jd-{b}-1-1 0"])
    assert len(home.json("status", a)["submissions"]) == 1
