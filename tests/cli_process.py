"""The ``jobdispatch`` command run as its own process, as a user runs it.

The tests under tests/ that drive the command this way share one way to find it, run it, read
its ``--json`` output and start a long-running one (``supervise``, ``run``) with its output
appended to a log, so that a change to how the command is found or run is made once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: How long one short command may take before the test fails (TimeoutExpired): generous, so
#: that only a hang trips it.
TIMEOUT = 120.0


def environment(**settings: str) -> dict[str, str]:
    """This process's environment for the command, with ``settings`` added: without any
    ``JOBDISPATCH_`` variable of the developer's (a test names its own configuration), and
    without ``PYTHONDONTWRITEBYTECODE``, so the many short runs reuse compiled modules. A test
    that names its own state folder gets a cache folder beside it (``goodput`` keeps figures
    there), never the developer's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JOBDISPATCH_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(settings)
    if "XDG_STATE_HOME" in settings and "XDG_CACHE_HOME" not in settings:
        env["XDG_CACHE_HOME"] = str(Path(settings["XDG_STATE_HOME"]).parent / "cache")
    return env


def local_config(
    state_dir: Path,
    *,
    grace: float = 0.5,
    poll: float = 0.02,
    store: Mapping[str, str] | None = None,
) -> str:
    """A config file's text: the cluster ``local`` on the local adapter (its objects under
    ``state_dir``), and a ``[store]`` table when ``store`` names one (a PostgreSQL's ``kind``,
    ``dsn``, ``password_file`` and ``schema``)."""
    text = (
        f'[clusters.local]\nadapter = "local"\nstate_dir = "{state_dir}"\n'
        f"grace = {grace:g}\npoll = {poll:g}\n"
    )
    if store:
        text += "\n[store]\n" + "".join(f'{k} = "{v}"\n' for k, v in store.items())
    return text


def postgres_store(server: Any, schema: str) -> dict[str, str]:
    """The ``[store]`` table of a config for the PostgreSQL ``server`` (a ``PrivateServer``)."""
    return {
        "kind": "postgresql",
        "dsn": server.dsn,
        "password_file": str(server.password_file),
        "schema": schema,
    }


def command() -> list[str]:
    """The ``jobdispatch`` script installed beside this Python, else the module run by it."""
    script = Path(sys.executable).parent / "jobdispatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "jobdispatch_cli.main"]


def run(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """``jobdispatch ARGS`` to its end, its output captured; a hang past ``timeout`` fails the
    test (TimeoutExpired)."""
    return subprocess.run(
        [*command(), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def run_json(args: Sequence[str], env: Mapping[str, str], *, timeout: float = TIMEOUT) -> Any:
    """``jobdispatch ARGS --json``, which must succeed, its output parsed."""
    done = run([*args, "--json"], env, timeout=timeout)
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def start(
    args: Sequence[str], env: Mapping[str, str], log: Path, *, prefix: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """``jobdispatch ARGS`` started, its output and errors appended to ``log``; ``prefix`` runs
    it inside another command (``ip netns exec ...``)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [*prefix, *command(), *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )
