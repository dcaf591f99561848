"""What a notice sink receives: a notice of the record, with where it happened, in words and as
a versioned JSON body.

The body is the one documented shape every HTTP sink builds from (docs/reference/notices.md):
the webhook posts it as is, Slack and PagerDuty wrap its text and fields in their own payloads.
It carries the notice's key (``JOB/ID``), stable across supervisors, for a receiver that must
deduplicate (delivery is at least once).
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

import attrs
from jobdispatch.notices import NOTICE_SCHEMA, Notice
from jobdispatch.types import Cause, NoticeKind

__all__ = ["NoticeMessage", "NoticeSink", "Probe"]

#: How many characters of a job id a message shows: enough to find it, short to read.
ID_PREFIX = 8


@attrs.frozen(kw_only=True)
class NoticeMessage:
    """A notice, the cluster its job runs on, and the job's dashboard page if one is set."""

    notice: Notice
    cluster: str
    link: str | None = None
    #: The supervisor sending it (its holder id: host, process): which one delivered what.
    sender: str = ""

    @property
    def text(self) -> str:
        """One short line for a person: job name, id prefix, cluster, what happened."""
        n = self.notice
        who = f"{n.name} ({n.job[:ID_PREFIX]})" if n.name else n.job[:ID_PREFIX]
        return f"[{self.cluster}] {who}: {n.summary}"

    def body(self) -> dict[str, Any]:
        """The JSON body of schema ``jobdispatch.notice/1`` (docs/reference/notices.md)."""
        n = self.notice
        rule = n.rule
        return {
            "schema": NOTICE_SCHEMA,
            "key": n.key,
            "id": n.id,
            "kind": str(n.kind),
            "job": n.job,
            "name": n.name,
            "cluster": self.cluster,
            "revision": n.revision,
            "at": n.at.isoformat(),
            "text": self.text,
            "summary": n.summary,
            "cause": _cause(n.cause),
            "submission": n.submission,
            "execution": n.execution,
            "rule": None
            if rule is None
            else {
                "index": rule.index,
                "action": str(rule.action),
                "enforcer": str(rule.enforcer),
                "budget_left": rule.budget_left,
                "budget": rule.budget,
            },
            "outcome": None if n.outcome is None else str(n.outcome),
            "escalation": None if n.escalation is None else str(n.escalation),
            "alert": n.alert,
            "resolves": list(n.resolves),
            "link": self.link,
        }

    def encoded(self) -> bytes:
        """The body as sent: compact JSON, keys sorted, UTF-8 (what a signature covers)."""
        return json.dumps(self.body(), sort_keys=True, separators=(",", ":")).encode()


def _cause(cause: Cause | None) -> dict[str, Any] | None:
    if cause is None:
        return None
    return {
        "kind": str(cause.kind),
        "provenance": str(cause.provenance),
        "detail": cause.detail,
        "exit_code": cause.exit_code,
        "signal": cause.signal,
    }


@attrs.frozen
class Probe:
    """What ``plan`` shows of a sink: whether it is configured, and reached (None: not tried)."""

    configured: bool
    reachable: bool | None
    detail: str

    @property
    def ok(self) -> bool:
        return self.configured and self.reachable is not False


@runtime_checkable
class NoticeSink(Protocol):
    """A sink that takes lifecycle notices (and escalations, as the notice ``escalated``, when it
    has no ``deliver`` of its own). ``send`` raises when it could not deliver; it is tried
    again. ``events`` are the kinds it gets for every job, besides those a job asks for."""

    name: str
    events: frozenset[NoticeKind]

    def send(self, message: NoticeMessage) -> None: ...

    def probe(self) -> Probe: ...
