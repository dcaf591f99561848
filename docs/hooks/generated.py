"""An mkdocs hook: reference pages generated, at every build, from what they describe.

A hand-written list of commands or configuration keys goes stale the day someone adds an
option. These pages are made from the code itself while the site builds, so they cannot drift:

- ``reference/cli.md``, from the click commands of ``jobdispatch`` (each command's own ``--help``);
- ``reference/config.md``, from the JSON Schema every installed adapter, record store and
  escalation sink registers with the plugin manager (a new adapter appears by being installed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

INTRO_CLI = """\
# Command reference

Every command of `jobdispatch` (distribution `jobdispatch-cli`), with its options, as its own
`--help` prints them. This page is generated from the commands while the site builds.

Global options (`--cluster`, `--store`, `--config`, `--as`) may come before the command or
after it: `jobdispatch --cluster hpc list` and `jobdispatch list --cluster hpc` are the same
(given both ways, the later one wins). The exit codes are listed at the end of the top-level
help. Durations (`DURATION`) are written `90s`, `10m`, `1h30m` or `2d`. Shell completion is
set up in [Shell completion](../how-to/completion.md).
"""

INTRO_CONFIG = """\
# Configuration file reference

The `jobdispatch` command reads `$XDG_CONFIG_HOME/jobdispatch/config.toml` (default
`~/.config/jobdispatch/config.toml`; `--config` or `JOBDISPATCH_CONFIG` name another). Its
shape, from `jobdispatch_cli.config`:

```toml
{example}
```

Numbers must be finite: `nan`, `inf` and `-inf`, which TOML accepts, are refused wherever they
appear, and every numeric setting has an upper bound (listed below), so a typo such as
`probe_ttl = 1e30` is an error naming its line rather than a setting that waits for ever.

Each `[clusters.NAME]` table names an `adapter` and then that adapter's settings; each
`[escalations.NAME]` table names a `sink` and its settings. Those settings are listed below, per
plugin, generated from the JSON Schema each one registers (the same schema that checks the file
when it is read, so an unknown or misspelled key is an error naming its line). Only the plugins
installed where the site was built are listed; `jobdispatch plugins` shows what is installed on
yours.

A cluster whose table is wrong, or whose adapter is not installed, stops only the commands
that use it; `jobdispatch clusters` lists it with its problems. Job files have a reference of
their own: the [job file reference](job-file.md).
"""

KIND_TITLES = {
    "adapter": 'Adapters (`[clusters.NAME]`, `adapter = "..."`)',
    "record-store": "Record stores",
    "escalation-sink": 'Escalation sinks (`[escalations.NAME]`, `sink = "..."`)',
    "credential-source": "Credential sources (checkpoint configuration, spec 0006)",
}


def _commands(group: Any, path: str) -> Iterator[tuple[str, Any]]:
    import click

    yield path, group
    if isinstance(group, click.Group):
        for name in sorted(group.commands):
            yield from _commands(group.commands[name], f"{path} {name}")


def cli_page() -> str:
    """Markdown for every command of ``jobdispatch``, each with its ``--help`` text."""
    import click
    from jobdispatch_cli.main import cli

    parts = [INTRO_CLI]
    commands = list(_commands(cli, "jobdispatch"))
    table = ["| command | what it does |", "|---|---|"]
    for path, command in commands[1:]:
        summary = _cell(command.get_short_help_str(limit=90))
        table.append(f"| [`{path}`](#{_anchor(path)}) | {summary} |")
    parts.append("\n".join(table))
    for path, command in commands:
        parents = path.split(" ")
        ctx = None
        for i, name in enumerate(parents):
            node = dict(commands)[" ".join(parents[: i + 1])]
            ctx = click.Context(
                node, info_name=name, parent=ctx, terminal_width=100, max_content_width=100
            )
        assert ctx is not None
        parts.append(f"## {path} {{#{_anchor(path)}}}\n\n```text\n{command.get_help(ctx)}\n```")
    return "\n\n".join(parts) + "\n"


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def _type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"list of {_type(schema['items'])}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return f"table of {_type(schema['additionalProperties'])}"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _limits(schema: Mapping[str, Any]) -> str:
    words = []
    for key, say in (
        ("minimum", "≥ {}"),
        ("exclusiveMinimum", "> {}"),
        ("maximum", "≤ {}"),
        ("exclusiveMaximum", "< {}"),
        ("minLength", "at least {} characters"),
        ("pattern", "matches `{}`"),
        ("default", "default `{}`"),
    ):
        if key in schema:
            value = schema[key]
            words.append(say.format(json.dumps(value) if key == "default" else value))
    return ", ".join(words)


def _rows(schema: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    required = set(schema.get("required", []))
    for key, sub in schema.get("properties", {}).items():
        name = f"{prefix}{key}"
        # A description is plain text: brackets in it ("[user@]host") must not become links.
        said = sub.get("description", "").replace("[", "\\[").replace("]", "\\]")
        text = "; ".join(filter(None, [said, _limits(sub)]))
        yield name, _type(sub), "yes" if key in required else "", text
        if sub.get("type") == "object" and "properties" in sub:
            yield from _rows(sub, f"{name}.")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_page(loaded: Any = None) -> str:
    """Markdown for every plugin's configuration keys, from their registered JSON Schemas."""
    from jobdispatch import plugins
    from jobdispatch_cli import config

    loaded = plugins.load() if loaded is None else loaded
    parts = [INTRO_CONFIG.format(example=_literal_block(config.__doc__ or ""))]
    for kind, registry in loaded.registries.items():
        entries = [e for e in registry if e.schema is not None]
        if not entries:
            continue
        parts.append(f"## {KIND_TITLES.get(kind, kind)}")
        for entry in entries:
            spi = f", adapter SPI {entry.spi}" if entry.spi else ""
            parts.append(f"### `{entry.name}`\n\n{entry.summary} (from {entry.provider}{spi}).")
            rows = list(_rows(entry.schema))
            if not rows:
                parts.append("It takes no settings.")
                continue
            table = ["| key | type | required | meaning |", "|---|---|---|---|"]
            table += [f"| `{k}` | {_cell(t)} | {r} | {_cell(m)} |" for k, t, r, m in rows]
            parts.append("\n".join(table))
    return "\n\n".join(parts) + "\n"


def _literal_block(docstring: str) -> str:
    """The indented block after the first ``::`` of a docstring (reST's literal block)."""
    import textwrap

    lines = docstring.split("::", 1)[1].splitlines()[1:]
    block: list[str] = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip("\n")


#: Page path (relative to docs/) → the function that writes it.
GENERATED_PAGES: Mapping[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (mkdocs calls this before the navigation)."""
    from mkdocs.structure.files import File

    for path, make in GENERATED_PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
