"""The JSON the commands print is the contract docs/reference/json.md documents (issue 33,
item 5): each ``<!-- contract: NAME: ARGS -->`` example there is compared with what
``jobdispatch ARGS --json`` prints, key for key at every level, so a renamed, added or removed
key fails here until the page says so. Before this, rules printed ``for_`` and history entries
``from_`` (attrs field names) where the job file says ``for``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "json.md"
#: What ``plan FILE`` adds to the plan object that ``status`` and ``submit`` print.
PLAN_COMMAND_ONLY = ("cluster", "extra", "pending", "sinks", "unknown_sinks")
BLOCK = re.compile(r"<!-- contract: (\w+): (.*?) -->\n```json\n(.*?)^```", re.M | re.S)

JOB = """\
name = "demo"
command = ["sh", "-c", "echo hi"]
[[recovery.rules]]
on = ["preempted"]
action = "hold"
for = "5m"
[[recovery.rules]]
on = ["node-lost"]
action = "resubmit"
budget = 2
"""


def _blocks() -> dict[str, tuple[str, Any]]:
    return {m[1]: (m[2], json.loads(m[3])) for m in BLOCK.finditer(PAGE.read_text())}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def _same_shape(example: Any, actual: Any, at: str, blocks: dict[str, tuple[str, Any]]) -> None:
    """``actual`` has the keys ``example`` shows, at every level, and no others."""
    if example == "<the plan>":  # the plan object: what ``plan FILE`` prints, less its own keys
        example = {k: v for k, v in blocks["plan"][1].items() if k not in PLAN_COMMAND_ONLY}
    if example is None or actual is None:
        return  # a key that may be absent is printed as null: its presence is what is checked
    assert _kind(actual) == _kind(example), f"{at}: {_kind(actual)}, documented {_kind(example)}"
    if isinstance(example, dict):
        if len(example) == 1 and next(iter(example)).startswith("<"):
            (entry,) = example.values()
            for key, value in actual.items():
                _same_shape(entry, value, f"{at}.{key}", blocks)
            return
        extra, missing = set(actual) - set(example), set(example) - set(actual)
        assert not extra and not missing, (
            f"{at or '(top)'}: printed but not documented {sorted(extra)}, "
            f"documented but not printed {sorted(missing)}"
        )
        for key, value in example.items():
            _same_shape(value, actual[key], f"{at}.{key}" if at else key, blocks)
    elif isinstance(example, list) and example:
        for i, item in enumerate(actual):
            _same_shape(example[0], item, f"{at}[{i}]", blocks)


@pytest.fixture
def printed(invoke: Invoke, home: Path) -> Callable[[str], Any]:
    """``jobdispatch ARGS --json``, parsed, with ``{job}`` a job that ran, ``{held}`` one held
    before it started and ``{file}`` the job file of both."""
    file = home / "demo.toml"
    file.write_text(JOB)
    ran = invoke("run", str(file), "--poll", "0.05")
    assert ran.code == 0, ran.out + ran.err
    submitted = invoke("submit", str(file), "--json")
    assert submitted.code == 0, submitted.err
    held = submitted.json()["job"]
    assert invoke("hold", held, "--for", "1h").code == 0
    words = {"job": ran.out.split()[1], "held": held, "file": str(file)}

    def run(args: str) -> Any:
        got = invoke(*args.format(**words).split(), "--json")
        assert got.code == 0, f"{args}: {got.err}"
        return got.json()

    return run


def test_the_page_documents_every_command_that_prints_json() -> None:
    assert set(_blocks()) == {
        "status",
        "plan",
        "submit",
        "cancel",
        "logs",
        "capabilities",
        "clusters",
        "plugins",
        "ps",
        "goodput",
        "status_goodput",
    }


def test_every_command_prints_what_the_page_documents(printed: Callable[[str], Any]) -> None:
    blocks = _blocks()
    order = sorted(blocks, key=lambda name: name == "cancel")  # cancel ends the held job
    for name in order:
        args, example = blocks[name]
        _same_shape(example, printed(args), "", blocks)
    status = blocks["status"][1]
    for job in printed("list"):
        _same_shape(status, job, "list[]", blocks)


def test_a_rule_and_a_transition_print_the_job_file_names(
    printed: Callable[[str], Any],
) -> None:
    status = printed("status {held}")
    rule = status["plan"]["rules"][0]["rule"]
    assert rule["for"] == 300.0 and "for_" not in rule
    assert [h["from"] for h in status["history"]] == ["pending"] and "from_" not in json.dumps(
        status
    )
