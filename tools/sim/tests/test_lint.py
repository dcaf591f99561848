"""The simulated-path lint: the real path is clean, and each rule sees what it is for."""

from __future__ import annotations

from pathlib import Path

from jobdispatch_sim import lint

SAMPLE = """
import asyncio
import random
import threading
import time
from datetime import date, datetime
from random import choice

LOCK = threading.Lock()


class A:
    seen: set[str]

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rng = random.Random(3)

    def f(self, items: list[str]) -> list[str]:
        x = random.random()
        y = choice(items)
        t = time.time() + time.monotonic()
        d = datetime.now()
        e = date.today()
        out = [s for s in self.seen]
        for s in set(items):
            out.append(s)
        for s in sorted(set(items)):
            out.append(s)
        for s in self.seen:  # sim: ordered (only counted)
            out.append(s)
        self.lock.wait()
        threading.Thread(target=print).start()
        return list(self.seen | {"a"})
"""


def test_the_simulated_path_is_clean() -> None:
    findings = lint.check(lint.repo_root())
    assert findings == [], "\n".join(map(str, findings))
    assert len(list(lint.files(lint.repo_root()))) >= 15


def test_each_rule_finds_its_pattern_and_exemptions_hold(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    found = {(f.line, f.rule) for f in lint.check_file(path)}
    lines = SAMPLE.splitlines()

    def at(fragment: str) -> int:
        return next(i for i, line in enumerate(lines, start=1) if fragment in line)

    assert (at("import asyncio"), "thread") in found
    assert (at("LOCK = "), "thread") in found
    assert (at("self.lock = "), "thread") not in found
    assert (at("random.Random(3)"), "random") not in found
    assert (at("x = random.random()"), "random") in found
    assert (at("y = choice"), "random") in found
    assert (at("t = time.time()"), "clock") in found
    assert (at("d = datetime.now()"), "clock") in found
    assert (at("e = date.today()"), "clock") in found
    assert (at("out = [s for s in self.seen]"), "order") in found
    assert (at("for s in set(items)"), "order") in found
    assert (at("sorted(set(items))"), "order") not in found
    assert (at("# sim: ordered"), "order") not in found
    assert (at("self.lock.wait()"), "block") in found
    assert (at("threading.Thread"), "thread") in found
    assert (at("return list(self.seen"), "order") in found
