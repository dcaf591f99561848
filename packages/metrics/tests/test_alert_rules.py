"""The shipped alerting rules pass ``promtool check rules`` and fire (and only then) as
alerts_test.yml says, under ``promtool test rules``: Prometheus's own tool, from Debian's
prometheus package (tools/prometheus/up installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from jobdispatch_metrics import __file__ as package_init

RULES = Path(package_init).parent / "prometheus" / "alerts.yml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yml")


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        why = "no promtool: run tools/prometheus/up (it installs Debian's prometheus)"
        if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
            pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {why}")
        pytest.skip(why)
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_rules_check() -> None:
    done = _run("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout + done.stderr


def test_the_rules_fire_as_the_unit_tests_say() -> None:
    done = subprocess.run(
        [_promtool(), "test", "rules", UNIT_TESTS.name],
        cwd=UNIT_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_is_exercised() -> None:
    """Each alert of the file fires in at least one unit test (an untested rule would pass
    promtool's tests however wrong it is)."""
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {
        case["alertname"]
        for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert rules == tested


def test_a_broken_rule_is_refused(tmp_path: Path) -> None:
    """The check can fail: a rule whose expression does not parse is refused."""
    bad = tmp_path / "bad.yml"
    text = RULES.read_text()
    assert "jobdispatch_store_up == 0" in text
    bad.write_text(text.replace("jobdispatch_store_up == 0", "jobdispatch_store_up =="))
    assert _run("check", "rules", str(bad)).returncode != 0
