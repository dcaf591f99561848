"""The tables of steps in the docs are the step classes' own declarations.

docs/reference/steps.md and spec 0004 D2 each hold the table :func:`render` makes from
``jobdispatch.steps.STEPS``: what each step commits before its call, the call, and what its
answer commits (the property tests in packages/core/tests/test_protocol_properties.py check
the classes' methods against those declarations). A change to a step that is not carried into
the docs fails here; ``python tests/repo/test_steps_table.py`` rewrites both tables.

The rows of spec 0001 D6 (the table of ``next``) are named in the docstrings of the classes
that they give, so each row leads to its code and each class to its rows.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

from jobdispatch import steps

sys.path.insert(0, str(Path(__file__).parent))
from repo_layout import DOCS, SPECS

BEGIN = "<!-- steps-table: made from jobdispatch.steps by tests/repo/test_steps_table.py -->"
END = "<!-- /steps-table -->"
TABLES = (DOCS / "reference" / "steps.md", SPECS / "0004-supervisor.md")
NEXT_TABLE = SPECS / "0001-contract.md"
ROW_ID = re.compile(r"\b([LOEHITP]\d+)\b")


def _paragraphs(cls: type) -> list[str]:
    doc = cls.__doc__ or ""
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]


def rows_of(cls: type) -> list[str]:
    """The D6 row ids a step class's docstring names (its paragraph starting "Row")."""
    named = [p for p in _paragraphs(cls) if p.startswith("Row")]
    return ROW_ID.findall(named[-1]) if named else []


def _events(types: tuple[type, ...]) -> str:
    return " + ".join(f"`{t.kind}`" for t in types) or "—"  # type: ignore[attr-defined]


def _call(cls: type[typing.Any]) -> str:
    call = cls.call_type
    if call is None:
        return "—"
    text = f"`{call.method}`"
    if call.answers == (Exception,):
        text += "; any failure is its answer"
    elif call.answers:
        text += "; " + ", ".join(f"`{e.__name__}`" for e in call.answers) + " is its answer"
    return text


def render() -> str:
    """The table of every step, from the classes."""
    lines = [
        BEGIN,
        "",
        "| Step | Rows of `next` | Committed before the call | Call | Committed after | What |",
        "|---|---|---|---|---|---|",
    ]
    for cls in steps.STEPS:
        before = _events(cls.commits)
        if cls.commits and not cls.fenced:
            before += " (at the revision read, without the lease)"
        what = _paragraphs(cls)[0]
        rows = ", ".join(rows_of(cls))
        name = f"`{cls.kind}` (`{cls.__name__}`)"
        lines.append(
            f"| {name} | {rows} | {before} | {_call(cls)} | {_events(cls.answers)} | {what} |"
        )
    lines += ["", END]
    return "\n".join(lines)


def _table_in(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    assert start >= 0 and end > start, f"{path} has no table between {BEGIN!r} and {END!r}"
    return text[start : end + len(END)]


def test_the_docs_tables_are_the_step_classes() -> None:
    expected = render()
    for path in TABLES:
        assert _table_in(path) == expected, (
            f"{path}'s table of steps differs from the step classes; run "
            "`python tests/repo/test_steps_table.py` to write it from them"
        )


def test_the_step_union_is_the_list_the_tables_show() -> None:
    assert set(typing.get_args(steps.Step)) == set(steps.STEPS)
    kinds = [cls.kind for cls in steps.STEPS]
    assert len(set(kinds)) == len(kinds), kinds


def test_every_row_of_the_next_table_is_named_by_the_steps_it_gives() -> None:
    text = NEXT_TABLE.read_text(encoding="utf-8")
    table = re.findall(r"^\| ([LOEHITP]\d+) \|", text, flags=re.MULTILINE)
    assert len(table) > 40, "spec 0001 D6's rows were not found"
    named = {row: cls.__name__ for cls in steps.STEPS for row in rows_of(cls)}
    missing = sorted(set(table) - set(named))
    unknown = sorted(set(named) - set(table))
    assert not missing, f"rows no step class's docstring names: {missing}"
    assert not unknown, f"step docstrings name rows spec 0001 D6 does not have: {unknown}"
    assert all(rows_of(cls) for cls in steps.STEPS), "a step class names no row"


def main() -> None:
    """Rewrite the tables in the docs from the classes."""
    table = render()
    for path in TABLES:
        text = path.read_text(encoding="utf-8")
        old = _table_in(path)
        path.write_text(text.replace(old, table), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
