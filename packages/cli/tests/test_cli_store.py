"""The command and a store it cannot fully read: a truncated data file, one damaged record."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import pytest

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)
JobFile = Callable[..., Path]


def _submit(invoke: Invoke, store: Path, job_file: JobFile, n: int) -> list[str]:
    jobs = []
    for i in range(n):
        ran = invoke(
            "--store", str(store), "submit", str(job_file(["true"], name=f"j{i}")), "--json"
        )
        assert ran.code == 0, ran.err
        jobs.append(ran.json()["job"])
    return jobs


def _flip_header_bit(store: Path, job: str) -> None:
    """One bit of the job's stored header flipped, as a failing disk would."""
    env = lmdb.open(str(store), max_dbs=10)
    with env.begin(write=True) as txn:
        jobs, headers = env.open_db(b"jobs", txn=txn), env.open_db(b"headers", txn=txn)
        seq = bytes(txn.get(job.encode(), db=jobs))[:8]
        value = bytearray(txn.get(seq, db=headers))
        value[len(value) // 2] ^= 0x01
        txn.put(seq, bytes(value), db=headers)
    env.close()


def test_list_shows_every_readable_job_and_names_the_damaged_one(
    invoke: Invoke, job_file: JobFile, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    first, bad, last = _submit(invoke, store, job_file, 3)
    _flip_header_bit(store, bad)
    for args in ((), ("--active",), ("--state", "pending")):
        ran = invoke("--store", str(store), "list", *args)
        assert ran.code == 8, (ran.out, ran.err)
        assert first in ran.out and last in ran.out and bad not in ran.out
        assert f"record {bad} revision 0 (header)" in ran.err and "damaged" in ran.err
    ran = invoke("--store", str(store), "list", "--json")
    assert ran.code == 8
    assert [s["job"] for s in ran.json()] == [first, last]
    # status of the damaged job fails clearly; the others are untouched.
    ran = invoke("--store", str(store), "status", bad)
    assert ran.code == 8
    assert f"unreadable: record {bad} revision 0 (header)" in ran.err
    assert "Traceback" not in ran.err
    assert invoke("--store", str(store), "status", first).code == 0


def _jobdispatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobdispatch_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("command", [["list"], ["status", "x"], ["supervise", "--poll", "0.1"]])
def test_a_truncated_store_is_named_not_a_bus_error(
    invoke: Invoke, tmp_path: Path, command: list[str]
) -> None:
    # In processes of their own: before the fix, each died of SIGBUS (exit 135, no message).
    store = tmp_path / "store"
    fat = tmp_path / "fat.toml"
    lines = ['name = "fat"', 'command = ["true"]', "[env]"]
    fat.write_text("\n".join(lines + [f'V{i} = "{"x" * 1000}"' for i in range(20)]) + "\n")
    for _ in range(10):
        assert invoke("--store", str(store), "submit", str(fat)).code == 0
    data = store / "data.mdb"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    ran = _jobdispatch("--store", str(store), *command)
    assert ran.returncode == 8, (ran.returncode, ran.stderr)
    assert f"{data} is damaged" in ran.stderr and "truncated" in ran.stderr
