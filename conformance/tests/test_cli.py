"""``jobdispatch-conformance run`` against the memory adapter, as a site would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def run(tmp_path: Path, config: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any], str]:
    (tmp_path / "site.json").write_text(json.dumps(config))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "jobdispatch_conformance.cli",
            "run",
            "--adapter",
            "memory",
            "--config",
            str(tmp_path / "site.json"),
            "--junit-xml",
            str(tmp_path / "out.xml"),
            "--json",
            str(tmp_path / "out.json"),
            "--settle",
            "5",
            "--poll",
            "0.001",
            "--quiet",
            "0",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    summary = json.loads((tmp_path / "out.json").read_text())
    return result.returncode, summary, result.stdout + result.stderr


def test_a_site_run_passes_on_memory_and_writes_both_reports(tmp_path: Path) -> None:
    status, summary, output = run(
        tmp_path,
        {"shape": "kubeflow", "auto_run": True, "capabilities": {"output-follow": "unknown"}},
    )
    assert status == 0, output
    assert summary["totals"]["failed"] == 0
    assert summary["totals"]["passed"] > 30
    assert summary["capabilities"]["output-retained"]["answer"] == "unknown"
    # The Kubeflow shape cannot say for Kueue queues and exclusive placement either.
    assert summary["unknown"] == ["exclusive-nodes", "output-follow", "output-retained", "queues"]
    noted = {k: v for notes in summary["notes"].values() for k, v in notes.items()}
    assert noted["capability.output-follow"] == "unknown: worked"
    suite = ET.parse(tmp_path / "out.xml").getroot()
    assert int(suite.find("testsuite").get("tests")) == sum(summary["totals"].values())  # type: ignore[union-attr,arg-type]


def test_without_a_driver_scenarios_are_skipped_with_their_reason(tmp_path: Path) -> None:
    status, summary, output = run(tmp_path, {"shape": "slurm", "auto_run": True}, "--no-driver")
    assert status == 0, output
    reasons = {s["test"]: s["reason"] for s in summary["skipped"]}
    assert reasons["TestSite::test_ending_gives_its_cause[preempt]"] == (
        "the driver cannot preempt"
    )
    assert "lose_next_start_reply" in reasons["TestSite::test_find_includes_lost_replies"]
    assert "TestSite::test_start_creates_a_gated_object" in summary["passed"]


def test_a_bad_configuration_fails_the_configuration_tests(tmp_path: Path) -> None:
    status, summary, _ = run(tmp_path, {"shape": "slurm", "colour": "red"}, "-k", "config")
    assert status == 1
    assert summary["failed"]
    assert "colour" in summary["failed"][0]["message"]
