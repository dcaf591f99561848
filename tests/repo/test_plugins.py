"""Plugins: every ``jobdispatch`` entry point imports cheaply, and every hook is documented.

An entry-point module is imported by every process that loads plugins, including the
checkpoint helper inside a job container, so it must not pull in a heavy client library; those
are imported inside the factories that need them (layout.md). Each check runs in a fresh
interpreter, since this one has imported who knows what already.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import pytest
from jobdispatch import hookspecs
from repo_layout import DOCS, HEAVY, Member, members

ENTRY_POINTS = [
    (member, name, target)
    for member in members()
    for name, target in (
        member.pyproject.get("project", {}).get("entry-points", {}).get("jobdispatch", {}).items()
    )
]

PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    heavy = {heavy!r}
    before = {{m for m in sys.modules if m.split(".")[0] in heavy}}
    for target in sys.argv[1:]:
        module, _, attr = target.partition(":")
        obj = importlib.import_module(module)
        if attr:
            for part in attr.split("."):
                obj = getattr(obj, part)
    after = sorted(m for m in sys.modules if m.split(".")[0] in heavy and m not in before)
    print(json.dumps(after))
    """
)


def _heavy_imported_by(code: str, *args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


def test_there_are_entry_points_to_check() -> None:
    assert len(ENTRY_POINTS) >= 3, ENTRY_POINTS


@pytest.mark.parametrize(
    ("member", "name", "target"),
    ENTRY_POINTS,
    ids=[f"{m.rel}:{n}" for m, n, _ in ENTRY_POINTS],
)
def test_entry_point_imports_without_heavy_clients(member: Member, name: str, target: str) -> None:
    heavy = _heavy_imported_by(PROBE.format(heavy=HEAVY), target)
    assert not heavy, f"{member}: entry point {name} = {target!r} imports {', '.join(heavy)}"


def test_loading_every_plugin_imports_no_heavy_client() -> None:
    code = textwrap.dedent(
        f"""
        import json, sys
        from jobdispatch import plugins
        loaded = plugins.load()
        heavy = {HEAVY!r}
        print(json.dumps({{
            "failures": [f"{{f.name}} ({{f.distribution}}): {{f.reason}}" for f in loaded.failures],
            "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy),
        }}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["failures"] == [], report["failures"]
    assert report["heavy"] == [], f"loading the plugins imported {report['heavy']}"


def test_every_declared_entry_point_is_installed() -> None:
    from importlib import metadata

    installed = {(ep.name, ep.value) for ep in metadata.entry_points(group="jobdispatch")}
    missing = [(n, t) for _, n, t in ENTRY_POINTS if (n, t) not in installed]
    assert not missing, f"declared but not installed (run uv sync --all-packages): {missing}"


HOOKS = [
    (name, fn)
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(fn, f"{hookspecs.PROJECT}_spec")
]


def test_there_are_hooks_to_check() -> None:
    assert HOOKS, "jobdispatch.hookspecs defines no hookspec"
    assert all(name.startswith("jobdispatch_") for name, _ in HOOKS), [n for n, _ in HOOKS]


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[n for n, _ in HOOKS])
def test_hookspec_docstring_names_its_parameters(name: str, fn: object) -> None:
    doc = inspect.getdoc(fn) or ""
    assert doc.strip(), f"hook {name} has no docstring"
    for param in inspect.signature(fn).parameters:  # type: ignore[arg-type]
        assert f"{param}:" in doc or f"``{param}``" in doc, (
            f"hook {name}'s docstring does not describe its parameter {param!r}"
        )


def _directives() -> list[tuple[str, str, str]]:
    """Every mkdocstrings directive in the docs: (page, identifier, its options block)."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("::: "):
                block = []
                for follow in lines[i + 1 :]:
                    if follow.strip() and not follow.startswith((" ", "\t")):
                        break
                    block.append(follow)
                found.append(
                    (page.relative_to(DOCS).as_posix(), line[4:].strip(), "\n".join(block))
                )
    return found


@pytest.mark.parametrize(("name", "fn"), HOOKS, ids=[n for n, _ in HOOKS])
def test_hookspec_appears_in_the_docs_reference(name: str, fn: object) -> None:
    del fn
    directives = [d for d in _directives() if d[0].startswith("reference/")]
    whole = [
        page
        for page, ident, options in directives
        if ident == "jobdispatch.hookspecs" and "members:" not in options
    ]
    own = [page for page, ident, _ in directives if ident == f"jobdispatch.hookspecs.{name}"]
    assert whole or own, f"hook {name} is rendered by no page under docs/reference/"
