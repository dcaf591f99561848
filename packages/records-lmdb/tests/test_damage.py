"""A damaged store: a truncated ``data.mdb`` is refused before LMDB maps it, and a flipped bit in
a stored value is reported as damage, never decoded into a changed record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from jobdispatch.errors import NotFound, Unreadable
from jobdispatch.records.store import ListFilter
from jobdispatch_conformance.records import evidence, make_header
from jobdispatch_records_lmdb import LmdbRecords

#: Opens the store given on the command line and lists and reads every job, in a process of its
#: own: before the fix a truncated file killed that process with SIGBUS, which would take the
#: test runner down with it.
_OPEN_AND_READ = """
import sys
from jobdispatch.errors import NotFound, Unreadable
from jobdispatch.records.store import ListFilter
from jobdispatch_records_lmdb import LmdbRecords
try:
    with LmdbRecords(sys.argv[1]) as store:
        for job in store.list():
            store.read(job)
except Unreadable as exc:
    print(exc)
    sys.exit(8)
print("read everything")
"""


def _run(script: str, store: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run with the store's path in a fresh interpreter, as a new process opens it;
    its exit code and output, whatever they are."""
    return subprocess.run(
        [sys.executable, "-c", script, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _copy(source: Path, store: Path) -> Path:
    """A byte-for-byte copy of the data file of the store at ``source``, as the store ``store``."""
    store.mkdir()
    (store / "data.mdb").write_bytes((source / "data.mdb").read_bytes())
    return store


def _fill(path: Path, jobs: int = 12) -> int:
    """A store of a few hundred kilobytes (big headers spread over many pages); its size."""
    with LmdbRecords(path) as store:
        for i in range(jobs):
            header = make_header(f"job-{i}", name="x" * 20_000)
            store.create(header, [evidence(n, detail="y" * 500) for n in range(5)])
    return (path / "data.mdb").stat().st_size


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("filled")
    return path, _fill(path)


@pytest.mark.parametrize("fraction", [0.9, 0.5, 0.25, 0.01, 0.003])
def test_a_truncated_data_file_is_refused_naming_it(
    filled: tuple[Path, int], tmp_path: Path, fraction: float
) -> None:
    source, size = filled
    damaged = tmp_path / "store"
    damaged.mkdir()
    data = (source / "data.mdb").read_bytes()
    # Page-aligned and not: an interrupted copy stops anywhere.
    cut = int(size * fraction)
    (damaged / "data.mdb").write_bytes(data[:cut])
    ran = _run(_OPEN_AND_READ, damaged)
    assert ran.returncode == 8, (ran.returncode, ran.stdout, ran.stderr)
    assert f"{damaged / 'data.mdb'} is damaged" in ran.stdout
    assert "truncated" in ran.stdout or "meta page" in ran.stdout
    # Refusing changed nothing: no lock file was left, the bytes are the same.
    assert sorted(p.name for p in damaged.iterdir()) == ["data.mdb"]
    assert (damaged / "data.mdb").read_bytes() == data[:cut]


def test_a_whole_copy_still_opens(filled: tuple[Path, int], tmp_path: Path) -> None:
    source, _ = filled
    copy = _copy(source, tmp_path / "store")
    ran = _run(_OPEN_AND_READ, copy)
    assert (ran.returncode, ran.stdout.strip()) == (0, "read everything"), ran.stderr


def test_a_data_file_whose_meta_page_is_damaged_is_refused(tmp_path: Path) -> None:
    _fill(tmp_path, jobs=1)
    data = tmp_path / "data.mdb"
    raw = bytearray(data.read_bytes())
    page = int.from_bytes(raw[40:44], "little")
    raw[page + 16] ^= 0xFF  # the second meta page's magic number
    data.write_bytes(bytes(raw))
    with pytest.raises(Unreadable, match="meta page 1") as info:
        LmdbRecords(tmp_path)
    assert info.value.path == str(data)


def _stored_value(path: Path, db: bytes, index: int = 0) -> bytes:
    env = lmdb.open(str(path), max_dbs=10, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(db, create=False)) as txn:
            return bytes(list(txn.cursor().iternext(keys=False))[index])
    finally:
        env.close()


@pytest.mark.parametrize(("db", "index", "revision"), [(b"headers", 0, 0), (b"events", 1, 2)])
def test_every_bit_flip_in_a_stored_value_is_reported(
    tmp_path: Path, db: bytes, index: int, revision: int
) -> None:
    # One bit at a time, every bit of the value as it lies in data.mdb, read back through the
    # store: each flip must be reported as damage (or, were one harmless, decode unchanged).
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"), [evidence(1, detail="a"), evidence(2, detail="b")])
        written = store.read("j")
    value = _stored_value(tmp_path, db, index)
    data = tmp_path / "data.mdb"
    # The value lies in the file once: a flip there is what the store reads, not a stale copy.
    assert data.read_bytes().count(value) == 1
    offset = data.read_bytes().index(value)
    reported = 0
    fd = os.open(data, os.O_RDWR)
    try:
        with LmdbRecords(tmp_path, cache_events=0) as store:
            for bit in range(len(value) * 8):
                at = offset + bit // 8
                (byte,) = os.pread(fd, 1, at)
                os.pwrite(fd, bytes((byte ^ (1 << (bit % 8)),)), at)
                try:
                    got = store.read("j")
                except Unreadable as exc:
                    where = (exc.job, exc.revision)
                else:
                    assert got == written, f"bit {bit} changed the record silently"
                    continue
                finally:
                    os.pwrite(fd, bytes((byte,)), at)
                assert where == ("j", revision)
                reported += 1
            assert store.read("j") == written
    finally:
        os.close(fd)
    assert reported == len(value) * 8


def _raw(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), max_dbs=10)


def test_a_record_whose_jobs_row_is_gone_reads_as_damaged(tmp_path: Path) -> None:
    # Its header and events remain, and the order index still lists it: leaving it out of the
    # listing, or answering "no record", would lose a job without a word.
    with LmdbRecords(tmp_path) as store:
        for job in ("a", "b", "c"):
            store.create(make_header(job), [evidence(1)])
    env = _raw(tmp_path)
    try:
        with env.begin(write=True) as txn:
            assert txn.delete(b"b", db=env.open_db(b"jobs", txn=txn))
    finally:
        env.close()
    with LmdbRecords(tmp_path) as store:
        assert list(store.list()) == ["a", "b", "c"]
        assert list(store.list(ListFilter(settled=False))) == ["a", "b", "c"]
        with pytest.raises(Unreadable, match="jobs index is gone") as info:
            store.read("b")
        assert (info.value.job, info.value.path) == ("b", str(tmp_path / "data.mdb"))
        assert str(tmp_path / "data.mdb") in str(info.value)
        assert [type(a).__name__ for a in store.read_many(["a", "b", "c"])] == [
            "View",
            "Unreadable",
            "View",
        ]
        with pytest.raises(NotFound):
            store.read("never-made")


def _leaf_pages_holding(data: bytes, key: bytes, page: int = 4096) -> list[int]:
    """The leaf pages (LMDB's page flags at offset 10: 0x02) on which ``key`` is written,
    stale copies included: zeroing them all surely zeroes the live one."""
    found = []
    for n in range(2, len(data) // page):
        body = data[n * page : (n + 1) * page]
        if int.from_bytes(body[10:12], "little") & 0x02 and key in body:
            found.append(n)
    return found


#: Lists a store and reads every job in one batch, printing a line a job: the digest of its
#: view, or its Unreadable's path and message. Before the fix a zeroed page could abort the
#: process inside LMDB, so it runs in a process of its own.
_READ_EACH = """
import hashlib, json, sys
from jobdispatch.errors import Unreadable
from jobdispatch_records_lmdb import LmdbRecords
with LmdbRecords(sys.argv[1], cache_events=0) as store:
    jobs = list(store.list())
    for job, got in zip(jobs, store.read_many(jobs)):
        if isinstance(got, Unreadable):
            print(json.dumps([job, "unreadable", got.path, str(got)]))
        else:
            print(json.dumps([job, "view", hashlib.sha256(repr(got).encode()).hexdigest()]))
"""


def _read_each(path: Path) -> list[list[str]]:
    ran = _run(_READ_EACH, path)
    assert ran.returncode == 0, (ran.returncode, ran.stdout, ran.stderr[-2000:])
    return [json.loads(line) for line in ran.stdout.splitlines()]


def test_a_zeroed_page_of_events_is_damage_of_those_records_alone(tmp_path: Path) -> None:
    # LMDB finds the page of the wrong type and says MDB_CORRUPTED: damage, never "try again"
    # (Unavailable), and the jobs whose events lie elsewhere still read as they were.
    jobs = [f"job-{i}" for i in range(12)]
    with LmdbRecords(tmp_path) as store:
        for job in jobs:
            store.create(make_header(job), [evidence(n, detail="e" * 300) for n in range(8)])
    before = {job: rest for job, *rest in _read_each(tmp_path)}
    victim = 6  # its record number is 7: creation order
    data = tmp_path / "data.mdb"
    first_event = (victim + 1).to_bytes(8, "big") + (1).to_bytes(8, "big")
    pages = _leaf_pages_holding(data.read_bytes(), first_event)
    assert pages
    with data.open("r+b") as f:
        for n in pages:
            f.seek(n * 4096)
            f.write(bytes(4096))
    after = _read_each(tmp_path)
    assert [job for job, *_ in after] == jobs
    damaged = [job for job, kind, *_ in after if kind == "unreadable"]
    assert jobs[victim] in damaged
    assert len(damaged) < len(jobs) // 2, damaged
    for job, kind, *rest in after:
        if kind == "unreadable":
            path, message = rest
            assert path == str(data) and str(data) in message, message
        else:
            assert ["view", *rest] == before[job], job


#: Opens a store, reads it, truncates its data file to the two meta pages, and reads again:
#: before the check it died of SIGBUS, so it runs in a process of its own.
_TRUNCATE_UNDER = """
import os, sys
from jobdispatch.errors import NotFound, Unreadable
from jobdispatch.records.store import ListFilter
from jobdispatch_records_lmdb import LmdbRecords
with LmdbRecords(sys.argv[1], cache_events=0) as store:
    jobs = list(store.list())
    store.read(jobs[0])
    os.truncate(os.path.join(sys.argv[1], "data.mdb"), 2 * 4096)
    try:
        print(list(store.list()), store.read(jobs[-1]))
    except Unreadable as exc:
        print(exc)
        sys.exit(8)
"""


def test_a_data_file_truncated_under_an_open_store_is_refused_naming_it(
    filled: tuple[Path, int], tmp_path: Path
) -> None:
    source, _ = filled
    copy = _copy(source, tmp_path / "store")
    ran = _run(_TRUNCATE_UNDER, copy)
    assert ran.returncode == 8, (ran.returncode, ran.stdout, ran.stderr)
    assert f"{copy / 'data.mdb'} is damaged" in ran.stdout and "truncated" in ran.stdout


def test_a_record_whose_order_row_is_gone_is_still_listed(tmp_path: Path) -> None:
    # Records are listed by number, so a number without its order row is seen; the header
    # still says whose record it is.
    with LmdbRecords(tmp_path) as store:
        for job in ("a", "b", "c"):
            store.create(make_header(job), [evidence(1)])
        before = store.read("b")
    env = _raw(tmp_path)
    try:
        with env.begin(write=True) as txn:
            assert txn.delete((2).to_bytes(8, "big"), db=env.open_db(b"order", txn=txn))
    finally:
        env.close()
    with LmdbRecords(tmp_path) as store:
        assert list(store.list()) == ["a", "b", "c"]
        assert store.read("b") == before
