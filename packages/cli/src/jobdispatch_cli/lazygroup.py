"""A command group whose subcommands are imported only when one is run.

The subcommands import the core (attrs, cattrs, jsonschema, the plugins), which costs most of a
second; ``jobdispatch --help``, ``--version`` and every shell-completion Tab start a fresh
interpreter and need none of it. So the group lists its commands, for its help and for
completion, from ``command_index.json`` (each command's name and the text its summary is made
from) and imports the commands themselves the first time one is asked for.

The index is generated from the commands: ``python -m jobdispatch_cli.lazygroup`` rewrites it,
and a test fails when it is stale.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

__all__ = ["INDEX_FILE", "LazyGroup", "index_of", "index_text"]

#: The commands' names and summaries, shipped with the package.
INDEX_FILE = Path(__file__).with_name("command_index.json")


def _summary_source(command: click.Command) -> dict[str, Any]:
    """What ``get_short_help_str`` makes a command's one-line summary from."""
    entry: dict[str, Any] = {}
    if command.short_help:
        entry["short_help"] = command.short_help
    elif command.help:
        entry["help"] = inspect.cleandoc(command.help).split("\n\n")[0]
    if command.hidden:
        entry["hidden"] = True
    if command.deprecated:
        entry["deprecated"] = command.deprecated
    return entry


def index_of(group: click.Group) -> dict[str, dict[str, Any]]:
    """The index of ``group``'s commands, as the file holds it."""
    return {name: _summary_source(group.commands[name]) for name in sorted(group.commands)}


def index_text(group: click.Group) -> str:
    return json.dumps(index_of(group), indent=2, sort_keys=True) + "\n"


class LazyGroup(click.Group):
    """A group that imports its commands (through ``loader``) on first real use, and answers
    its help and shell completion from the index until then."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._commands: dict[str, click.Command] = {}
        self._loader: Callable[[click.Group], None] | None = None
        self._stand_ins: dict[str, click.Command] | None = None
        super().__init__(*args, **kwargs)

    def load_with(self, loader: Callable[[click.Group], None]) -> None:
        """Call ``loader(self)`` to add the commands, the first time they are needed."""
        self._loader = loader

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        loader, self._loader = self._loader, None
        if loader is not None:
            loader(self)
        return self._commands

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._commands = dict(value)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if self._stand_ins is not None:
            return self._stand_ins.get(cmd_name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        if self._stand_ins is not None:
            return sorted(self._stand_ins)
        return super().list_commands(ctx)

    @contextlib.contextmanager
    def _from_index(self) -> Iterator[None]:
        """While listing: stand-ins made from the index, unless the commands are loaded."""
        if self._loader is None:
            yield
            return
        entries = json.loads(INDEX_FILE.read_text(encoding="utf-8"))
        self._stand_ins = {name: click.Command(name, **entry) for name, entry in entries.items()}
        try:
            yield
        finally:
            self._stand_ins = None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with self._from_index():
            super().format_commands(ctx, formatter)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        with self._from_index():
            return super().shell_complete(ctx, incomplete)


if __name__ == "__main__":
    from jobdispatch_cli.main import cli

    INDEX_FILE.write_text(index_text(cli), encoding="utf-8")
    print(f"wrote {INDEX_FILE}", file=sys.stderr)
