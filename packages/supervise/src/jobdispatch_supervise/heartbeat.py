"""A supervisor's heartbeat: a dead-man URL pinged after every poll that saw its store and its
cluster, so a monitor outside pages when supervision stops (the process gone, hung, or blind).

A poll that could not read the store or ask the cluster pings nothing: a supervisor that is up
but sees nothing supervises nothing, and the monitor must hear silence. The ping is sent from a
thread of its own, at most one at a time (a beat while one is in flight is folded into it), so
a slow monitor never delays a poll. The URL (a token often sits in it) is never logged: only its
scheme and host are.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime

import urllib3

from jobdispatch_supervise.http_sinks import (
    USER_AGENT,
    checked_timeout,
    checked_url,
    keep_secret,
    printable_url,
)

__all__ = ["Heartbeat"]

log = logging.getLogger("jobdispatch.supervise")


class Heartbeat:
    """Pings ``url`` (a POST with a small JSON body: who, when) after each sighted poll."""

    def __init__(self, url: str, *, timeout: float = 10.0, key: str = "heartbeat.url") -> None:
        self.url = checked_url(url, key)
        keep_secret(self.url)
        self.timeout = checked_timeout(timeout, key.rpartition(".")[0] + ".timeout")
        self._pool = urllib3.PoolManager(
            retries=False, timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout)
        )
        self._cond = threading.Condition()
        self._due: tuple[str, datetime] | None = None
        self._stopping = False
        self._failing = False
        #: Pings answered 2xx, and pings that failed (for tests and the operator's log).
        self.sent = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="jobdispatch-heartbeat", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"Heartbeat({printable_url(self.url)!r})"

    def beat(self, holder: str, at: datetime) -> None:
        """Ask for a ping (returns at once)."""
        with self._cond:
            self._due = (holder, at)
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(self.timeout + 1)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._due is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                due, self._due = self._due, None
            assert due is not None
            self._ping(*due)

    def _ping(self, holder: str, at: datetime) -> None:
        body = json.dumps({"holder": holder, "at": at.isoformat()}).encode()
        try:
            response = self._pool.request(
                "POST",
                self.url,
                body=body,
                headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
            )
            ok = 200 <= response.status < 300
            detail = f"HTTP {response.status}"
        except urllib3.exceptions.HTTPError as exc:
            ok, detail = False, type(getattr(exc, "reason", None) or exc).__name__
        if ok:
            self.sent += 1
            if self._failing:
                log.info("heartbeat to %s answered again", printable_url(self.url))
            self._failing = False
            return
        self.failed += 1
        if not self._failing:  # once per run of failures, not once per poll
            log.warning("heartbeat to %s failed (%s)", printable_url(self.url), detail)
        self._failing = True
