"""The subcommands, grouped by what they do: running jobs, reading them, acting on them, and
the local adapter's own. Each module has a ``register(group)`` that adds its commands."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar, overload

import click
from jobdispatch.errors import Invalid

from jobdispatch_cli.context import App
from jobdispatch_cli.render import dumps

__all__ = ["json_option", "listen_option", "optional_module", "pass_app", "print_json"]

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


def listen_option(default: str, what: str, note: str = "") -> Callable[[F], F]:
    """``--listen HOST:PORT``: where a command that serves ``what`` (the dashboard's pages,
    Prometheus' /metrics) listens, ``default`` unless told; ``note`` ends the help."""
    return click.option(
        "--listen",
        default=default,
        show_default=True,
        metavar="HOST:PORT",
        help=f"Where to serve {what} ([::1]:PORT for IPv6; port 0 takes a free one).{note}",
    )


def optional_module(name: str, what: str, install: str) -> ModuleType:
    """The module ``name`` that a command needs and the command line does not install (the
    dashboard, the metrics endpoint), imported when the command runs; Invalid saying that
    ``what`` is not installed and how to install it when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError:
        msg = f"{what} is not installed: pip install {install}"
        raise Invalid(msg) from None


def print_json(app: App, value: Any) -> None:
    """JSON on standard output, unstyled (pipe it to jq)."""
    del app  # JSON bypasses the console: no colours, no wrapping
    click.echo(dumps(value))
