"""What a user sees of each distribution on PyPI: licence, authors, links, classifiers, bounds and
the long description.

The wheels themselves are checked by the nox ``build`` session (tools/release/check_dists.py reads
their METADATA); these checks read the sources, so they run with every test run and say which
file to fix.
"""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from repo_layout import ROOT, Member, members, normalize

MEMBERS = members()
PUBLIC = [
    m
    for m in MEMBERS
    if "Private :: Do Not Upload" not in m.pyproject["project"].get("classifiers", [])
]
PUBLIC_IDS = [m.rel for m in PUBLIC]
SIBLINGS = {normalize(m.distribution) for m in MEMBERS}
SOURCE = "https://github.com/jobdispatch/dispatch"
#: The Python versions CI tests (noxfile.PYTHONS) are the ones the classifiers name.
PYTHONS = ("3.11", "3.12", "3.13")
#: The end of the part of a README that PyPI shows (the fancy-pypi-readme hook cuts there).
PYPI_END = "<!-- pypi: end -->"


def test_the_repository_has_the_mit_licence() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License"), "LICENSE is not the MIT licence the wheels declare"


@pytest.mark.parametrize("member", MEMBERS, ids=[m.rel for m in MEMBERS])
def test_every_distribution_ships_the_licence_text(member: Member) -> None:
    # License-Expression: MIT requires the text to travel with the code; hatchling only takes
    # licence files from inside the member's folder, so each holds a copy of the root one.
    project = member.pyproject["project"]
    assert project.get("license") == "MIT", f"{member}: license is not MIT"
    assert project.get("license-files") == ["LICENSE"], f"{member}: license-files"
    copy = member.path / "LICENSE"
    assert copy.is_file(), f"{member}/LICENSE is missing"
    assert copy.read_bytes() == (ROOT / "LICENSE").read_bytes(), (
        f"{member}/LICENSE differs from the root LICENSE: copy it again"
    )


@pytest.mark.parametrize("member", PUBLIC, ids=PUBLIC_IDS)
def test_published_metadata_is_complete(member: Member) -> None:
    project = member.pyproject["project"]
    assert project.get("authors"), f"{member}: no authors"
    assert project.get("keywords"), f"{member}: no keywords"
    urls = project.get("urls", {})
    for label in ("Homepage", "Documentation", "Source", "Issues", "Changelog"):
        assert label in urls, f"{member}: no {label} URL"
    assert urls["Source"] == SOURCE, f"{member}: Source URL {urls['Source']!r}"
    classifiers = set(project.get("classifiers", []))
    assert any(c.startswith("Development Status :: ") for c in classifiers), member
    assert any(c.startswith("Topic :: ") for c in classifiers), member
    assert any(c.startswith("Operating System :: ") for c in classifiers), member
    assert "Typing :: Typed" in classifiers, f"{member} ships py.typed but does not say so"
    named = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.fullmatch(r".*:: 3\.\d+", c)}
    assert named == set(PYTHONS), f"{member}: Python classifiers {sorted(named)}"
    assert SpecifierSet(project["requires-python"]).contains(PYTHONS[0]), member


@pytest.mark.parametrize("member", PUBLIC, ids=PUBLIC_IDS)
def test_the_pypi_description_stands_off_the_repository(member: Member) -> None:
    project = member.pyproject["project"]
    assert "readme" in project.get("dynamic", []), f"{member}: readme is not from the hook"
    hook = member.pyproject["tool"]["hatch"]["metadata"]["hooks"]["fancy-pypi-readme"]
    (fragment,) = hook["fragments"]
    assert fragment == {"path": "README.md", "end-before": PYPI_END}, f"{member}: {fragment}"
    text = (member.path / "README.md").read_text(encoding="utf-8")
    assert text.count(PYPI_END) == 1, f"{member}/README.md needs exactly one {PYPI_END}"
    shown = text.split(PYPI_END)[0]
    relative = [
        link
        for link in re.findall(r"\]\(([^)\s]+)\)", shown)
        if not re.match(r"(https?://|mailto:|#)", link)
    ]
    assert not relative, f"{member}/README.md: relative links break on PyPI: {relative}"
    for dev_only in ("./dev", ".venv/", "tools/", "nox -s"):
        assert dev_only not in shown, (
            f"{member}/README.md shows {dev_only!r} on PyPI: move it below {PYPI_END}"
        )


def _sibling_requirements(member: Member) -> list[Requirement]:
    project = member.pyproject["project"]
    texts = list(project.get("dependencies", []))
    for reqs in member.pyproject.get("dependency-groups", {}).values():
        texts += [r for r in reqs if isinstance(r, str)]
    return [r for r in map(Requirement, texts) if normalize(r.name) in SIBLINGS]


def _uncapped(member: Member) -> list[str]:
    return [str(r) for r in _sibling_requirements(member) if "<" not in str(r.specifier)]


@pytest.mark.parametrize("member", MEMBERS, ids=[m.rel for m in MEMBERS])
def test_siblings_are_required_below_the_next_minor(member: Member) -> None:
    # At 0.x the adapter SPI may change with every minor release: an upper bound keeps pip from
    # pairing an adapter with a core it was never tested against (the SPI version check at load
    # time says so plainly if it happens anyway).
    if not _sibling_requirements(member):
        pytest.skip(f"{member} requires no sibling")
    assert not _uncapped(member), f"{member}: no upper bound on {_uncapped(member)}"
