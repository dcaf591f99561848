"""Escalation sinks: how a supervisor tells a person.

A sink is anything with a ``name`` and ``deliver(message)``. Delivery is at least once: the
supervisor commits ``EscalationDelivered`` after ``deliver`` returns, so a crash in between
delivers again after a restart, and never after the commit. Every message carries the
escalation's id, stable across restarts, for a sink that must deduplicate.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["CommandSink", "EscalationMessage", "LogSink", "Sink"]

log = logging.getLogger("jobdispatch.escalations")


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
    """Writes each escalation to the ``jobdispatch.escalations`` logger at WARNING."""

    name = "log"

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
    out is a failed delivery, tried again on the next pass.
    """

    def __init__(
        self, argv: Sequence[str], *, timeout: float = 30.0, name: str = "command"
    ) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            msg = "the command sink needs a non-empty argument list of strings"
            raise ValueError(msg)
        self.argv = list(argv)
        self.timeout = timeout
        self.name = name

    def deliver(self, message: EscalationMessage) -> None:
        result = subprocess.run(
            self.argv,
            input=message.as_json().encode(),
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
    },
    "required": ["argv"],
}
