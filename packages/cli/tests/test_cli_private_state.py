"""Nobody but the owner can read what the command and the local adapter keep, whatever the umask.

A record keeps its job's ``env`` verbatim, and so does the local adapter's ``object.json``; a
rank's output may print it. Under the common umask 022 the command used to make its state
folders 0755 and its files 0644, so on a login node with 0755 homes another user read
``HF_TOKEN`` from ``data.mdb`` and ``object.json``.

The command runs as a real process under umask 022 with a home of its own (0755, in a folder
every user can enter), as on such a login node. Each entry it made is checked by mode; when the
test runs as root, another user (``nobody``, through ``setpriv``) also tries to read each file.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jobdispatch_local.testing import shut_down

SECRET = "hf_SUPERSECRET123"
NOBODY = 65534
_OTHERS = stat.S_IRWXG | stat.S_IRWXO
Spawn = Callable[..., "subprocess.CompletedProcess[str]"]  # the conftest's fixture


@pytest.fixture
def login_home() -> Iterator[Path]:
    """A 0755 home in a 0755 folder under /tmp: every user may enter it, as on a login node
    (pytest's own tmp_path is 0700, behind which nothing could be read anyway)."""
    top = Path(tempfile.mkdtemp(prefix="jd-private-", dir="/tmp"))
    top.chmod(0o755)
    home = top / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    (top / "job.toml").write_text(
        'name = "sec"\ncommand = ["sh", "-c", "echo token=$HF_TOKEN"]\n'
        f'[env]\nHF_TOKEN = "{SECRET}"\n'
    )
    (top / "job.toml").chmod(0o644)
    yield home
    leftovers = shut_down(home / ".local" / "state" / "jobdispatch" / "local")
    shutil.rmtree(top, ignore_errors=True)
    assert not leftovers, f"processes outlived the test: {leftovers}"


@pytest.fixture
def at_home(spawn: Spawn, login_home: Path) -> Spawn:
    """``jobdispatch ARGS`` as a user would run it: umask 022, no XDG variables, that home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "JOBDISPATCH_"))}
    env["HOME"] = str(login_home)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return spawn(*args, env=env, cwd=login_home.parent, umask=0o022)

    return run


def _entries(home: Path) -> list[Path]:
    return sorted(p for p in (home / ".local").rglob("*") if not p.is_symlink())


def _open_to_others(home: Path) -> list[str]:
    return [
        f"{stat.S_IMODE(p.lstat().st_mode):04o} {p.relative_to(home)}"
        for p in [home / ".local", *_entries(home)]
        if p.lstat().st_mode & _OTHERS
    ]


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _run_and_submit(home: Path, at_home: Spawn) -> None:
    job = str(home.parent / "job.toml")
    ran = at_home("run", job)
    assert ran.returncode == 0, ran.stderr
    ran = at_home("submit", job)
    assert ran.returncode == 0, ran.stderr
    state = home / ".local" / "state" / "jobdispatch"
    # The secret is where the issue found it, so the checks below are about real copies of it.
    assert SECRET.encode() in (state / "records" / "local" / "data.mdb").read_bytes()
    (obj,) = (state / "local" / "objects").iterdir()
    assert SECRET in (obj / "object.json").read_text()
    assert SECRET in (obj / "rank-0.out").read_text()


def test_under_umask_022_nothing_the_command_made_is_open_to_other_users(
    login_home: Path, at_home: Spawn
) -> None:
    _run_and_submit(login_home, at_home)
    assert _open_to_others(login_home) == []
    for path in _entries(login_home):
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="reading as another user needs root and setpriv",
)
def test_another_user_cannot_read_the_jobs_secret(login_home: Path, at_home: Spawn) -> None:
    _run_and_submit(login_home, at_home)
    # The other user can enter the home: what stops them is the command's own modes.
    assert _as_nobody("ls", str(login_home)).returncode == 0
    files = [p for p in _entries(login_home) if p.is_file()]
    assert len(files) >= 10  # the record's two files, the object's and the rank's
    for path in files:
        read = _as_nobody("cat", str(path))
        assert read.returncode != 0 and SECRET not in read.stdout, path
    found = _as_nobody("grep", "-r", "-a", "-l", SECRET, str(login_home))
    assert found.stdout == "", found.stdout


def test_a_state_folder_left_open_is_closed_with_a_warning(
    login_home: Path, at_home: Spawn
) -> None:
    _run_and_submit(login_home, at_home)
    state = login_home / ".local" / "state" / "jobdispatch"
    for path in [state, *state.rglob("*")]:  # as an earlier version left them
        path.chmod(0o755 if path.is_dir() else 0o644)
    ran = at_home("list")
    assert ran.returncode == 0, ran.stderr
    assert f"the state folder {state} was open to other users (mode 0755)" in ran.stderr
    assert "now 0700" in ran.stderr and "sec" in ran.stdout
    assert [e for e in _open_to_others(login_home) if "jobdispatch" in e] == []
    again = at_home("list")
    assert again.returncode == 0 and "warning" not in again.stderr  # told once
