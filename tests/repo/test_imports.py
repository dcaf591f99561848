"""Every member's ``src/`` imports only what its pyproject declares it needs at run time.

A wheel is installed with its ``dependencies`` and nothing else, so a module that imports a
package declared only in a development group fails in a plain install, and nothing in the
workspace (where every member is installed) would notice. This test reads each module's imports
with ``ast`` (nothing is imported), maps each imported top-level module to the distribution
that provides it (``importlib.metadata.packages_distributions``, and the workspace's own members
for the packages it installs in editable mode), and requires that distribution to be declared:

* a module-level import, by ``dependencies``; or by an extra, in a module whose docstring names
  that extra the way pip installs it (``jobdispatch-local[testing]``), so a reader is told;
* an import inside a function (a heavy client loaded by the factory that needs it), by
  ``dependencies`` or any extra of the member.

The standard library, the member's own packages and imports under ``if TYPE_CHECKING:`` (never
run) need nothing.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from repo_layout import ROOT, Member, members, normalize, providers


def _requirements(specs: list[str]) -> set[str]:
    return {normalize(Requirement(spec).name) for spec in specs}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(top-level module, line, at module level) for every absolute import that would run."""

    def walk(node: ast.AST, top: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    yield from walk(ast.Module(body=[sub], type_ignores=[]), top)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name.split(".")[0], child.lineno, top
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.module.split(".")[0], child.lineno, top
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from walk(child, top and not inner)

    yield from walk(tree, True)


def _undeclared(member: Member) -> list[str]:
    project = member.pyproject.get("project", {})
    runtime = _requirements(project.get("dependencies", []))
    extras = {
        normalize(name): _requirements(specs)
        for name, specs in project.get("optional-dependencies", {}).items()
    }
    own = {p.name for p in member.import_packages}
    problems = []
    for path in sorted((member.path / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docstring = ast.get_docstring(tree) or ""
        where = (path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).as_posix()
        for module, line, top in _imports(tree):
            if module in sys.stdlib_module_names or module in own or module == "__future__":
                continue
            dists = providers().get(module)
            if not dists:
                problems.append(f"{where}:{line}: imports {module}, which no distribution provides")
                continue
            if dists & runtime:
                continue
            named = {
                extra
                for extra, needs in extras.items()
                if dists & needs and (not top or f"{member.distribution}[{extra}]" in docstring)
            }
            if not named:
                also = f" (or an extra its docstring names as {member.distribution}[extra])"
                problems.append(
                    f"{where}:{line}: imports {module} ({', '.join(sorted(dists))})"
                    f"{' at module level' if top else ''}, which {member.distribution}'s "
                    f"pyproject.toml does not declare in its dependencies{also if top else ''}"
                )
    return problems


@pytest.mark.parametrize("member", [m for m in members() if (m.path / "src").is_dir()], ids=str)
def test_src_imports_only_declared_runtime_dependencies(member: Member) -> None:
    problems = _undeclared(member)
    assert not problems, "\n".join(problems)


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The check can fail: a member whose module imports a dev-only package is reported, and
    declaring it in an extra the docstring names clears it."""
    src = tmp_path / "src" / "probe_pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "helper.py").write_text('"""Helpers."""\nimport pytest\nimport attrs\n')
    pyproject: dict[str, Any] = {"project": {"name": "probe", "dependencies": ["attrs"]}}
    probe = Member(tmp_path, pyproject)
    assert _undeclared(probe) == [
        f"{src.as_posix()}/helper.py:2: imports pytest (pytest) at module level, which probe's "
        "pyproject.toml does not declare in its dependencies (or an extra its docstring names "
        "as probe[extra])"
    ]
    pyproject["project"]["optional-dependencies"] = {"testing": ["pytest>=8"]}
    assert _undeclared(probe)  # declared, but the module does not say it needs the extra
    (src / "helper.py").write_text('"""Needs probe[testing]."""\nimport pytest\n')
    assert _undeclared(probe) == []
