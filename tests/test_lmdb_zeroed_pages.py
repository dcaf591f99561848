"""Every page of a real LMDB store zeroed in turn: no damage may kill a command without a word.

A store of 40 jobs that have run (submitted with ``jobdispatch submit``, run to ``succeeded`` by
a ``jobdispatch supervise`` process on the local adapter, so the ``events`` tree has a branch
page and dozens of leaves) is copied once per page; the copy has that one page zeroed. Then what
``jobdispatch list`` and ``jobdispatch status`` do is checked on each copy:

* **every page, through the public API**, in a worker process: open the store, list it, read
  and fold every job (``list``), read and fold the first job (``status``). A worker that dies
  of a signal is counted and replaced, so the count of deaths is exact. Going through the
  command 150 times would take most of an hour on a loaded test machine; the API is what the
  command calls, and the exit code is the command's own mapping
  (``jobdispatch.exitcodes.code_for``);
* **a sample of pages, through the command itself**: some whose damage the API reported and
  some it read cleanly, each with ``list`` and ``status``.

What must hold: no death by a signal, no exit 5 ("try again": a damaged file never heals), every
damaged read exit 8 with a message naming the copy's ``data.mdb``, and every clean read
identical to the undamaged store's (a zeroed page that held nothing live).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cli_process
import pytest
from jobdispatch.testing import eventually

lmdb = pytest.importorskip("jobdispatch_records_lmdb")

JOBS = 40
PAGE = 4096
#: Bounds for the slow parts on a loaded machine: one command can take 10 s there.
COMMAND_TIMEOUT = 120.0
SETTLE_TIMEOUT = 600.0

#: Submits the jobs from one process (the command's own entry point, called in a loop), since
#: starting the command 40 times costs minutes on a loaded machine.
SUBMIT = textwrap.dedent("""
    import sys
    from jobdispatch_cli.main import cli
    store, folder, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(count):
        path = f"{folder}/r{i}.toml"
        with open(path, "w") as f:
            f.write(f'name = "r{i}"\\ncommand = ["true"]\\n')
        cli.main(args=["--store", store, "submit", path], standalone_mode=False)
""")

#: Reads each damaged copy as ``list`` and ``status`` do, one page after another, printing
#: ``start P`` before a page and one JSON line after it, so the parent knows which page a death
#: belongs to. Every clean read is compared with the undamaged store's.
WORKER = textwrap.dedent("""
    import json, os, shutil, sys
    from datetime import UTC, datetime
    from jobdispatch import fold
    from jobdispatch.errors import DispatchError, Invalid, Unreadable
    from jobdispatch.exitcodes import ExitCode, code_for
    from jobdispatch_records_lmdb import LmdbRecords

    source, scratch, first = sys.argv[1], sys.argv[2], sys.argv[3]
    pages = [int(p) for p in sys.argv[4].split(",")]
    now = datetime.now(UTC)

    def read(store, job):
        view = store.read(job)
        try:
            fold(view, now)
        except Unreadable:
            raise
        except Invalid as exc:
            raise Unreadable(f"record {job} does not fold: {exc.message}", job=job) from exc
        return view

    def look(path):
        listed, views, bad = None, {}, []
        status = [0, ""]
        try:
            with LmdbRecords(path, cache_events=0) as store:
                listed = list(store.list())
                for job in listed:
                    try:
                        views[job] = read(store, job)
                    except Unreadable as exc:
                        bad.append(str(exc))
                try:
                    read(store, first)
                except DispatchError as exc:
                    status = [code_for(exc, otherwise=ExitCode.USAGE), str(exc)]
        except DispatchError as exc:
            code = code_for(exc, otherwise=ExitCode.USAGE)
            return {"list": [code, [str(exc)]], "status": [code, str(exc)]}, {}, None
        return {"list": [8 if bad else 0, bad], "status": status}, views, listed

    _, base, base_listed = look(source)
    print("ready", flush=True)
    for page in pages:
        print(f"start {page}", flush=True)
        copy = os.path.join(scratch, f"p{page}")
        shutil.copytree(source, copy)
        with open(os.path.join(copy, "data.mdb"), "r+b") as f:
            f.seek(page * 4096)
            f.write(bytes(4096))
        try:
            got, views, listed = look(copy)
        except Exception as exc:  # not a DispatchError: the command would show a traceback
            got, views, listed = {"list": [1, [repr(exc)]], "status": [1, repr(exc)]}, {}, None
        changed = [j for j, v in views.items() if base.get(j) != v]
        if got["list"][0] == 0 and listed != base_listed:
            changed.append("the listing")
        got.update(page=page, changed=changed)
        print(json.dumps(got), flush=True)
        shutil.rmtree(copy)
""")


@dataclass
class RanStore:
    """The undamaged store, the environment the command runs in, and the first job's id."""

    root: Path
    store: Path
    env: dict[str, str]
    first: str
    pages: int
    listed: Any = None

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli_process.run(args, self.env, timeout=COMMAND_TIMEOUT)


def _active(ran: RanStore) -> list[Any] | None:
    done = ran.run("--store", str(ran.store), "list", "--active", "--json")
    return json.loads(done.stdout) if done.returncode == 0 else None


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> RanStore:
    root = tmp_path_factory.mktemp("ran")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBDISPATCH_")}
    env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_STATE_HOME=str(root / "state"))
    store = root / "st"
    (root / "jobs").mkdir()
    subprocess.run(
        [sys.executable, "-c", SUBMIT, str(store), str(root / "jobs"), str(JOBS)],
        env=env,
        check=True,
        capture_output=True,
        timeout=SETTLE_TIMEOUT,
    )
    ran = RanStore(root, store, env, first="", pages=0)
    with (root / "supervise.log").open("wb") as log:
        sup = subprocess.Popen(
            [*cli_process.command(), "--store", str(store), "supervise", "--poll", "0.3"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        eventually(
            lambda: _active(ran) == [], "every job to settle", within=SETTLE_TIMEOUT, every=2
        )
    finally:
        sup.send_signal(signal.SIGINT)
        sup.wait(timeout=COMMAND_TIMEOUT)
    listed = json.loads(ran.run("--store", str(store), "list", "--json").stdout)
    assert len(listed) == JOBS and {j["state"] for j in listed} == {"succeeded"}, listed
    ran.first, ran.listed = listed[0]["job"], listed
    ran.pages = (store / "data.mdb").stat().st_size // PAGE
    (store / "lock.mdb").unlink()  # each copy starts as a store at rest
    return ran


@dataclass
class Figures:
    """What zeroing each page did, counted the way the issue counts it."""

    pages: int = 0
    signals: list[int] = field(default_factory=list)
    codes: Counter[int] = field(default_factory=Counter)  # list's exit code, by page
    clean: list[int] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # anything that must not happen

    def __str__(self) -> str:
        return (
            f"pages {self.pages}, signals {len(self.signals)} {self.signals}, "
            f"rc 5 {self.codes[5]}, rc 8 {self.codes[8]}, clean {len(self.clean)}, "
            f"codes {dict(self.codes)}"
        )


def _judge(figures: Figures, result: dict[str, Any], data: str) -> None:
    page = result["page"]
    (code, messages), (status, said) = result["list"], result["status"]
    figures.codes[code] += 1
    if result["changed"]:
        figures.wrong.append(f"page {page}: read without a word but changed {result['changed']}")
    if code == 0:
        figures.clean.append(page)
    else:
        figures.damaged.append(page)
    for what, rc, texts in (("list", code, messages), ("status", status, [said])):
        if rc not in (0, 8):
            figures.wrong.append(f"page {page}: {what} exits {rc}: {texts}")
        elif rc == 8:
            figures.wrong += [
                f"page {page}: {what}'s message does not name {data}: {t}"
                for t in texts
                if data not in t
            ]


def _every_page(ran: RanStore, scratch: Path) -> Figures:
    """Zero every page but LMDB's two meta pages (checked when a store opens), in workers."""
    figures = Figures()
    todo = list(range(2, ran.pages))
    figures.pages = len(todo)
    while todo:
        worker = subprocess.Popen(
            [
                *(sys.executable, "-c", WORKER, str(ran.store), str(scratch), ran.first),
                ",".join(map(str, todo)),
            ],
            env=ran.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = worker.communicate(timeout=SETTLE_TIMEOUT)
        started = None
        for line in out.splitlines():
            if line.startswith("start "):
                started = int(line.split()[1])
            elif line.startswith("{"):
                result = json.loads(line)
                _judge(figures, result, str(scratch / f"p{result['page']}" / "data.mdb"))
                todo.remove(result["page"])
                started = None
        if worker.returncode != 0:
            assert started is not None, (worker.returncode, err[-2000:])
            if worker.returncode < 0:
                figures.signals.append(started)
            else:
                figures.wrong.append(f"page {started}: worker exit {worker.returncode}")
            figures.codes[128 - worker.returncode] += 1
            todo.remove(started)
            shutil.rmtree(scratch / f"p{started}", ignore_errors=True)
    return figures


@pytest.fixture(scope="module")
def figures(ran: RanStore, tmp_path_factory: pytest.TempPathFactory) -> Figures:
    return _every_page(ran, tmp_path_factory.mktemp("pages"))


def _spread(pages: list[int], count: int) -> list[int]:
    return [pages[len(pages) * k // count] for k in range(count)] if pages else []


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_every_zeroed_page_is_reported_or_harmless(figures: Figures) -> None:
    print(f"\nzeroed pages, through the API: {figures}")
    assert figures.pages > 100, figures
    assert not figures.signals, str(figures)
    assert not figures.codes[5], str(figures)
    assert not figures.wrong, (str(figures), figures.wrong[:20])
    # Neither kind may be missing, or the test would prove nothing: the events tree's leaves are
    # live, and so are pages that held nothing any more (older copies of rewritten pages).
    assert figures.damaged and figures.clean, str(figures)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_sample_of_zeroed_pages_through_the_command(
    ran: RanStore, figures: Figures, tmp_path: Path
) -> None:
    # Four pages whose zeroing the API found to matter (damaged, or a death), spread over the
    # file, and two it read cleanly: the command must agree, page for page.
    sample = sorted(
        set(_spread(sorted(figures.damaged + figures.signals), 4) + _spread(figures.clean, 2))
    )
    codes: Counter[int] = Counter()
    for page in sample:
        copy = tmp_path / f"p{page}"
        shutil.copytree(ran.store, copy)
        with (copy / "data.mdb").open("r+b") as f:
            f.seek(page * PAGE)
            f.write(bytes(PAGE))
        data = str(copy / "data.mdb")
        listed = ran.run("--store", str(copy), "list", "--json")
        status = ran.run("--store", str(copy), "status", ran.first)
        for what, done in (("list", listed), ("status", status)):
            codes[done.returncode] += 1
            assert done.returncode in (0, 8), (page, what, done.returncode, done.stderr[-2000:])
            if done.returncode == 8:
                assert data in done.stderr, (page, what, done.stderr[-2000:])
        assert (listed.returncode == 8) is (page in figures.damaged), page
        if listed.returncode == 0:
            assert json.loads(listed.stdout) == ran.listed, page
    print(f"\nzeroed pages {sample}, through the command: exit codes {dict(codes)}")
