"""The adapters' classification tables in the specs are the tables the code reads.

Each adapter decides causes and states with first-match tables (``jobdispatch.firstmatch``):
rows of data, not an if-chain. Its spec carries each table between two markers, as
:meth:`~jobdispatch.firstmatch.Table.markdown` renders it, so the spec cannot say one order or
condition while the code reads another. A change to a row that is not carried into the spec
fails here; ``python tests/repo/test_classification_tables.py`` rewrites the tables in the specs.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from repo_layout import SPECS

#: Where each table lives: (module, attribute) → the spec that shows it.
TABLES: dict[tuple[str, str], Path] = {
    ("jobdispatch_slurm.classify", "CAUSES"): SPECS / "0008-slurm-adapter.md",
    ("jobdispatch_slurm.classify", "LIVE_STATES"): SPECS / "0008-slurm-adapter.md",
    ("jobdispatch_kubeflow.classify", "STATES"): SPECS / "0010-kubeflow-adapter.md",
    ("jobdispatch_kubeflow.classify", "RUN_CAUSES"): SPECS / "0010-kubeflow-adapter.md",
    ("jobdispatch_kubeflow.classify", "POD_CAUSES"): SPECS / "0010-kubeflow-adapter.md",
}


def _table(where: tuple[str, str]) -> Any:
    module, name = where
    return getattr(importlib.import_module(module), name)


def _markers(table: Any, where: tuple[str, str]) -> tuple[str, str]:
    module, name = where
    begin = (
        f"<!-- table {table.name}: made from {module}.{name} "
        "by tests/repo/test_classification_tables.py -->"
    )
    return begin, f"<!-- /table {table.name} -->"


def render(where: tuple[str, str]) -> str:
    """The block a spec carries for the table at ``where``, markers included."""
    table = _table(where)
    begin, end = _markers(table, where)
    return f"{begin}\n\n{table.markdown()}\n\n{end}"


def _block_in(text: str, where: tuple[str, str], path: Path) -> str:
    begin, end = _markers(_table(where), where)
    start, stop = text.find(begin), text.find(end)
    assert start >= 0 and stop > start, f"{path} has no table between {begin!r} and {end!r}"
    return text[start : stop + len(end)]


@pytest.mark.parametrize("where", sorted(TABLES), ids=lambda w: f"{w[0]}.{w[1]}")
def test_the_spec_shows_the_table_the_code_reads(where: tuple[str, str]) -> None:
    path = TABLES[where]
    shown = _block_in(path.read_text(encoding="utf-8"), where, path)
    assert shown == render(where), (
        f"{path}'s table {where[0]}.{where[1]} differs from the code's rows; run "
        "`python tests/repo/test_classification_tables.py` to write it from them"
    )


def main() -> None:
    """Rewrite the tables in the specs from the code."""
    for where, path in TABLES.items():
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(_block_in(text, where, path), render(where)), encoding="utf-8")
        print(f"wrote {where[0]}.{where[1]} into {path}")


if __name__ == "__main__":
    main()
