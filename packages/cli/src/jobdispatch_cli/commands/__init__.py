"""The subcommands, grouped by what they do: running jobs, reading them, acting on them, and
the local adapter's own. Each module has a ``register(group)`` that adds its commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from jobdispatch_cli.context import App
from jobdispatch_cli.render import dumps

__all__ = ["json_option", "pass_app", "print_json"]

F = TypeVar("F", bound=Callable[..., Any])

pass_app = click.make_pass_decorator(App)


def json_option(f: F) -> F:
    """``--json``: print machine-readable output instead of the tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def print_json(app: App, value: Any) -> None:
    """JSON on standard output, unstyled (pipe it to jq)."""
    del app  # JSON bypasses the console: no colours, no wrapping
    click.echo(dumps(value))
