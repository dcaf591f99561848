"""Numbers a configuration file cannot mean: NaN and infinities (which TOML writes plainly and
JSON Schema's bounds cannot catch, every comparison with NaN being false) and absurd sizes.
Each is refused when the file is read, naming the file, its line and the key, with exit 2;
before issue 34 (item 4) ``poll = nan`` killed every local runner and the others gave
tracebacks (exit 1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)

_JOB = 'name = "p"\ncommand = ["true"]\n'


def _plan_under(invoke: Invoke, home: Path, config: str) -> tuple[Path, Any]:
    """``jobdispatch plan`` of a plain job with ``config`` as the config file: the config's
    path, and what the command did (exit 2 for each case here)."""
    path = home / "config" / "jobdispatch" / "config.toml"
    path.write_text(config)
    job = home / "p.toml"
    job.write_text(_JOB)
    ran = invoke("plan", str(job))
    assert ran.code == 2, ran.err
    return path, ran


@pytest.mark.parametrize(
    ("config", "line", "field", "value"),
    [
        ('[clusters.local]\nadapter = "local"\npoll = nan\n', 3, "clusters.local.poll", "nan"),
        ('[clusters.local]\nadapter = "local"\ngrace = nan\n', 3, "clusters.local.grace", "nan"),
        (
            'default_cluster = "s"\n[clusters.s]\nadapter = "slurm"\ncommand_timeout = nan\n',
            4,
            "clusters.s.command_timeout",
            "nan",
        ),
        (
            'default_cluster = "s"\n[clusters.s]\nadapter = "slurm"\n'
            '[clusters.s.ssh]\nhost = "login"\nconnect_timeout = nan\n',
            6,
            "clusters.s.ssh.connect_timeout",
            "nan",
        ),
        (
            'default_cluster = "s"\n[clusters.s]\nadapter = "slurm"\nprobe_ttl = inf\n',
            4,
            "clusters.s.probe_ttl",
            "inf",
        ),
        (
            '[store]\nkind = "postgresql"\nhost = "db"\nconnect_timeout = inf\n',
            4,
            "store.connect_timeout",
            "inf",
        ),
        (
            '[store]\nkind = "postgresql"\nhost = "db"\nstalled_transaction_timeout = -inf\n',
            4,
            "store.stalled_transaction_timeout",
            "-inf",
        ),
    ],
)
def test_a_non_finite_number_in_the_config_is_refused_naming_file_line_and_key(
    invoke: Invoke, home: Path, config: str, line: int, field: str, value: str
) -> None:
    path, ran = _plan_under(invoke, home, config)
    assert f"{path}:{line}: {field}: must be a finite number, got {value}" in ran.err, ran.err
    assert "Traceback" not in ran.err


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (
            'default_cluster = "s"\n[clusters.s]\nadapter = "slurm"\nprobe_ttl = 1e300\n',
            "clusters.s.probe_ttl",
        ),
        (
            'default_cluster = "s"\n[clusters.s]\nadapter = "slurm"\n'
            "mem_per_cpu = 9223372036854775807\n",
            "clusters.s.mem_per_cpu",
        ),
        (
            '[store]\nkind = "postgresql"\nhost = "db"\nconnect_timeout = 1e12\n',
            "store.connect_timeout",
        ),
        (
            '[clusters.local]\nadapter = "local"\nmemory_limit = 9223372036854775807\n',
            "clusters.local.memory_limit",
        ),
    ],
)
def test_an_absurd_number_in_the_config_is_refused(
    invoke: Invoke, home: Path, config: str, field: str
) -> None:
    path, ran = _plan_under(invoke, home, config)
    assert f"{path}:4: {field}:" in ran.err or f"{path}:3: {field}:" in ran.err, ran.err


@pytest.mark.parametrize("budget", ["100000000000000000000", "10001"])
def test_an_absurd_budget_is_refused(invoke: Invoke, home: Path, budget: str) -> None:
    job = home / "b.yaml"
    job.write_text(
        f'name: b\ncommand: ["true"]\nrecovery:\n  rules:\n'
        f"    - on: preempted\n      action: resubmit\n      budget: {budget}\n"
    )
    ran = invoke("plan", str(job))
    assert ran.code == 2, ran.err
    assert f"{job}:7: recovery.rules[0].budget: must be at most 10000, got {budget}" in ran.err


def test_the_largest_budget_is_accepted(invoke: Invoke, home: Path) -> None:
    job = home / "b.toml"
    job.write_text(
        _JOB + '[[recovery.rules]]\non = ["preempted"]\naction = "resubmit"\nbudget = 10000\n'
    )
    assert invoke("plan", str(job)).code == 0
