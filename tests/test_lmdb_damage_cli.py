"""An LMDB store damaged under the ``jobdispatch`` command: what it says, through real
subprocesses.

* A job whose row in the ``jobs`` index is gone, while its header and events remain, is named
  as unreadable by ``list`` and ``status`` (exit 8), never left out without a word.
* A ``data.mdb`` truncated under a running supervisor makes the supervisor stop with exit 8 and
  a message naming the file, not die of SIGBUS. One supervisor serves one store, and a store
  that lost part of its file cannot be served: exiting says so where a service manager sees it.
  The supervisor checks the file's length before each transaction; a truncation that lands in
  the middle of one can still kill it (spec 0002), so this test truncates while the supervisor
  is between polls, as it nearly always is.
"""

from __future__ import annotations

import os
from pathlib import Path

import lmdb
import pytest
from jobdispatch.testing import eventually
from test_cli_end_to_end import Home

pytest.importorskip("jobdispatch_records_lmdb")


def _submit(home: Home, store: Path, name: str, command: str) -> str:
    path = home.job_file(f"{name}.toml", f'name = "{name}"\ncommand = {command}\n')
    done = home.run("--store", str(store), "submit", path.as_posix(), "--json")
    assert done.returncode == 0, done.stderr
    listed = home.json("--store", str(store), "list")
    return str(next(j["job"] for j in listed if j["name"] == name))


def test_a_job_whose_index_row_is_gone_is_reported_unreadable(home: Home) -> None:
    store = home.root / "st"
    jobs = [_submit(home, store, name, '["true"]') for name in ("a", "b", "c")]
    env = lmdb.open(str(store), max_dbs=16)
    try:
        with env.begin(write=True) as txn:
            assert txn.delete(jobs[1].encode(), db=env.open_db(b"jobs", txn=txn))
    finally:
        env.close()
    listed = home.run("--store", str(store), "list")
    assert listed.returncode == 8, (listed.stdout, listed.stderr)
    assert jobs[0] in listed.stdout and jobs[2] in listed.stdout
    assert jobs[1] in listed.stderr and "jobs index" in listed.stderr, listed.stderr
    status = home.run("--store", str(store), "status", jobs[1])
    assert status.returncode == 8, (status.stdout, status.stderr)
    assert "jobs index" in status.stderr and str(store / "data.mdb") in status.stderr


def test_a_data_file_truncated_under_a_running_supervisor_stops_it_with_a_message(
    home: Home,
) -> None:
    store = home.root / "st"
    _submit(home, store, "done", '["true"]')
    supervisor = home.start("--store", str(store), "supervise", "--poll", "2", log="sup.log")
    eventually(
        lambda: home.json("--store", str(store), "list", "--active") == [], "the job to settle"
    )
    assert supervisor.poll() is None, (home.root / "sup.log").read_text()
    os.truncate(store / "data.mdb", 2 * 4096)  # the two meta pages: every tree is gone
    code = supervisor.wait(timeout=300)
    log = (home.root / "sup.log").read_text()
    assert code == 8, (code, log[-3000:])
    assert f"{store / 'data.mdb'} is damaged" in log and "truncated" in log, log[-3000:]
