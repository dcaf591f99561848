"""Fixtures for the command's tests: a private XDG config and state directory with a local
cluster tuned for tests (short grace and poll), the command run in this process with its exit
code, and a clean-up that leaves no runner or rank behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from jobdispatch_cli.main import main
from jobdispatch_local.testing import shut_down


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cgroups: needs a writable cgroup memory controller")


@attrs.frozen
class Ran:
    """What one run of the command printed, and its exit code."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Invoke = Callable[..., Ran]
Spawn = Callable[..., "subprocess.CompletedProcess[str]"]


def add_to_config(home: Path, toml: str) -> Path:
    """Append ``toml`` to the config file the ``home`` fixture wrote (after its local cluster's
    table); the file's path."""
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text(config.read_text() + toml)
    return config


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    config = tmp_path / "config"
    state = tmp_path / "state"
    (config / "jobdispatch").mkdir(parents=True)
    (config / "jobdispatch" / "config.toml").write_text(
        f'[clusters.local]\nadapter = "local"\nstate_dir = "{state}/local"\ngrace = 0.3\n'
        "poll = 0.02\n"
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # goodput's figures cache
    for name in ("JOBDISPATCH_CLUSTER", "JOBDISPATCH_STORE", "JOBDISPATCH_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path
    leftovers = shut_down(state / "local")
    assert not leftovers, f"processes outlived the test: {leftovers}"


@pytest.fixture
def invoke(home: Path) -> Invoke:
    """Run ``jobdispatch ARGS...`` in this process; returns its exit code and output."""
    runner = CliRunner()

    def run(*args: str) -> Ran:
        with runner.isolation() as (out, err, _):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())

    return run


@pytest.fixture
def job_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a job file (TOML) running ``command`` and return its path."""

    def write(command: list[str], name: str = "job", **keys: Any) -> Path:
        lines = [f'name = "{name}"', f"command = {json.dumps(command)}"]
        rules = keys.pop("rules", [])
        for key, value in keys.items():
            lines.append(f"{key} = {json.dumps(value)}")
        for rule in rules:
            lines.append("[[recovery.rules]]")
            lines.extend(f"{k} = {json.dumps(v)}" for k, v in rule.items())
        path = tmp_path / f"{name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    return write


def _spawn(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    umask: int = -1,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``jobdispatch ARGS`` in a new process (by default this one's environment, folder and
    umask), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "jobdispatch_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        umask=umask,
    )


@pytest.fixture
def spawn() -> Spawn:
    """Run the command as a process of its own, for what an in-process run cannot give: a
    signal, a umask, an environment of its own."""
    return _spawn
