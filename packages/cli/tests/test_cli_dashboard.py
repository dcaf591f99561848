"""``jobdispatch dashboard``'s wiring: the dashboard is a distribution of its own, imported only
when the command runs; its checks fail before anything listens. (The pages themselves are
tested in packages/dashboard/tests, and in a browser in tests/test_dashboard_browser.py.)"""

from __future__ import annotations

import sys

import pytest

from .conftest import Invoke


def test_without_the_dashboard_it_says_what_to_install(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jobdispatch_dashboard", None)  # its import fails
    ran = invoke("dashboard")
    assert ran.code == 2
    assert "pip install jobdispatch-dashboard" in ran.err


def test_an_open_address_without_a_token_is_refused(invoke: Invoke) -> None:
    pytest.importorskip("jobdispatch_dashboard", reason="jobdispatch-dashboard not installed")
    ran = invoke("dashboard", "--listen", "0.0.0.0:8765")
    assert ran.code == 2
    assert "--listen 0.0.0.0:8765: not a loopback address" in ran.err
    assert "--token-file" in ran.err


def test_a_bad_token_file_is_named(invoke: Invoke) -> None:
    pytest.importorskip("jobdispatch_dashboard", reason="jobdispatch-dashboard not installed")
    ran = invoke("dashboard", "--token-file", "/nonexistent/token")
    assert ran.code == 2
    assert "--token-file /nonexistent/token: no such file" in ran.err
