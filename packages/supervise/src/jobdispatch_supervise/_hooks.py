"""The supervisor's built-in escalation sinks, registered through the plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobdispatch.plugins import Registration, registers

if TYPE_CHECKING:  # the sinks module is imported only when a sink is made
    from jobdispatch_supervise.sinks import CommandSink, LogSink


def _log(config: dict[str, Any]) -> LogSink:
    from jobdispatch_supervise.sinks import LogSink

    return LogSink()


def _command(config: dict[str, Any]) -> CommandSink:
    from jobdispatch_supervise.sinks import CommandSink

    return CommandSink(
        config["argv"], timeout=config.get("timeout", 30.0), name=config.get("name", "command")
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
        summary="runs a program with each escalation as JSON on its standard input",
    ),
)
