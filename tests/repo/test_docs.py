"""The documentation: specs are numbered and titled, every spec is in the site's navigation,
snippet includes point at real lines, and the README's quick start is two commands.

The site itself is built by the nox ``docs`` session (``mkdocs build --strict``), which catches
broken links and docstrings; these checks need no mkdocs, so they run with every test run.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from repo_layout import DOCS, ROOT, SPECS

SPEC_NAME = re.compile(r"^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")
SPEC_FILES = sorted(p for p in SPECS.glob("*") if p.is_file())


def test_there_are_specs() -> None:
    assert len(SPEC_FILES) >= 4, [p.name for p in SPEC_FILES]


@pytest.mark.parametrize("spec", SPEC_FILES, ids=[p.name for p in SPEC_FILES])
def test_spec_is_numbered_and_titled(spec: Path) -> None:
    match = SPEC_NAME.match(spec.name)
    assert match, f"docs/specs/{spec.name} is not named NNNN-name.md (kebab-case name)"
    lines = spec.read_text(encoding="utf-8").splitlines()
    assert lines, f"docs/specs/{spec.name} is empty"
    title = lines[0]
    assert title.startswith("# "), f"docs/specs/{spec.name} does not open with a title line"
    assert title[2:].lstrip().startswith(match.group(1)), (
        f"docs/specs/{spec.name}'s title {title!r} does not start with its number"
    )


def test_spec_numbers_are_unique() -> None:
    numbers = [p.name[:4] for p in SPEC_FILES if SPEC_NAME.match(p.name)]
    assert len(numbers) == len(set(numbers)), sorted(numbers)


class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml, leaving any tag mkdocs resolves itself (``!!python/name:``...) as text."""


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def _mkdocs_config() -> dict[str, Any]:
    with (ROOT / "mkdocs.yml").open(encoding="utf-8") as f:
        config = yaml.load(f, Loader=_Loader)  # a SafeLoader subclass
    assert isinstance(config, dict)
    return config


def _hook(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"mkdocs_hook_{Path(path).stem}", ROOT / path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generated_pages(config: dict[str, Any]) -> set[str]:
    """Pages the hooks write while the site builds (docs/hooks/generated.py), not on disk."""
    return {
        page
        for hook in config.get("hooks", [])
        for page in getattr(_hook(hook), "GENERATED_PAGES", {})
    }


def _nav_after_hooks(config: dict[str, Any]) -> list[Any]:
    """The navigation as mkdocs gets it: mkdocs.yml's, after the configured hooks ran."""
    config = dict(config, docs_dir=str(ROOT / config.get("docs_dir", "docs")))
    for hook in config.get("hooks", []):
        spec = importlib.util.spec_from_file_location(f"mkdocs_hook_{Path(hook).stem}", ROOT / hook)
        assert spec is not None and spec.loader is not None, hook
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if hasattr(module, "on_config"):
            config = module.on_config(config) or config
    return list(config["nav"])


def _pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _pages(value)]
    return []


def test_mkdocs_builds_strictly() -> None:
    assert _mkdocs_config().get("strict") is True, "mkdocs.yml must set strict: true"


def test_every_spec_is_in_the_navigation() -> None:
    pages = _pages(_nav_after_hooks(_mkdocs_config()))
    missing = [p.name for p in SPEC_FILES if f"specs/{p.name}" not in pages]
    assert not missing, f"specs missing from the docs navigation: {missing}"


def test_every_page_is_in_the_navigation() -> None:
    config = _mkdocs_config()
    pages = set(_pages(_nav_after_hooks(config)))
    excluded = [line.strip() for line in str(config.get("exclude_docs") or "").splitlines()]
    on_disk = {
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if not any(p.relative_to(DOCS).as_posix().startswith(e) for e in excluded if e)
    }
    on_disk |= _generated_pages(config)
    assert not on_disk - pages, f"pages no navigation links to: {sorted(on_disk - pages)}"
    assert not pages - on_disk, f"navigation entries with no page: {sorted(pages - on_disk)}"


SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')


def _snippets() -> list[tuple[str, str]]:
    return [
        (page.relative_to(DOCS).as_posix(), m.group(1))
        for page in sorted(DOCS.rglob("*.md"))
        for line in page.read_text(encoding="utf-8").splitlines()
        if (m := SNIPPET.match(line))
    ]


def test_the_tutorial_includes_the_example_rather_than_copying_it() -> None:
    included = {
        target.split(":")[0] for page, target in _snippets() if page.startswith("tutorial/")
    }
    assert "examples/tutorial.py" in included


@pytest.mark.parametrize(("page", "target"), _snippets(), ids=str)
def test_snippet_include_points_at_real_lines(page: str, target: str) -> None:
    path, *span = target.split(":")
    file = ROOT / path
    assert file.is_file(), f"docs/{page} includes {path}, which does not exist"
    lines = file.read_text(encoding="utf-8").splitlines()
    if not span:
        return
    first = int(span[0])
    last = int(span[1]) if len(span) > 1 and span[1] else first
    assert 1 <= first <= last <= len(lines), f"docs/{page}: {target} is outside {len(lines)} lines"
    assert lines[first - 1].strip(), f"docs/{page}: {target} starts on a blank line (drifted?)"
    assert lines[last - 1].strip(), f"docs/{page}: {target} ends on a blank line (drifted?)"


def test_the_readme_quick_start_is_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quick start\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, "README.md has no '## Quick start' section"
    block = re.search(r"^```[a-z]*\n(.*?)^```", section.group(1), re.M | re.S)
    assert block, "the quick start has no code block"
    commands = [
        line
        for line in block.group(1).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(commands) == 2, f"the quick start is {len(commands)} commands: {commands}"


def test_the_command_reference_has_every_command_and_option() -> None:
    import click
    from jobdispatch_cli.main import cli

    page = _hook("docs/hooks/generated.py").cli_page()
    assert isinstance(cli, click.Group)
    for name, command in cli.commands.items():
        assert f"## jobdispatch {name} " in page, f"jobdispatch {name} is not in the reference"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in page, f"jobdispatch {name} {opt} is not in the reference"


def test_the_config_reference_has_every_key_of_every_installed_adapter() -> None:
    from jobdispatch import plugins

    loaded = plugins.load()
    page = _hook("docs/hooks/generated.py").config_page(loaded)
    adapters = list(loaded.registry("adapter"))
    assert {"local", "slurm"} <= {e.name for e in adapters}
    for entry in adapters:
        assert f"### `{entry.name}`" in page
        for key in (entry.schema or {}).get("properties", {}):
            assert f"| `{key}` |" in page, f"{entry.name}.{key} is not in the config reference"
    assert 'adapter = "local"' in page, "the file's own example is missing"


def test_the_shipped_systemd_unit_runs_the_supervise_command() -> None:
    import configparser

    from jobdispatch_cli.main import cli

    path = ROOT / "packages/cli/src/jobdispatch_cli/systemd/jobdispatch-supervise.service"
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # keep the keys' case
    unit.read_string(path.read_text(encoding="utf-8"))
    argv = unit["Service"]["ExecStart"].split()
    assert argv[0].endswith("/jobdispatch") and argv[1] == "supervise", argv
    assert "supervise" in getattr(cli, "commands", {}), "the unit runs a command that is gone"
    assert unit["Service"]["KillSignal"] == "SIGTERM", "supervise stops cleanly on SIGTERM only"
    assert unit["Install"]["WantedBy"] == "default.target", "a user unit is wanted by default"
    page = (DOCS / "how-to" / "supervise-service.md").read_text(encoding="utf-8")
    assert path.relative_to(ROOT).as_posix() in page, "the how-to does not include the unit"


@pytest.mark.parametrize("command", ["metrics", "dashboard"])
def test_the_shipped_reader_units_run_their_commands(command: str) -> None:
    """The units of the store's readers (the metrics endpoint, the dashboard): each runs its
    command with options it has, on loopback, and its how-to includes it."""
    import configparser

    from jobdispatch_cli.main import cli

    path = ROOT / f"packages/cli/src/jobdispatch_cli/systemd/jobdispatch-{command}.service"
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]  # keep the keys' case
    unit.read_string(path.read_text(encoding="utf-8"))
    argv = unit["Service"]["ExecStart"].split()
    assert argv[0].endswith("/jobdispatch") and argv[1] == command, argv
    found = getattr(cli, "commands", {}).get(command)
    assert found is not None, "the unit runs a command that is gone"
    options = {opt for param in found.params for opt in getattr(param, "opts", [])}
    given = {word.split("=")[0] for word in argv[2:] if word.startswith("--")}
    assert given <= options, f"the unit gives options the command lacks: {given - options}"
    assert "127.0.0.1:" in unit["Service"]["ExecStart"], "it serves on loopback"
    page = (DOCS / "how-to" / f"{command}.md").read_text(encoding="utf-8")
    assert path.relative_to(ROOT).as_posix() in page, "the how-to does not include the unit"
