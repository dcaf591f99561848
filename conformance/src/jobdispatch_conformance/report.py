"""The JSON summary of a conformance run: what passed, what failed and why, what was skipped
and why, and what the cluster answered for each capability, unknowns included.

JUnit XML (pytest's own ``--junitxml``) is for CI dashboards; this summary is for a person at a
site deciding whether the adapter can be trusted on their cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["Summary"]


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    if report.failed and hasattr(longrepr, "reprcrash"):
        crash = getattr(longrepr, "reprcrash", None)
        if crash is not None:
            return str(crash.message)
    return str(longrepr) if longrepr is not None else ""


class Summary:
    """A pytest plugin object that collects each test's outcome as it is reported."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: list[dict[str, str]] = []
        self.skipped: list[dict[str, str]] = []
        self.notes: dict[str, dict[str, str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = report.nodeid.split("::", 1)[-1]
        if report.user_properties:
            self.notes.setdefault(name, {}).update(
                {str(k): str(v) for k, v in report.user_properties}
            )
        if report.failed:
            self.failed.append({"test": name, "phase": report.when, "message": _reason(report)})
        elif report.skipped:
            self.skipped.append({"test": name, "reason": _reason(report)})
        elif report.passed and report.when == "call":
            self.passed.append(name)

    def as_dict(self, **extra: Any) -> dict[str, Any]:
        return {
            **extra,
            "totals": {
                "passed": len(self.passed),
                "failed": len(self.failed),
                "skipped": len(self.skipped),
            },
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "notes": self.notes,
        }
