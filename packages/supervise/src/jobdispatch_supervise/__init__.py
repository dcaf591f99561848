"""The dispatch supervisor: carries out what ``jobdispatch.next`` says, through conditional
commits to the job's record and launches that start gated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

from jobdispatch_supervise.__about__ import __version__

if TYPE_CHECKING:
    from jobdispatch_supervise.executor import Executor, Pass
    from jobdispatch_supervise.heartbeat import Heartbeat
    from jobdispatch_supervise.http_sinks import PagerDutySink, SlackSink, WebhookSink
    from jobdispatch_supervise.messages import NoticeMessage, NoticeSink, Probe
    from jobdispatch_supervise.outbox import Outbox
    from jobdispatch_supervise.ownership import Ownership
    from jobdispatch_supervise.sinks import CommandSink, EscalationMessage, LogSink, Sink
    from jobdispatch_supervise.supervisor import Supervisor

__all__ = [
    "CommandSink",
    "EscalationMessage",
    "Executor",
    "Heartbeat",
    "LogSink",
    "NoticeMessage",
    "NoticeSink",
    "Outbox",
    "Ownership",
    "PagerDutySink",
    "Pass",
    "Probe",
    "Sink",
    "SlackSink",
    "Supervisor",
    "WebhookSink",
    "__version__",
]

__getattr__, __dir__ = lazy(__name__, __file__)
