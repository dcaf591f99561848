"""``jobdispatch metrics`` and ``supervise --metrics-listen``: the endpoint as a process of its
own, scraped over HTTP, on the local adapter and the LMDB store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.testing import eventually

TIMEOUT = 90.0


class Served:
    """A ``jobdispatch`` process serving metrics, its log, and its endpoint's address."""

    def __init__(self, home: Path, *args: str) -> None:
        self.log = home / f"served-{len(list(home.glob('served-*')))}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jobdispatch_cli.main", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ),
            )
        self.url: str = eventually(self._url, "the endpoint's address")

    def _url(self) -> str | None:
        found = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", self.log.read_text())
        if found is None:
            assert self.proc.poll() is None, self.log.read_text()
        return found.group(1) if found else None

    def scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=30) as answer:
            return str(answer.read().decode())

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture
def served(home: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(*args: str) -> Served:
        started.append(Served(home, *args))
        return started[-1]

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=30)


def _value(text: str, series: str) -> float | None:
    """The value of one sample, given as its name and labels exactly as exposed."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def test_metrics_counts_the_store_and_stops_on_sigterm(
    invoke: Any, job_file: Callable[..., Path], served: Callable[..., Served]
) -> None:
    for name in ("a", "b"):
        assert invoke("submit", str(job_file(["true"], name=name))).code == 0
    endpoint = served("metrics", "--listen", "127.0.0.1:0", "--per-job")
    text = endpoint.scrape()
    assert _value(text, 'jobdispatch_jobs{cluster="local",state="pending"}') == 2
    assert _value(text, 'jobdispatch_store_up{cluster="local"}') == 1
    assert 'jobdispatch_store_size_bytes{cluster="local"}' in text
    assert endpoint.stop() == 0
    assert "stopped" in endpoint.log.read_text()


def test_supervise_serves_the_metrics_of_what_it_supervises(
    invoke: Any, job_file: Callable[..., Path], served: Callable[..., Served]
) -> None:
    assert invoke("submit", str(job_file(["true"], name="quick"))).code == 0
    supervisor = served("supervise", "--poll", "0.05", "--metrics-listen", "127.0.0.1:0")

    def succeeded() -> str | None:
        text = supervisor.scrape()
        done = _value(text, 'jobdispatch_jobs{cluster="local",state="succeeded"}') == 1
        return text if done else None

    text = eventually(succeeded, "the job to succeed, as scraped")
    assert _value(text, 'jobdispatch_supervisors_live{cluster="local"}') == 1
    assert (
        _value(
            text,
            'jobdispatch_job_outcomes_total{cause="none",cluster="local",provenance="none",'
            'state="succeeded"}',
        )
        == 1
    )
    assert supervisor.stop() == 0


def test_a_store_that_is_not_there_is_served_as_down_and_never_created(
    home: Path, served: Callable[..., Served]
) -> None:
    missing = home / "no-store"
    endpoint = served("metrics", "--listen", "127.0.0.1:0", "--store", str(missing))
    text = endpoint.scrape()
    assert _value(text, 'jobdispatch_store_up{cluster="local"}') == 0
    stale = 'jobdispatch_unmeasured_since_timestamp_seconds{cluster="local",series="records"}'
    assert stale in text
    assert "jobdispatch_jobs{" not in text
    assert not missing.exists()
    endpoint.stop()


@pytest.mark.parametrize("command", [("metrics", "--listen"), ("supervise", "--metrics-listen")])
def test_a_bad_listen_address_is_refused_before_anything_starts(
    invoke: Any, command: tuple[str, str]
) -> None:
    ran = invoke(*command, "nowhere")
    assert ran.code == 2
    assert "'nowhere': give HOST:PORT" in ran.err
