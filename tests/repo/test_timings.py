"""docs/reference/timings.md prints the protocol's timings; ``jobdispatch.timing`` defines them.
The doc's core table must name every constant of the module, with the module's value."""

from __future__ import annotations

import re
from datetime import timedelta

from jobdispatch import timing
from repo_layout import DOCS

_UNITS = {"s": "seconds", "min": "minutes", "h": "hours"}


def _core_table() -> dict[str, str]:
    text = (DOCS / "reference" / "timings.md").read_text()
    section = text.split("## In the core", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \|", section, re.M)
    return {name: value.strip() for name, value in rows}


def _value(text: str) -> timedelta | int:
    number, _, unit = text.partition(" ")
    if not unit:
        return int(number)
    return timedelta(**{_UNITS[unit]: int(number)})


def test_the_timings_page_lists_every_constant_of_the_timing_module_with_its_value() -> None:
    table = _core_table()
    assert sorted(table) == sorted(timing.__all__)
    wrong = {
        name: (text, getattr(timing, name))
        for name, text in table.items()
        if _value(text) != getattr(timing, name)
    }
    assert not wrong, wrong


def test_the_value_parser_reads_the_units_the_page_uses() -> None:
    assert _value("30 s") == timedelta(seconds=30)
    assert _value("1 min") == timedelta(minutes=1)
    assert _value("24 h") == timedelta(hours=24)
    assert _value("3") == 3
