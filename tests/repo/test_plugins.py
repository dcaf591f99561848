"""Plugins: discovering them is cheap, and every hook is documented.

An entry-point module is imported by every process that loads plugins, including the
checkpoint helper inside a job container and ``jobdispatch`` itself, so registering must import
nothing a process may not need: no module outside the standard library, the workspace's own
packages and what the core's own dependencies provide (:func:`repo_layout.light_imports`, so a
new heavy client is caught without anyone listing it), and of the plugin itself only its
package, ``__about__`` and the entry-point module (the package ``__init__`` files are lazy, and
factories and schemas are registered by string). Each check runs in a fresh interpreter, since
this one has imported who knows what already.
"""

from __future__ import annotations

import inspect
import json
import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from jobdispatch import hookspecs
from repo_layout import DOCS, Member, light_imports, members, run_python

ENTRY_POINTS = [
    (member, name, target)
    for member in members()
    for name, target in (
        member.pyproject.get("project", {}).get("entry-points", {}).get("jobdispatch", {}).items()
    )
]

#: Imports the plugin machinery, then the targets given (``module[:attr]``) or, with none,
#: every plugin through ``plugins.load()``, and prints what that second step imported:
#: ``outside``, modules whose top-level package is not light; ``deeper``, modules of jobdispatch
#: packages other than a package itself, its ``__about__`` and the entry-point modules.
PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    from importlib import metadata
    from jobdispatch import plugins
    light = set(json.loads(sys.argv[1]))
    entry_modules = {
        ep.value.partition(":")[0] for ep in metadata.entry_points(group="jobdispatch")
    }
    light |= {m.split(".")[0] for m in entry_modules}
    before = set(sys.modules)
    failures = []
    if len(sys.argv) > 2:
        for target in sys.argv[2:]:
            module, _, attr = target.partition(":")
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
    else:
        loaded = plugins.load()
        failures = [f"{f.plugin} ({f.distribution}): {f.error}" for f in loaded.failures]
        entry_modules |= set(plugins.BUILTINS)
    new = sorted(set(sys.modules) - before)

    def shallow(name):
        head, _, rest = name.partition(".")
        return not rest or rest == "__about__" or name in entry_modules

    print(json.dumps({
        "failures": failures,
        "outside": [m for m in new if m.split(".")[0] not in light],
        "deeper": [m for m in new if m.split(".")[0] in light and m.startswith("jobdispatch")
                   and not shallow(m)],
    }))
    """
)


def discovery_report(*targets: str, path: Sequence[Path] = ()) -> dict[str, list[str]]:
    """What importing ``targets`` (or, with none, loading every plugin) imports beyond the
    plugin machinery, in a fresh interpreter with ``path`` in front of ``sys.path``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    out = run_python(PROBE, json.dumps(sorted(light_imports())), *targets, env=env)
    report: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    return report


def test_there_are_entry_points_to_check() -> None:
    assert len(ENTRY_POINTS) >= 3, ENTRY_POINTS


@pytest.mark.parametrize(
    ("member", "name", "target"),
    ENTRY_POINTS,
    ids=[f"{m.rel}:{n}" for m, n, _ in ENTRY_POINTS],
)
def test_entry_point_imports_only_light_modules(member: Member, name: str, target: str) -> None:
    report = discovery_report(target)
    assert not report["outside"], f"{member}: entry point {name} imports {report['outside']}"
    assert not report["deeper"], f"{member}: entry point {name} imports {report['deeper']}"


def test_loading_every_plugin_imports_only_light_modules() -> None:
    report = discovery_report()
    assert report["failures"] == [], report["failures"]
    assert report["outside"] == [], f"loading the plugins imported {report['outside']}"
    assert report["deeper"] == [], f"loading the plugins imported {report['deeper']}"


def _fake_plugin(folder: Path, body: str) -> Path:
    """A distribution whose entry point in the jobdispatch group is ``jdtest_heavy``."""
    (folder / "jdtest_heavy.py").write_text(textwrap.dedent(body))
    info = folder / "jdtest_heavy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jdtest-heavy\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jobdispatch]\njdtest-heavy = jdtest_heavy\n")
    return folder


REGISTER = """
    from jobdispatch.hookspecs import hookimpl

    @hookimpl
    def jobdispatch_register_record_stores(registry):
        registry.add("heavy", "jdtest_heavy:Store")
"""


def test_the_guard_sees_a_heavy_client_nobody_listed(tmp_path: Path) -> None:
    """A plugin importing psycopg (installed here, and in no list anywhere) at registration is
    caught, and the same plugin importing it inside its factory passes."""
    pytest.importorskip("psycopg")
    _fake_plugin(tmp_path, "import psycopg\n" + textwrap.dedent(REGISTER))
    report = discovery_report(path=[tmp_path])
    assert "psycopg" in report["outside"], report
    assert discovery_report("jdtest_heavy", path=[tmp_path])["outside"], "the entry point alone"
    (tmp_path / "jdtest_heavy.py").write_text(
        textwrap.dedent(REGISTER) + "\ndef Store(config):\n    import psycopg\n"
    )
    assert discovery_report(path=[tmp_path]) == {"failures": [], "outside": [], "deeper": []}


def test_the_guard_sees_a_plugin_importing_more_of_the_core(tmp_path: Path) -> None:
    """Registration importing a module of the core it does not need (here the codec, cattrs'
    code generation) is caught too."""
    _fake_plugin(tmp_path, "import jobdispatch.codec\n" + textwrap.dedent(REGISTER))
    report = discovery_report(path=[tmp_path])
    assert "jobdispatch.codec" in report["deeper"], report


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
