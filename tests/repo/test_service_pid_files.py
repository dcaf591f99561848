"""The service scripts' PID files are trusted only for the process that wrote them.

A PID file outlives its process when the machine reboots or is restored from an image, and by
then its PID may belong to a stranger: a CI run once found the real node's API forwarder
"alive" because its old PID now named a process the same run had just started, so the
forwarder was never started and the node could not reach the API server. ``pid_alive`` in
tools/lib/daemons.sh must say no for such a file (and ``stop_pid`` must not signal the
stranger), and yes for a file written while its process runs, including after the wall clock
is stepped forward (a machine restored from a snapshot), which makes every process seem to have
started after its file was written: the process once recognised is remembered beside the file
(``FILE.started``) by its PID, its start in ticks since boot and the boot id.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_layout import ROOT

DAEMONS = ROOT / "tools" / "lib" / "daemons.sh"


def _bash(script: str) -> subprocess.CompletedProcess[str]:
    """Run SCRIPT with daemons.sh sourced, as the service scripts do."""
    prelude = f"SERVICE=test; . {DAEMONS}\n"
    return subprocess.run(
        ["bash", "-c", prelude + script], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that no PID file was written for."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def _pid_file(tmp_path: Path, pid: int, written: float) -> Path:
    path = tmp_path / "daemon.pid"
    path.write_text(f"{pid}\n")
    os.utime(path, (written, written))
    return path


def test_a_file_written_while_its_process_runs_is_alive(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    path = _pid_file(tmp_path, stranger.pid, time.time())
    assert _bash(f"pid_alive {path}").returncode == 0


def test_a_file_older_than_the_process_it_names_is_not_alive(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    path = _pid_file(tmp_path, stranger.pid, time.time() - 3600)
    assert _bash(f"pid_alive {path}").returncode != 0


def test_stop_pid_leaves_a_stranger_alone_and_removes_the_stale_file(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    path = _pid_file(tmp_path, stranger.pid, time.time() - 3600)
    done = _bash(f"stop_pid {path} stale")
    assert done.returncode == 0, done.stderr
    assert stranger.poll() is None, "the process the stale file named was signalled"
    assert not path.exists()


def test_stop_pid_stops_the_process_its_file_names(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    path = _pid_file(tmp_path, stranger.pid, time.time())
    done = _bash(f"stop_pid {path} ours")
    assert done.returncode == 0, done.stderr
    assert stranger.wait(timeout=60) is not None
    assert not path.exists()


def test_a_file_naming_no_process_is_not_alive(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    path = _pid_file(tmp_path, gone.pid, time.time())
    assert _bash(f"pid_alive {path}").returncode != 0


def test_a_process_once_recognised_stays_alive_when_the_wall_clock_steps_forward(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    path = _pid_file(tmp_path, stranger.pid, time.time())
    assert _bash(f"pid_alive {path}").returncode == 0
    assert (tmp_path / "daemon.pid.started").read_text().split()[0] == str(stranger.pid)
    # A step of the wall clock an hour forward moves /proc/stat's boot time an hour later, so
    # the process's start, read through it, lands an hour after the file's time: the same as
    # the file being written an hour before the process started.
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert _bash(f"pid_alive {path}").returncode == 0
    done = _bash(f"stop_pid {path} ours")
    assert done.returncode == 0, done.stderr
    assert stranger.wait(timeout=60) is not None, "the recognised process was not stopped"
    assert not path.exists()
    assert not (tmp_path / "daemon.pid.started").exists()


@pytest.mark.parametrize("which", ["ticks", "boot"])
def test_a_memo_of_another_process_vouches_for_nothing(
    tmp_path: Path, stranger: subprocess.Popen[bytes], which: str
) -> None:
    """The same PID with another start (a reused PID) or from another boot is a stranger."""
    path = _pid_file(tmp_path, stranger.pid, time.time())
    assert _bash(f"pid_alive {path}").returncode == 0
    memo = tmp_path / "daemon.pid.started"
    pid, ticks, boot = memo.read_text().split()
    other = f"{pid} {int(ticks) + 1} {boot}" if which == "ticks" else f"{pid} {ticks} other-boot"
    memo.write_text(other + "\n")
    os.utime(path, (time.time() - 3600, time.time() - 3600))
    assert _bash(f"pid_alive {path}").returncode != 0
    assert memo.read_text().strip() == other, "a stranger must not be remembered"
