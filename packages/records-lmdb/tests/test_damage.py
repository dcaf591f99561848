"""A damaged store: a truncated ``data.mdb`` is refused before LMDB maps it, and a flipped bit in
a stored value is reported as damage, never decoded into a changed record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from jobdispatch.errors import Unreadable
from jobdispatch_conformance.records import evidence, make_header
from jobdispatch_records_lmdb import LmdbRecords

#: Opens the store given on the command line and lists and reads every job, in a process of its
#: own: before the fix a truncated file killed that process with SIGBUS, which would take the
#: test runner down with it.
_OPEN_AND_READ = """
import sys
from jobdispatch.errors import Unreadable
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
    ran = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_READ, str(damaged)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 8, (ran.returncode, ran.stdout, ran.stderr)
    assert f"{damaged / 'data.mdb'} is damaged" in ran.stdout
    assert "truncated" in ran.stdout or "meta page" in ran.stdout
    # Refusing changed nothing: no lock file was left, the bytes are the same.
    assert sorted(p.name for p in damaged.iterdir()) == ["data.mdb"]
    assert (damaged / "data.mdb").read_bytes() == data[:cut]


def test_a_whole_copy_still_opens(filled: tuple[Path, int], tmp_path: Path) -> None:
    source, _ = filled
    copy = tmp_path / "store"
    copy.mkdir()
    (copy / "data.mdb").write_bytes((source / "data.mdb").read_bytes())
    ran = subprocess.run(
        [sys.executable, "-c", _OPEN_AND_READ, str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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
