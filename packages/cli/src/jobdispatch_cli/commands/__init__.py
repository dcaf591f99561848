"""The subcommands, grouped by what they do: running jobs, reading them, acting on them, and
the local adapter's own. Each module has a ``register(group)`` that adds its commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

import click

from jobdispatch_cli.context import App
from jobdispatch_cli.render import dumps

__all__ = ["json_option", "pass_app", "print_json"]

F = TypeVar("F", bound=Callable[..., Any])

pass_app = click.make_pass_decorator(App)


_JSON_HELP = "Print JSON instead of a table."


@overload
def json_option(f: F, /) -> F: ...
@overload
def json_option(help_text: str, /) -> Callable[[F], F]: ...
def json_option(arg: F | str, /) -> F | Callable[[F], F]:
    """``--json``: print machine-readable output instead of the tables. Used bare
    (``@json_option``), or with the help a command needs (``@json_option("...")``)."""

    def option(help_text: str) -> Callable[[F], F]:
        return click.option("--json", "as_json", is_flag=True, help=help_text)

    if isinstance(arg, str):
        return option(arg)
    return option(_JSON_HELP)(arg)


def print_json(app: App, value: Any) -> None:
    """JSON on standard output, unstyled (pipe it to jq)."""
    del app  # JSON bypasses the console: no colours, no wrapping
    click.echo(dumps(value))
