"""``jobdispatch run`` reads the record in the foreground to report; while a shared store is
away those reads wait for it instead of ending the command (exit 5), the supervisor thread
riding the outage meanwhile. The end-to-end case, a real server killed under ``run``, is in
tests/test_supervise_postgres_outage.py."""

from __future__ import annotations

import threading

import pytest
from jobdispatch.errors import Invalid, Unavailable, Unreachable
from jobdispatch_cli.commands.running import _once_it_answers, _unless_away


class Flaky:
    """Away for its first ``away`` calls (alternating the two outage errors), then answers."""

    def __init__(self, away: int) -> None:
        self.away = away
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.away:
            raise (Unavailable if self.calls % 2 else Unreachable)("the store does not answer")
        return "status"


def test_a_report_while_the_store_is_away_is_skipped() -> None:
    assert _unless_away(Flaky(away=1)) is None
    assert _unless_away(Flaky(away=0)) == "status"


def test_an_error_that_is_no_outage_still_ends_the_command() -> None:
    def refuses() -> str:
        raise Invalid("bad settings")

    with pytest.raises(Invalid):
        _unless_away(refuses)


def test_the_final_report_waits_for_the_store() -> None:
    read = Flaky(away=2)
    assert _once_it_answers(read, threading.Event()) == "status"
    assert read.calls == 3


def test_a_stop_while_waiting_asks_once_more_and_lets_that_stand() -> None:
    stopped = threading.Event()
    stopped.set()
    with pytest.raises(Unreachable):
        _once_it_answers(Flaky(away=10), stopped)
