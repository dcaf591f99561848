"""What is particular to the LMDB store: paths it refuses, versions, growth, sharing, plugins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import jsonschema
import lmdb
import pytest
from jobdispatch import plugins
from jobdispatch.clock import ManualClock
from jobdispatch.errors import (
    Invalid,
    LeaseLost,
    NotFound,
    ReadOnly,
    RevisionMoved,
    Unavailable,
    Unreadable,
)
from jobdispatch.records import rules
from jobdispatch.records.events import View
from jobdispatch.records.store import AppendRequest, Records
from jobdispatch_conformance.records import decision, evidence, make_header
from jobdispatch_records_lmdb import FORMAT, FORMAT_VERSION, LmdbRecords


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` and its bytes (None for a directory).

    ``lock.mdb`` is there or not, but its bytes are not compared: it is LMDB's table of live
    readers, which every process that opens an environment rewrites, read-only ones too.
    """
    found: dict[str, bytes | None] = {".": None} if root.is_dir() else {".": root.read_bytes()}
    if root.is_dir():
        for p in sorted(root.rglob("*")):
            lock = p.name == "lock.mdb"
            found[str(p.relative_to(root))] = None if p.is_dir() or lock else p.read_bytes()
    return found


def refused(path: Path, *words: str) -> None:
    """Opening ``path`` is Invalid naming it (and ``words``), and nothing under it changed."""
    before = snapshot(path)
    with pytest.raises(Invalid) as info:
        LmdbRecords(path)
    text = str(info.value)
    assert str(path) in text
    for word in words:
        assert word in text
    assert snapshot(path) == before


# ----------------------------------------------------------------------------- what it opens


def test_creates_a_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "records"
    with LmdbRecords(path) as store:
        store.create(make_header("j"))
    assert sorted(p.name for p in path.iterdir()) == ["data.mdb", "lock.mdb"]
    with LmdbRecords(path) as store:
        assert list(store.list()) == ["j"]


def test_an_empty_directory_becomes_a_store(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        assert list(store.list()) == []


def test_refuses_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "records"
    path.write_bytes(b"my precious notes\n" * 100)
    refused(path, "file")


def test_refuses_a_directory_with_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x").write_bytes(b"\0\1")
    refused(tmp_path, "notes.txt")


def test_refuses_a_file_named_like_lmdb_data(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(b"not an LMDB file at all" * 500)
    refused(tmp_path, "data.mdb")
    assert not (tmp_path / "lock.mdb").exists()


def test_refuses_a_foreign_lmdb_environment(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"somebody", b"else's data")
    env.close()
    refused(tmp_path, "marker")
    # Named databases, but not ours.
    other = tmp_path / "other"
    env = lmdb.open(str(other), max_dbs=4)
    db = env.open_db(b"meta")
    with env.begin(write=True, db=db) as txn:
        txn.put(b"format", b"someone-elses-format")
    env.close()
    refused(other, "marker")


def test_refuses_a_foreign_environment_without_leaving_a_lock_file(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()
    (tmp_path / "lock.mdb").unlink()
    refused(tmp_path, "marker")
    assert not (tmp_path / "lock.mdb").exists()


def test_refuses_a_store_of_a_newer_layout(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"), [evidence(1)])
    env = lmdb.open(str(tmp_path), max_dbs=10)
    meta = env.open_db(b"meta")
    with env.begin(write=True, db=meta) as txn:
        assert txn.get(b"format") == FORMAT
        txn.put(b"version", str(FORMAT_VERSION + 1).encode())
    env.close()
    refused(tmp_path, "newer", f"layout {FORMAT_VERSION + 1}")


def _rewrite_event(path: Path, revision: int, change: dict[str, object]) -> None:
    """Edit one stored event's JSON in place (the store must be closed)."""
    env = lmdb.open(str(path), max_dbs=10)
    events = env.open_db(b"events")
    with env.begin(write=True, db=events) as txn:
        keys = [bytes(k) for k in txn.cursor().iternext(values=False)]
        key = keys[revision - 1]
        stored = txn.get(key)
        assert stored is not None, f"no event at revision {revision}"
        body = json.loads(bytes(stored)[5:])  # the JSON after the value's frame
        body.update(change)
        txn.put(key, json.dumps(body).encode())  # bare JSON: as a version before frames wrote
    env.close()


def test_an_event_of_a_newer_schema_is_refused_naming_its_revision(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"), [evidence(1), evidence(2), evidence(3)])
    _rewrite_event(tmp_path, 2, {"v": 99})
    with LmdbRecords(tmp_path) as store:
        with pytest.raises(Unreadable) as info:
            store.read("j")
        assert (info.value.job, info.value.revision) == ("j", 2)
        assert "revision 2" in str(info.value)
        assert "record j" in str(info.value)
        # Refusing to read changes nothing: the record is still there, still refused.
        assert list(store.list()) == ["j"]
        with pytest.raises(Invalid):
            store.read("j")


def test_an_unknown_event_type_is_refused_naming_its_revision(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"), [evidence(1), evidence(2)])
    _rewrite_event(tmp_path, 1, {"type": "from-the-future"})
    with LmdbRecords(tmp_path) as store, pytest.raises(Unreadable, match="revision 1"):
        store.read("j")


def test_a_header_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"))
    env = lmdb.open(str(tmp_path), max_dbs=10)
    headers = env.open_db(b"headers")
    with env.begin(write=True, db=headers) as txn:
        key, value = next(iter(txn.cursor()))
        body = json.loads(bytes(value)[5:])
        body["schema"] = 7
        txn.put(key, json.dumps(body).encode())
    env.close()
    with LmdbRecords(tmp_path) as store, pytest.raises(Unreadable, match="revision 0"):
        store.read("j")


def test_refuses_job_ids_and_keys_it_cannot_store(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        with pytest.raises(Invalid, match="job id"):
            store.create(make_header("j" * 600))
        with pytest.raises(Invalid, match="idempotency key"):
            store.create(make_header("j"), idempotency_key="k" * 600)
        with pytest.raises(NotFound):
            store.read("j")


# ------------------------------------------------------------------------------ durability


def test_opened_for_synchronous_commits(tmp_path: Path) -> None:
    """The durability promise rests on these flags; a change to them must fail a test."""
    with LmdbRecords(tmp_path) as store:
        assert store._shared is not None
        flags = store._shared.env.flags()
    assert flags["sync"] is True
    assert flags["metasync"] is True
    assert flags["writemap"] is False
    assert flags["map_async"] is False
    assert flags["lock"] is True


# -------------------------------------------------------------------------------- the map


def test_the_map_grows_instead_of_failing_a_commit(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path, map_size=1 << 16) as store:
        store.create(make_header("j"))
        revision = 0
        for i in range(40):
            batch = [evidence(i * 100 + k, detail="y" * 2000) for k in range(25)]
            revision = store.append("j", batch, expect_revision=revision)
        assert store._shared is not None
        assert store._shared.env.info()["map_size"] > 1 << 16
        assert store.read("j").revision == 1000


GROWER = """
import sys
from jobdispatch_conformance.records import evidence
from jobdispatch_records_lmdb import LmdbRecords
store = LmdbRecords(sys.argv[1])
revision = int(sys.argv[2])
for i in range(30):
    batch = [evidence(i, detail="z" * 4000) for _ in range(20)]
    revision = store.append("j", batch, expect_revision=revision)
print(revision)
"""


def test_another_process_growing_the_map_is_adopted(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path, map_size=1 << 16) as store:
        store.create(make_header("j"), [evidence(0)])
        assert store.read("j").revision == 1
        out = subprocess.run(
            [sys.executable, "-c", GROWER, str(tmp_path), "1"],
            check=True,
            capture_output=True,
            text=True,
        )
        assert int(out.stdout) == 601
        # This process's map is still the small one: LMDB says MDB_MAP_RESIZED, the store
        # adopts the new size and goes on, for reads and for writes.
        assert store.read("j").revision == 601
        assert store.append("j", [evidence(1)], expect_revision=601) == 602


# -------------------------------------------------------------------- sharing and closing


def test_stores_on_one_path_in_one_process_share_the_environment(tmp_path: Path) -> None:
    first = LmdbRecords(tmp_path)
    second = LmdbRecords(tmp_path / ".")
    assert first._shared is second._shared
    first.create(make_header("j"))
    lease = second.acquire("j", "a", timedelta(seconds=60))
    first.close()
    # The environment stays open for the store still using it.
    assert second.append("j", [decision(1)], expect_revision=0, owner=lease) == 1
    second.close()
    second.close()  # closing twice is harmless
    with pytest.raises(Unavailable, match="closed"):
        second.read("j")


def test_readers_do_not_block_the_writer(tmp_path: Path) -> None:
    """Another process holds a read transaction open throughout; commits go on, and its
    snapshot keeps what it saw."""
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"))
        reader = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import lmdb, sys\n"
                "env = lmdb.open(sys.argv[1], max_dbs=10, readonly=True)\n"
                "jobs = env.open_db(b'jobs', create=False)\n"
                "txn = env.begin(db=jobs)\n"
                "before = txn.get(b'j')\n"
                "print('reading', flush=True)\n"
                "sys.stdin.readline()\n"
                "print(txn.get(b'j') == before, flush=True)\n",
                str(tmp_path),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert reader.stdout is not None and reader.stdin is not None
        assert reader.stdout.readline().strip() == "reading"
        revision = 0
        for i in range(50):
            revision = store.append("j", [evidence(i)], expect_revision=revision)
        assert revision == 50
        out, _ = reader.communicate("go\n", timeout=60)
        assert out.strip() == "True"


def test_a_conditional_write_is_one_transaction(tmp_path: Path) -> None:
    """Two stores on one directory (as two processes would be): the second, behind, loses."""
    with LmdbRecords(tmp_path) as a, LmdbRecords(tmp_path) as b:
        a.create(make_header("j"))
        assert a.append("j", [evidence(1)], expect_revision=0) == 1
        with pytest.raises(RevisionMoved):
            b.append("j", [evidence(2)], expect_revision=0)


def test_the_store_is_fenced_by_the_shared_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fencing is ``jobdispatch.records.rules.check_owner``, looked up at each call: with the
    rule reverted (as the simulator's no-fencing mutant reverts it), a stale lease's decision
    lands here too, so the mutant guards this store as well as the memory store."""
    clock = ManualClock()
    with LmdbRecords(tmp_path, clock=clock) as store:
        store.create(make_header("j"))
        stale = store.acquire("j", "a", timedelta(seconds=10))
        clock.advance(10)
        store.acquire("j", "b", timedelta(seconds=10))
        with pytest.raises(LeaseLost):
            store.append("j", [decision(1)], expect_revision=0, owner=stale)
        monkeypatch.setattr(rules, "check_owner", lambda *args: None)
        assert store.append("j", [decision(1)], expect_revision=0, owner=stale) == 1


# ------------------------------------------------------------------------------- plugins


def test_found_through_the_plugin_manager(tmp_path: Path) -> None:
    entry = plugins.load().registry("record-store").get("lmdb")
    assert entry.schema is not None
    config = {"path": str(tmp_path / "records")}
    jsonschema.validate(config, entry.schema)
    for bad in ({}, {"path": 3}, {"path": "x", "map_size": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, entry.schema)
    store = entry.factory(config)
    try:
        assert isinstance(store, LmdbRecords)
        assert isinstance(store, Records)
        store.create(make_header("j"))
        assert list(store.list()) == ["j"]
    finally:
        store.close()


# ------------------------------------------------------------------------- decoded cache


def test_rereads_see_what_others_appended(tmp_path: Path) -> None:
    """A store's decoded cache never hides what another store (or process) committed."""
    with (
        LmdbRecords(tmp_path) as reader,
        LmdbRecords(tmp_path, cache_events=0) as uncached,
        LmdbRecords(tmp_path) as writer,
    ):
        writer.create(make_header("j"), [evidence(0)])
        revision = 1
        for step in range(1, 30):
            view = reader.read("j")
            assert view == uncached.read("j")
            assert view.revision == revision
            batch = [evidence(step * 10 + k) for k in range(step % 4)]
            revision = writer.append("j", batch, expect_revision=revision)
        assert reader.read("j").events == tuple(
            evidence(n) for n in [0] + [s * 10 + k for s in range(1, 30) for k in range(s % 4)]
        )


def test_a_writer_reads_its_own_commits_without_decoding_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What this store created and appended is cached as stored (the key recorded in the
    header, tokens stamped: decisions carry the lease's, evidence none whatever it was given),
    so the writer's next read decodes nothing and answers what the disk holds."""
    import jobdispatch.codec

    decoded: list[int] = []
    real = jobdispatch.codec.decode_event

    def counting(*args: object, **kwargs: object) -> object:
        decoded.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    clock = ManualClock()
    with LmdbRecords(tmp_path, clock) as writer, LmdbRecords(tmp_path, cache_events=0) as disk:
        writer.create(make_header("j"), [evidence(0), decision(1)], idempotency_key="k-1")
        writer.create(make_header("other"))
        lease = writer.acquire("j", "sup", timedelta(seconds=30))
        requests = [
            AppendRequest(
                job="j", events=(decision(2), evidence(3)), expect_revision=2, owner=lease
            ),
            AppendRequest(job="other", events=(evidence(1),), expect_revision=5),  # refused
        ]
        monkeypatch.setattr(jobdispatch.codec, "decode_event", counting)
        answers = writer.append_many(requests)
        assert answers[0] == 4
        mine = writer.read_many(["j", "other"])
        assert decoded == [], "the writer decoded what it had just written"
        monkeypatch.undo()
        assert mine == disk.read_many(["j", "other"])
        view = mine[0]
        assert isinstance(view, View)
        assert view.header.idempotency_key == "k-1"
        assert [e.token for e in view.events] == [None, rules.CREATOR_TOKEN, lease.token, None]


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path, cache_events=25) as store:
        for name, size in (("a", 10), ("b", 10), ("c", 30), ("d", 10)):
            store.create(make_header(name), [evidence(i) for i in range(size)])
            assert store.read(name).revision == size
        assert store._decoded._size <= 25
        assert [store.read(n).revision for n in "abcd"] == [10, 10, 30, 10]


# ------------------------------------------------------------------------------- read-only


def test_read_only_reads_and_refuses_every_write(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as store:
        store.create(make_header("j"), [evidence(1)])
        written = store.read("j")
    data = (tmp_path / "data.mdb").read_bytes()
    with LmdbRecords(tmp_path, readonly=True) as store:
        assert store.read("j") == written
        assert list(store.list()) == ["j"]
        for write in (
            lambda: store.create(make_header("k")),
            lambda: store.append("j", [evidence(2)], expect_revision=1),
            lambda: store.acquire("j", "h", timedelta(seconds=5)),
        ):
            with pytest.raises(ReadOnly, match="opened read-only"):
                write()
    assert (tmp_path / "data.mdb").read_bytes() == data


def test_read_only_creates_nothing_where_there_is_no_store(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no record store"):
        LmdbRecords(tmp_path / "missing", readonly=True)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(NotFound, match="no record store"):
        LmdbRecords(tmp_path, readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_read_only_beside_a_writable_store_in_one_process(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path) as writer:
        writer.create(make_header("j"))
        # A reader shares the writable environment already open ...
        with LmdbRecords(tmp_path, readonly=True) as reader:
            assert list(reader.list()) == ["j"]
    # ... but a writer cannot be opened beside a read-only environment.
    with LmdbRecords(tmp_path, readonly=True), pytest.raises(ReadOnly, match="read-only"):
        LmdbRecords(tmp_path)


_READ_WITHOUT_WRITE_ACCESS = """
import sys
from jobdispatch.errors import ReadOnly
from jobdispatch_records_lmdb import LmdbRecords
try:
    LmdbRecords(sys.argv[1])
except ReadOnly as exc:
    print(exc)
with LmdbRecords(sys.argv[1], readonly=True) as store:
    print(list(store.list()), store.read("j").revision)
"""


def test_a_store_this_user_may_not_write_opens_read_only() -> None:
    # Another user's store (root: the test drops to nobody; root itself may write anything),
    # in a folder every user may enter (pytest's own are private to their user).
    with tempfile.TemporaryDirectory() as name:
        _open_without_write_access(Path(name))


def _open_without_write_access(tmp_path: Path) -> None:
    with LmdbRecords(tmp_path / "st") as store:
        store.create(make_header("j"), [evidence(1)])
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("dropping root to another user needs setpriv")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    for p in (tmp_path, tmp_path / "st"):
        p.chmod(0o755)
    for f in (tmp_path / "st").iterdir():
        f.chmod(0o644)
    ran = subprocess.run(
        [*prefix, sys.executable, "-c", _READ_WITHOUT_WRITE_ACCESS, str(tmp_path / "st")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The interpreter may live where only root may read: a venv over pyenv's, its shared
    # libpython under /root (3.12 and 3.13 here are built so). Then nobody cannot start it at all.
    cannot_start = ("Permission denied", "error while loading shared libraries")
    if ran.returncode and prefix and any(why in ran.stderr for why in cannot_start):
        pytest.skip(f"nobody cannot run this interpreter: {ran.stderr.strip()[-200:]}")
    # The checkout may lie under a folder only its owner may enter (a clone in a home of mode
    # 0700, or in `mktemp -d`): then nobody starts the interpreter but cannot import the
    # workspace's packages from it, and the test cannot be made as that user.
    if (
        ran.returncode
        and prefix
        and "ModuleNotFoundError: No module named 'jobdispatch" in ran.stderr
    ):
        pytest.skip(
            "nobody cannot import this checkout's packages (it lies under a folder other users "
            "may not enter)"
        )
    assert ran.returncode == 0, ran.stderr
    first, second = ran.stdout.strip().splitlines()
    assert "cannot open the store for writing: this user may not write" in first
    assert second == "['j'] 1"
