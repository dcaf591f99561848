"""tools/release/bump.py, on a copy of the repository's own pyproject, __about__ and changelog
files: one version everywhere, siblings capped below the next minor, the changelog's section."""

from __future__ import annotations

import datetime
import importlib.util
import re
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from repo_layout import ROOT, members, normalize, noxfile


def _bump() -> Any:
    spec = importlib.util.spec_from_file_location("bump", ROOT / "tools" / "release" / "bump.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path)
    for member in members():
        target = tmp_path / member.rel
        target.mkdir(parents=True)
        shutil.copy(member.path / "pyproject.toml", target)
        about = member.pyproject["tool"]["hatch"]["version"]["path"]
        (target / about).parent.mkdir(parents=True)
        shutil.copy(member.path / about, target / about)
    return tmp_path


def test_a_release_sets_one_version_and_caps_every_sibling(copy: Path) -> None:
    changed = _bump().bump(copy, "0.3.1", datetime.date(2027, 1, 2))
    names = {normalize(m.distribution) for m in members()}
    for member in members():
        about = copy / member.rel / member.pyproject["tool"]["hatch"]["version"]["path"]
        assert '__version__ = "0.3.1"' in about.read_text(), about
        with (copy / member.rel / "pyproject.toml").open("rb") as f:
            project = tomllib.load(f)
        texts = list(project["project"].get("dependencies", []))
        for group in project.get("dependency-groups", {}).values():
            texts += [t for t in group if isinstance(t, str)]
        for req in map(Requirement, texts):
            if normalize(req.name) in names:
                assert str(req.specifier) in {">=0.3.1,<0.4", "<0.4,>=0.3.1"}, (member, req)
    changelog = (copy / "CHANGELOG.md").read_text()
    assert "## Unreleased\n\n## 0.3.1 (2027-01-02)" in changelog
    assert copy / "CHANGELOG.md" in changed


@pytest.mark.parametrize("version", ["1.2", "v1.2.3", "1.2.3.dev0", "latest"])
def test_a_version_that_is_not_a_release_is_refused(copy: Path, version: str) -> None:
    with pytest.raises(ValueError, match="not a release version"):
        _bump().bump(copy, version, datetime.date(2027, 1, 2))


def test_a_version_released_already_is_refused(copy: Path) -> None:
    bump = _bump()
    bump.bump(copy, "0.3.1", datetime.date(2027, 1, 2))
    with pytest.raises(ValueError, match=r"already has a section for 0\.3\.1"):
        bump.bump(copy, "0.3.1", datetime.date(2027, 1, 3))


def test_after_1_0_the_cap_is_the_next_major(copy: Path) -> None:
    _bump().bump(copy, "1.4.0", datetime.date(2027, 1, 2))
    text = (copy / "plugins" / "slurm" / "pyproject.toml").read_text()
    assert '"jobdispatch>=1.4.0,<2"' in text


def test_the_release_workflow_uploads_through_trusted_publishing() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    publish = workflow["jobs"]["publish"]
    assert publish["permissions"]["id-token"] == "write"
    assert publish["environment"]["name"] == "pypi"
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert any(u.startswith("pypa/gh-action-pypi-publish@") for u in uses)
    assert not any("password" in step.get("with", {}) for step in publish["steps"]), "a token"
    build = " ".join(step.get("run", "") for step in workflow["jobs"]["build"]["steps"])
    assert "nox -s build" in build and "--version" in build


def test_every_distribution_the_build_makes_has_a_trusted_publisher_and_no_other() -> None:
    """docs/how-to/release.md lists the PyPI projects to register as trusted publishers before
    the first release, and an upload to a project left out is refused: the list must be exactly
    the distributions the nox build session builds (every member not classified private)."""
    text = (ROOT / "docs" / "how-to" / "release.md").read_text()
    section = text.split("## Once, before the first release", 1)[1].split("\n## ", 1)[0]
    listed = [normalize(n) for n in re.findall(r"^- `([a-z0-9-]+)`$", section, re.MULTILINE)]
    by_path = {m.path: m for m in members()}
    built = sorted(normalize(by_path[p].distribution) for p in noxfile().published())
    assert "jobdispatch-sim" not in built, "the simulator is private"
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    assert sorted(listed) == built, (
        f"release.md lists {sorted(listed)}; the build makes {built}: "
        f"missing {sorted(set(built) - set(listed))}, extra {sorted(set(listed) - set(built))}"
    )
