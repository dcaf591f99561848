"""Escalation sinks: how a supervisor tells a person.

A sink is anything with a ``name`` and ``deliver(message)``. Delivery is at least once: the
supervisor commits ``EscalationDelivered`` after ``deliver`` returns, so a crash in between
delivers again after a restart, and never after the commit. Every message carries the
escalation's id, stable across restarts, for a sink that must deduplicate.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs
from jobdispatch.types import NoticeKind

from jobdispatch_supervise.messages import NoticeMessage, Probe

__all__ = ["CommandSink", "EscalationMessage", "LogSink", "Sink"]

log = logging.getLogger("jobdispatch.escalations")
notices_log = logging.getLogger("jobdispatch.notices")


@attrs.frozen(kw_only=True)
class EscalationMessage:
    """What a sink receives."""

    job: str
    name: str
    id: str
    detail: str
    at: datetime

    def as_json(self) -> str:
        return json.dumps(
            {
                "job": self.job,
                "name": self.name,
                "id": self.id,
                "detail": self.detail,
                "at": self.at.isoformat(),
            },
            sort_keys=True,
        )


@runtime_checkable
class Sink(Protocol):
    """Where escalations go. ``deliver`` raises when it could not deliver; it is tried again."""

    name: str

    def deliver(self, message: EscalationMessage) -> None: ...


class LogSink:
    """Writes each escalation to the ``jobdispatch.escalations`` logger at WARNING, and each
    lifecycle notice a job asks of it to ``jobdispatch.notices`` at INFO."""

    name = "log"
    events: frozenset[NoticeKind] = frozenset()

    def send(self, message: NoticeMessage) -> None:
        notices_log.info("notice %s: %s", message.notice.key, message.text)

    def probe(self) -> Probe:
        return Probe(True, None, "the jobdispatch.escalations and jobdispatch.notices loggers")

    def deliver(self, message: EscalationMessage) -> None:
        log.warning(
            "escalation %s for job %s (%s): %s",
            message.id,
            message.job,
            message.name or "unnamed",
            message.detail,
        )


class CommandSink:
    """Runs a configured program with the escalation as JSON on its standard input.

    The program is given as an argument list, never through a shell. A non-zero exit or a time
    out is a failed delivery, tried again later. An escalation arrives as the escalation's JSON
    (:class:`EscalationMessage`); a lifecycle notice as the notice's body
    (``jobdispatch.notice/1``, docs/reference/notices.md).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        name: str = "command",
        events: Iterable[str | NoticeKind] = (),
        rate_per_minute: float = 60.0,
        cooldown: float = 60.0,
    ) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            msg = "the command sink needs a non-empty argument list of strings"
            raise ValueError(msg)
        self.argv = list(argv)
        self.timeout = timeout
        self.name = name
        self.events = frozenset(NoticeKind(e) for e in events)
        self.rate_per_minute = float(rate_per_minute)
        self.cooldown = float(cooldown)

    def deliver(self, message: EscalationMessage) -> None:
        self._run(message.as_json().encode())

    def send(self, message: NoticeMessage) -> None:
        self._run(message.encoded())

    def probe(self) -> Probe:
        program = self.argv[0]
        found = shutil.which(program) if os.sep not in program else program
        if found is None or not os.access(found, os.X_OK):
            return Probe(False, None, f"{program}: no such executable program")
        return Probe(True, None, f"runs {found}")

    def _run(self, data: bytes) -> None:
        result = subprocess.run(
            self.argv,
            input=data,
            capture_output=True,
            timeout=self.timeout,
            check=False,
        )
        if result.returncode != 0:
            err = result.stderr.decode(errors="replace").strip()[-500:]
            msg = f"{self.argv[0]} exited {result.returncode}: {err}"
            raise RuntimeError(msg)


COMMAND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "argv": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        "name": {"type": "string", "minLength": 1},
        "notify": {"type": "array", "items": {"enum": [str(k) for k in NoticeKind]}},
        "rate_per_minute": {"type": "number", "exclusiveMinimum": 0, "maximum": 6000},
        "cooldown": {"type": "number", "minimum": 0, "maximum": 86400},
    },
    "required": ["argv"],
}
