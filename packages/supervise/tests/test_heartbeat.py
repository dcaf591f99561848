"""The supervisor's heartbeat: asked for after every poll that saw its store and its cluster,
never after a blind one; and sent to a real dead-man URL on loopback without delaying a poll."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import NoReturn

import pytest
from jobdispatch import JobSpec
from jobdispatch.errors import Invalid, Unavailable, Unreachable
from jobdispatch.records.store import ListFilter
from jobdispatch.testing import eventually
from jobdispatch_supervise import supervisor as supervisor_module
from jobdispatch_supervise.heartbeat import Heartbeat
from jobdispatch_supervise.testing import Receiver

from .conftest import Scenario

UNSETTLED = ListFilter(settled=False)
ME_TIME = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


class Beats:
    """Stands in for a Heartbeat: counts what the supervisor asks of it."""

    def __init__(self) -> None:
        self.beats: list[str] = []

    def beat(self, holder: str, at: datetime) -> None:
        self.beats.append(holder)

    def stop(self) -> None:
        pass


def test_a_poll_that_saw_store_and_cluster_beats_and_a_blind_one_does_not(
    slurm: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm.submit(JobSpec(command=["train"], name="hb"))
    beats = Beats()
    sup = slurm.supervisor(heartbeat=beats)
    sup._poll(UNSETTLED, None)
    assert len(beats.beats) == 1 and beats.beats[0] == sup.holder

    # The cluster does not answer: the poll saw nothing of it.
    def unreachable(backend: object, jobs: object) -> NoReturn:
        raise Unreachable("the scheduler is away")

    monkeypatch.setattr(supervisor_module, "find_all", unreachable)
    sup._poll(UNSETTLED, None)
    assert len(beats.beats) == 1
    monkeypatch.undo()

    # The store does not answer.
    def away(*args: object, **kwargs: object) -> NoReturn:
        raise Unavailable("the store is away")

    monkeypatch.setattr(slurm.store, "list", away)
    sup._poll(UNSETTLED, None)
    assert len(beats.beats) == 1
    monkeypatch.undo()

    sup._poll(UNSETTLED, None)
    assert len(beats.beats) == 2


def test_a_poll_of_no_jobs_still_beats_it_saw_the_store(slurm: Scenario) -> None:
    beats = Beats()
    sup = slurm.supervisor(heartbeat=beats)
    sup._poll(UNSETTLED, None)
    assert beats.beats == [sup.holder]


def test_the_heartbeat_reaches_the_url_and_its_failures_are_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobdispatch.supervise")
    with Receiver() as monitor:
        beat = Heartbeat(monitor.url + "/t0ken", timeout=5)
        beat.beat("me", ME_TIME)
        [arrival] = monitor.wait_for(lambda a: len(a) == 1, timeout=60)
        assert arrival.json() == {"holder": "me", "at": ME_TIME.isoformat()}
        monitor.answer(status=503)
        for _ in range(3):
            before = beat.failed
            beat.beat("me", ME_TIME)
            eventually(lambda: beat.failed, "the failed beat counted", holds=before.__lt__)
        beat.stop()
    failures = [r for r in caplog.records if "heartbeat" in r.getMessage()]
    assert len(failures) == 1 and "HTTP 503" in failures[0].getMessage()
    assert "t0ken" not in caplog.text


def test_a_bad_heartbeat_url_is_refused_naming_its_key() -> None:
    with pytest.raises(Invalid, match=r"heartbeat.url: must be an http"):
        Heartbeat("ftp://x/y")
    with pytest.raises(Invalid, match=r"heartbeat.timeout"):
        Heartbeat("http://x/y", timeout=0)
