"""Every workspace member is a distribution of its own, built and laid out the same way.

As the design's layout says: each member has a README, a src/ layout with py.typed, tests
beside it, a pyproject built by hatchling whose version comes from ``__about__.py``, and depends
on its siblings with lower bounds, never lockstep pins (they are published separately).
"""

from __future__ import annotations

import ast
import re

import pytest
from packaging.requirements import Requirement
from repo_layout import Member, members, normalize

MEMBERS = members()
IDS = [m.rel for m in MEMBERS]
SIBLINGS = {normalize(m.distribution) for m in MEMBERS}


def test_the_workspace_has_the_members_the_layout_names() -> None:
    rels = set(IDS)
    for expected in ("packages/core", "packages/supervise", "conformance", "tools/sim"):
        assert expected in rels, f"{expected} is not a workspace member"


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_has_a_readme_with_a_title(member: Member) -> None:
    readme = member.path / "README.md"
    assert readme.is_file(), f"{member} has no README.md"
    first = readme.read_text(encoding="utf-8").splitlines()[:1]
    assert first and first[0].startswith("# "), f"{member}/README.md does not open with a title"
    assert member.distribution.split("-")[0] in first[0], (
        f"{member}/README.md's title {first[0]!r} does not name {member.distribution}"
    )


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_has_one_import_package_with_py_typed(member: Member) -> None:
    packages = member.import_packages
    assert packages, f"{member} has no import package under src/"
    for package in packages:
        assert (package / "py.typed").is_file(), (
            f"{package.relative_to(member.path)} has no py.typed"
        )


def _defines_tests(path: ast.Module) -> bool:
    for node in ast.walk(path):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            return True
    return False


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_has_tests(member: Member) -> None:
    tests = member.path / "tests"
    assert tests.is_dir(), f"{member} has no tests/ folder"
    files = sorted(tests.rglob("test_*.py")) + sorted(tests.rglob("*_test.py"))
    with_tests = [f for f in files if _defines_tests(ast.parse(f.read_text(encoding="utf-8")))]
    assert with_tests, f"{member}/tests has no test module defining a test"


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_is_built_by_hatchling(member: Member) -> None:
    build = member.pyproject.get("build-system", {})
    assert build.get("build-backend") == "hatchling.build", f"{member} is not built by hatchling"
    assert any(normalize(Requirement(r).name) == "hatchling" for r in build.get("requires", []))


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_takes_its_version_from_about(member: Member) -> None:
    project = member.pyproject.get("project", {})
    assert "version" not in project, f"{member} writes its version in pyproject.toml"
    assert "version" in project.get("dynamic", []), f"{member} has no dynamic version"
    path = member.pyproject.get("tool", {}).get("hatch", {}).get("version", {}).get("path")
    assert path is not None, f"{member} has no [tool.hatch.version] path"
    assert re.fullmatch(r"src/[a-z_]+/__about__\.py", path), f"{member}: version from {path}"
    about = member.path / path
    assert about.is_file(), f"{member}: {path} does not exist"
    tree = ast.parse(about.read_text(encoding="utf-8"))
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert "__version__" in assigned, f"{member}: {path} does not set __version__"


def _requirements(member: Member) -> list[tuple[str, str]]:
    """Every requirement the member declares, with where: dependencies, extras, groups."""
    project = member.pyproject.get("project", {})
    found = [("dependencies", r) for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        found += [(f"optional-dependencies.{extra}", r) for r in reqs]
    for group, reqs in member.pyproject.get("dependency-groups", {}).items():
        found += [(f"dependency-groups.{group}", r) for r in reqs if isinstance(r, str)]
    return found


@pytest.mark.parametrize("member", MEMBERS, ids=IDS)
def test_depends_on_siblings_with_lower_bounds_only(member: Member) -> None:
    bad = []
    for where, text in _requirements(member):
        req = Requirement(text)
        if normalize(req.name) not in SIBLINGS:
            continue
        operators = {spec.operator for spec in req.specifier}
        if operators & {"==", "==="}:
            bad.append(f"{where}: {text} pins a sibling")
        elif ">=" not in operators:
            bad.append(f"{where}: {text} has no >= lower bound")
    assert not bad, f"{member}: " + "; ".join(bad)


def test_the_sibling_check_sees_siblings() -> None:
    # The check above would pass vacuously if no member named another.
    named = {
        normalize(Requirement(text).name) for member in MEMBERS for _, text in _requirements(member)
    }
    assert named & SIBLINGS, "no member depends on a sibling: the check is reading nothing"
