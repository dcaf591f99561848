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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--listen", "0.0.0.0:8765"), "--listen 0.0.0.0:8765: not a loopback address"),
        (("--token-file", "/nonexistent/token"), "--token-file /nonexistent/token: no such file"),
    ],
)
def test_a_bad_option_is_named_before_anything_listens(
    invoke: Invoke, args: tuple[str, ...], said: str
) -> None:
    pytest.importorskip("jobdispatch_dashboard", reason="jobdispatch-dashboard not installed")
    ran = invoke("dashboard", *args)
    assert ran.code == 2
    assert said in ran.err
