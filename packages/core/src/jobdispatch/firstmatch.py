"""First-match tables: a classification written as rows of data, read top to bottom.

An adapter decides why a run ended (or what an object shows) from the scheduler's evidence,
and its spec states that decision as a table whose first matching row wins. Written as an
if-chain, the table lived twice (in the prose of the spec and in branches of code) and nothing
kept the two equal. Here each row is a value: its name, the evidence it reads (in the spec's
words), a predicate over that evidence, and what it yields, as a function and in words. One
small function evaluates a table; another renders it as the Markdown the spec carries, so a
repository test can compare the two, and each row can be tested by its name.

Pure and generic: ``E`` is whatever one adapter gathers for one decision (a frozen value made
before the table is read), ``R`` what the table yields (a :class:`~jobdispatch.types.Cause`,
an object state, ...). The last row of a table should match everything; a table that matches
nothing raises :class:`NoRowMatched`, naming the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import attrs

from jobdispatch.types import Cause, CauseKind, Provenance

__all__ = ["NoRowMatched", "Row", "Table", "always", "cause_cells", "cause_row"]

E = TypeVar("E")
R = TypeVar("R")
#: A row reads its evidence and yields its result: a row of ``Row[E, Cause]`` fits a table of
#: ``Table[E, Cause | None]``.
E_contra = TypeVar("E_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class NoRowMatched(LookupError):
    """No row of a table matched its evidence: the table lacks its catch-all last row."""


def always(_: object) -> bool:
    """The condition of a table's last row: it matches whatever reached it."""
    return True


@attrs.frozen
class Row(Generic[E_contra, R_co]):
    """One row of a first-match table.

    ``name`` is the row's id (unique in its table, kebab-case: tests and the spec name it);
    ``evidence`` says in words what the row reads and when it matches; ``when`` is that
    condition as a predicate; ``then`` builds what the row yields from the same evidence;
    ``gives`` are the words of what it yields, one per result column of the table.
    """

    name: str
    evidence: str
    when: Callable[[E_contra], bool]
    then: Callable[[E_contra], R_co]
    gives: tuple[str, ...]


@attrs.frozen
class Table(Generic[E, R]):
    """Rows read in order; the first whose ``when`` holds gives the answer.

    ``columns`` head the rendered table: the first names the evidence column, the rest the
    result columns (as many as each row's ``gives``).
    """

    name: str
    columns: tuple[str, ...]
    rows: tuple[Row[E, R], ...]

    def __attrs_post_init__(self) -> None:
        names = [row.name for row in self.rows]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"table {self.name!r} repeats row names {repeated}")
        for row in self.rows:
            if len(row.gives) != len(self.columns) - 1:
                raise ValueError(
                    f"table {self.name!r} row {row.name!r} gives {len(row.gives)} cells, "
                    f"its columns {self.columns!r} want {len(self.columns) - 1}"
                )

    def match(self, evidence: E) -> Row[E, R]:
        """The first row whose condition holds for ``evidence``."""
        for row in self.rows:
            if row.when(evidence):
                return row
        raise NoRowMatched(f"no row of table {self.name!r} matched")

    def __call__(self, evidence: E) -> R:
        """What the first matching row yields for ``evidence``."""
        return self.match(evidence).then(evidence)

    def row(self, name: str) -> Row[E, R]:
        """The row called ``name`` (for tests and docs)."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"table {self.name!r} has no row {name!r}")

    def markdown(self) -> str:
        """The table as Markdown: one line per row, in order, its name first."""
        head = ("row", *self.columns)
        lines = [_line(head), _line(("---",) * len(head))]
        lines += [_line((f"`{row.name}`", row.evidence, *row.gives)) for row in self.rows]
        return "\n".join(lines)


def cause_cells(kind: CauseKind, provenance: Provenance, note: str = "") -> tuple[str, str]:
    """The result cells of a row of a cause table (columns "cause" and "provenance"): the
    cause's word, with ``note`` after it in brackets, and the provenance's word. Tests read the
    words back to check that a row yields the cause it says."""
    return (f"{kind} ({note})" if note else str(kind), str(provenance))


def cause_row(
    name: str,
    evidence: str,
    when: Callable[[E], bool],
    kind: CauseKind,
    provenance: Provenance,
    detail: str | Callable[[E], str] = "",
    *,
    note: str = "",
) -> Row[E, Cause]:
    """A row of a cause table whose cause is its ``kind`` and ``provenance`` with a ``detail``
    (fixed, or made from the evidence). Its cells are made from the same kind and provenance,
    so what the spec says the row gives and what it gives cannot differ."""

    def then(e: E) -> Cause:
        return Cause(kind, provenance, detail if isinstance(detail, str) else detail(e))

    return Row(name, evidence, when, then, cause_cells(kind, provenance, note))


def _line(cells: Iterable[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
