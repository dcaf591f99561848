"""The supervisor's built-in escalation sinks, registered through the plugin manager."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobdispatch.hookspecs import hookimpl
from jobdispatch.plugins import Registry

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


@hookimpl
def jobdispatch_register_escalation_sinks(registry: Registry) -> None:
    registry.add(
        "log",
        _log,
        schema={"type": "object", "properties": {}},
        summary="writes escalations to the jobdispatch.escalations logger",
    )
    registry.add(
        "command",
        _command,
        schema="jobdispatch_supervise.sinks:COMMAND_SCHEMA",
        summary="runs a program with each escalation as JSON on its standard input",
    )
