"""The README's table of packages is the workspace: one row per member, with its distribution
and its pyproject description, so the table can neither miss a member, name one that is gone,
nor describe one in other words than the package index shows. The rows' order is the README's
own (the core first, then what builds on it)."""

from __future__ import annotations

from repo_layout import ROOT, Member, members

#: The classifier that keeps a member off the package index (noxfile.PRIVATE says the same).
PRIVATE = "Private :: Do Not Upload"
HEADER = "| folder | distribution | what it is |\n|---|---|---|\n"


def row(member: Member) -> str:
    """The member's row, rendered from its pyproject."""
    project = member.pyproject["project"]
    private = " (private)" if PRIVATE in project.get("classifiers", []) else ""
    return f"| `{member.rel}` | `{project['name']}`{private} | {project['description']} |"


def _readme_rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## The packages\n", 1)[1].split("\n## ", 1)[0]
    assert HEADER in section, f"README.md's packages section has no table headed {HEADER!r}"
    return section.split(HEADER, 1)[1].split("\n\n", 1)[0].strip("\n").splitlines()


def _folder(line: str) -> str:
    return line.strip("| ").split(" | ")[0].strip("`")


def test_the_readme_table_names_every_member_and_nothing_else() -> None:
    shown = [_folder(line) for line in _readme_rows()]
    wanted = {m.rel for m in members()}
    assert len(shown) == len(set(shown)), f"README.md's table repeats a row: {shown}"
    assert not wanted - set(shown), f"members missing from README.md: {sorted(wanted - set(shown))}"
    assert not set(shown) - wanted, f"README.md names non-members: {sorted(set(shown) - wanted)}"


def test_each_row_is_the_member_s_distribution_and_pyproject_description() -> None:
    shown = {_folder(line): line for line in _readme_rows()}
    wrong = [row(m) for m in members() if shown.get(m.rel, row(m)) != row(m)]
    assert not wrong, "README.md's rows differ from the members' pyproject; write them as:\n" + (
        "\n".join(wrong)
    )
