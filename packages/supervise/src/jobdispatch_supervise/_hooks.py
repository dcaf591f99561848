"""The supervisor's built-in sinks, registered through the plugin manager: ``log`` and
``command`` (escalations, and the notices asked of them), ``webhook``, ``slack`` and
``pagerduty`` (notices over HTTP)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobdispatch.plugins import Registration, registers

if TYPE_CHECKING:  # the sink modules are imported only when a sink is made
    from jobdispatch_supervise.http_sinks import PagerDutySink, SlackSink, WebhookSink
    from jobdispatch_supervise.sinks import CommandSink, LogSink

#: The settings every sink takes besides its own, as its constructor names them.
_COMMON = {"timeout": "timeout", "notify": "events", "rate_per_minute": "rate_per_minute"}


def _common(config: dict[str, Any], default_name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": config.get("name", default_name)}
    for key, arg in _COMMON.items():
        if key in config:
            out[arg] = config[key]
    if "cooldown" in config:
        out["cooldown"] = config["cooldown"]
    return out


def _log(config: dict[str, Any]) -> LogSink:
    from jobdispatch_supervise.sinks import LogSink

    return LogSink()


def _command(config: dict[str, Any]) -> CommandSink:
    from jobdispatch_supervise.sinks import CommandSink

    return CommandSink(config["argv"], **_common(config, "command"))


def _webhook(config: dict[str, Any]) -> WebhookSink:
    from jobdispatch_supervise.http_sinks import WebhookSink

    return WebhookSink(
        config["url"], secret_file=config.get("secret_file"), **_common(config, "webhook")
    )


def _slack(config: dict[str, Any]) -> SlackSink:
    from jobdispatch_supervise.http_sinks import SlackSink

    return SlackSink(config.get("url"), url_file=config.get("url_file"), **_common(config, "slack"))


def _pagerduty(config: dict[str, Any]) -> PagerDutySink:
    from jobdispatch_supervise.http_sinks import PAGERDUTY_EVENTS_URL, PagerDutySink

    return PagerDutySink(
        routing_key_file=config["routing_key_file"],
        url=config.get("url", PAGERDUTY_EVENTS_URL),
        severity=config.get("severity", "error"),
        **_common(config, "pagerduty"),
    )


jobdispatch_register_escalation_sinks = registers(
    Registration(
        "log",
        _log,
        schema={"type": "object", "properties": {}},
        summary="writes escalations to the jobdispatch.escalations logger",
    ),
    Registration(
        "command",
        _command,
        schema="jobdispatch_supervise.sinks:COMMAND_SCHEMA",
        summary="runs a program with each escalation or notice as JSON on its standard input",
    ),
    Registration(
        "webhook",
        _webhook,
        schema="jobdispatch_supervise.http_sinks:WEBHOOK_SCHEMA",
        summary="POSTs each notice's JSON body, signed with HMAC-SHA256",
    ),
    Registration(
        "slack",
        _slack,
        schema="jobdispatch_supervise.http_sinks:SLACK_SCHEMA",
        summary="posts each notice's line to a Slack incoming webhook",
    ),
    Registration(
        "pagerduty",
        _pagerduty,
        schema="jobdispatch_supervise.http_sinks:PAGERDUTY_SCHEMA",
        summary="triggers and resolves PagerDuty incidents (Events API v2)",
    ),
)
