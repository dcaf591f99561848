"""The command and a store it cannot fully read: a truncated data file, one damaged record."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
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
        found = txn.get(job.encode(), db=jobs)
        assert found is not None, f"{job} is not in the store"
        seq = bytes(found)[:8]
        stored = txn.get(seq, db=headers)
        assert stored is not None, f"{job} has no stored header"
        value = bytearray(stored)
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
    # The damaged job is in the JSON too, after the others, marked and with nothing guessed.
    assert [s["job"] for s in ran.json()] == [first, last, bad]
    assert [s.get("unreadable") is not None for s in ran.json()] == [False, False, True]
    marked = ran.json()[-1]
    assert marked == {"job": bad, "state": None, "unreadable": marked["unreadable"]}
    assert marked["unreadable"]["revision"] == 0
    assert f"record {bad} revision 0 (header)" in marked["unreadable"]["message"]
    # status of the damaged job fails clearly; the others are untouched.
    ran = invoke("--store", str(store), "status", bad)
    assert ran.code == 8
    assert f"unreadable: record {bad} revision 0 (header)" in ran.err
    assert "Traceback" not in ran.err
    assert invoke("--store", str(store), "status", first).code == 0


def _append_after_settled(store: Path, job: str) -> None:
    """A history the protocol cannot write (settled before any outcome), appended through the
    store's own API, so every value is well-formed and only the fold objects."""
    from datetime import UTC, datetime, timedelta

    from jobdispatch.records import events as ev
    from jobdispatch.types import Actor
    from jobdispatch_records_lmdb import LmdbRecords

    records = LmdbRecords(str(store))
    try:
        lease = records.acquire(job, "test", timedelta(minutes=1))
        now = datetime.now(UTC)
        settled = ev.Settled(at=now, by=Actor.supervisor("s"))
        records.append(job, [settled], expect_revision=0, owner=lease)
    finally:
        records.close()


def test_a_record_that_does_not_fold_is_unreadable_to_status_and_list_alike(
    invoke: Invoke, job_file: JobFile, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    first, bad = _submit(invoke, store, job_file, 2)
    _append_after_settled(store, bad)
    ran = invoke("--store", str(store), "status", bad)
    assert ran.code == 8, (ran.out, ran.err)  # was 2, "bad usage or input"
    assert f"record {bad} does not fold: record {bad} revision 1" in ran.err
    ran = invoke("--store", str(store), "list")
    assert ran.code == 8, (ran.out, ran.err)
    assert first in ran.out and f"record {bad} does not fold" in ran.err
    ran = invoke("--store", str(store), "list", "--json")
    assert ran.code == 8
    assert [(s["job"], s["state"]) for s in ran.json()] == [(first, "pending"), (bad, None)]
    assert "does not fold" in ran.json()[1]["unreadable"]["message"]
    assert invoke("--store", str(store), "status", first).code == 0


def _fat_job(path: Path, size: int = 20_000) -> Path:
    """A job file whose header takes ``size`` bytes or so (environment variables)."""
    lines = ['name = "fat"', 'command = ["true"]', "[env]"]
    lines += [f'V{i} = "{"x" * 1000}"' for i in range(size // 1000)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("command", [["list"], ["status", "x"], ["supervise", "--poll", "0.1"]])
def test_a_truncated_store_is_named_not_a_bus_error(
    invoke: Invoke, spawn: Callable[..., Any], tmp_path: Path, command: list[str]
) -> None:
    # In processes of their own: before the fix, each died of SIGBUS (exit 135, no message).
    store = tmp_path / "store"
    fat = _fat_job(tmp_path / "fat.toml")
    for _ in range(10):
        assert invoke("--store", str(store), "submit", str(fat)).code == 0
    data = store / "data.mdb"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    ran = spawn("--store", str(store), *command, timeout=120)
    assert ran.returncode == 8, (ran.returncode, ran.stderr)
    assert f"{data} is damaged" in ran.stderr and "truncated" in ran.stderr


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``mount(*options, source=...)`` mounts a file system at a new folder under tmp_path
    (root only: the test skips otherwise) and unmounts it at teardown."""
    mounted: list[Path] = []

    def do(*args: str, name: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a file system needs root")
        point = tmp_path / name
        point.mkdir()
        ran = subprocess.run(["mount", *args, str(point)], capture_output=True, check=False)
        if ran.returncode:
            pytest.skip(f"cannot mount here: {ran.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield do
    for point in reversed(mounted):
        subprocess.run(["umount", str(point)], check=True)


def test_a_store_on_a_read_only_mount_can_be_inspected(
    invoke: Invoke, job_file: JobFile, tmp_path: Path, mount: Callable[..., Path]
) -> None:
    store = tmp_path / "store"
    (job,) = _submit(invoke, store, job_file, 1)
    before = {p.name: p.read_bytes() for p in store.iterdir() if p.name != "lock.mdb"}
    ro = mount("--bind", str(store), name="ro")
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
    listed = invoke("--store", str(ro), "list", "--json")
    assert listed.code == 0, listed.err
    assert [s["job"] for s in listed.json()] == [job]
    status = invoke("--store", str(ro), "status", job, "--json")
    assert status.code == 0, status.err
    assert status.json()["state"] == "pending"
    # logs reads the record too: the job has no object yet, which is what it says.
    logs = invoke("--store", str(ro), "logs", job)
    assert logs.code == 3 and "no object yet" in logs.err
    # A command that writes says why it cannot, with the read-only code.
    for args in (("submit", str(job_file(["true"]))), ("cancel", job)):
        ran = invoke("--store", str(ro), *args)
        assert ran.code == 4, (args, ran.err)
        assert f"{ro}: cannot open the store for writing: it is on a read-only file system" in (
            ran.err
        )
    assert {p.name: p.read_bytes() for p in store.iterdir() if p.name != "lock.mdb"} == before


@pytest.mark.parametrize("left_kib", [0, 12], ids=["nothing-left", "a-little-left"])
def test_a_full_disk_is_named_by_submit_and_cancel(
    invoke: Invoke, job_file: JobFile, mount: Callable[..., Path], left_kib: int
) -> None:
    # With nothing left LMDB says ENOSPC; with a little left the write is cut short and LMDB
    # says "Input/output error". Both are a full disk, and both say so, naming the store.
    disk = mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", name="small")
    store = disk / "store"
    (job,) = _submit(invoke, store, job_file, 1)
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(free - left_kib * 1024, 0))
    fat = _fat_job(disk.parent / "fat.toml", 200_000)
    for args in (("submit", str(fat)), ("cancel", job, "--reason", "y" * 200_000)):
        ran = invoke("--store", str(store), *args)
        assert ran.code == 5, (args, ran.err)
        assert f"{store}: cannot commit: the disk holding the store is full" in ran.err
        assert "Traceback" not in ran.err
