"""First-match tables: the first row whose condition holds decides, and a table is well formed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.firstmatch import NoRowMatched, Row, Table, always, cause_row
from jobdispatch.types import Cause, CauseKind, Provenance


def _divides(n: int) -> Row[int, str]:
    return Row(
        f"by-{n}", f"divisible by {n}", lambda x: x % n == 0, lambda x: f"{x}/{n}", (str(n),)
    )


SIEVE: Table[int, str] = Table(
    "sieve",
    ("number", "divisor"),
    (
        _divides(2),
        _divides(3),
        _divides(5),
        Row("other", "anything else", always, str, ("none",)),
    ),
)


@given(st.integers(min_value=-1000, max_value=1000))
def test_the_first_row_whose_condition_holds_decides(x: int) -> None:
    first = next(row for row in SIEVE.rows if row.when(x))
    assert SIEVE.match(x) is first
    assert SIEVE(x) == first.then(x)


def test_a_table_that_matches_nothing_names_itself() -> None:
    table: Table[int, str] = Table("evens", ("n", "half"), (_divides(2),))
    with pytest.raises(NoRowMatched, match="'evens'"):
        table(3)


def test_row_names_are_unique_and_rows_fill_the_columns() -> None:
    with pytest.raises(ValueError, match=r"repeats row names \['by-2'\]"):
        Table("t", ("n", "d"), (_divides(2), _divides(2)))
    with pytest.raises(ValueError, match="row 'by-2' gives 1 cells"):
        Table("t", ("n", "d", "extra"), (_divides(2),))


def test_a_row_is_found_by_name() -> None:
    assert SIEVE.row("by-3").gives == ("3",)
    with pytest.raises(KeyError, match="no row 'by-7'"):
        SIEVE.row("by-7")


def test_markdown_lists_the_rows_in_order_with_their_names() -> None:
    table: Table[int, str] = Table("t", ("n", "d"), (Row("pipe", "a | b", always, str, ("x\ny",)),))
    assert table.markdown().splitlines() == [
        "| row | n | d |",
        "| --- | --- | --- |",
        "| `pipe` | a \\| b | x y |",
    ]
    assert [line.split(" | ")[0] for line in SIEVE.markdown().splitlines()[2:]] == [
        "| `by-2`",
        "| `by-3`",
        "| `by-5`",
        "| `other`",
    ]


def test_a_cause_row_gives_the_cause_its_cells_name() -> None:
    row: Row[int, Cause] = cause_row(
        "big",
        "over 9",
        lambda n: n > 9,
        CauseKind.NO_CAPACITY,
        Provenance.SCHEDULER,
        lambda n: f"{n} is too many",
        note="the count in the detail",
    )
    table: Table[int, Cause | None] = Table(
        "sizes", ("n", "cause", "provenance"), (row, Row("fits", "else", always, _none, ("-", "-")))
    )
    assert table(12) == Cause(CauseKind.NO_CAPACITY, Provenance.SCHEDULER, "12 is too many")
    assert table(3) is None
    assert row.gives == ("no-capacity (the count in the detail)", "scheduler")
    fixed: Row[int, Cause] = cause_row("any", "any", always, CauseKind.UNKNOWN, Provenance.NONE)
    assert (fixed.then(1), fixed.gives) == (
        Cause(CauseKind.UNKNOWN, Provenance.NONE),
        ("unknown", "none"),
    )


def _none(_: int) -> None:
    return None
