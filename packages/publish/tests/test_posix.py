"""Publish and resolve on a POSIX root: isolation, create-only entries, and no half saves."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from jobdispatch.errors import Invalid
from jobdispatch.testing import eventually
from jobdispatch_publish import layout, posix
from jobdispatch_publish.errors import AlreadyPublished, Corrupt
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.prune import prune
from jobdispatch_publish.publish import publish
from jobdispatch_publish.resolve import MARKER, newest, resolve
from jobdispatch_publish.store import Exists
from publish_helpers import make_save, race

JOB = "job-7"


@pytest.fixture
def store(tmp_path: Path) -> PosixStore:
    root = tmp_path / "root"
    root.mkdir()
    return PosixStore(root)


def ident(submission: int = 1, execution: str = "0") -> Identity:
    return Identity(JOB, submission, execution)


def test_create_only_refuses_an_existing_key_and_keeps_the_first(store: PosixStore) -> None:
    store.create("a/b.json", b"first")
    with pytest.raises(Exists):
        store.create("a/b.json", b"second")
    assert store.read("a/b.json") == b"first"
    assert list(store.keys("a/")) == ["a/b.json"]  # no temporary file left behind


def test_publish_copies_into_a_fresh_execution_folder_and_resolves(
    store: PosixStore, tmp_path: Path
) -> None:
    save = make_save(tmp_path / "saves/step-10", {"model.bin": 1000, "opt/state.bin": 10})
    result = publish(store, ident(), save, 10)
    assert result.written
    entry = result.entry
    assert entry.data.startswith(f"{JOB}/executions/1/0/step-10.")
    assert {f.path for f in entry.files} == {"model.bin", "opt/state.bin", "COMPLETE"}
    found = resolve(store, JOB)
    assert found is not None
    assert found.path == store.root / entry.data
    assert (found.path / "model.bin").read_bytes() == (save / "model.bin").read_bytes()


def test_republishing_ones_own_step_is_a_no_op(store: PosixStore, tmp_path: Path) -> None:
    save = make_save(tmp_path / "s", {"m": 10})
    first = publish(store, ident(), save, 5)
    again = publish(store, ident(), save, 5)
    assert not again.written
    assert again.entry == first.entry
    assert len(list(store.children(f"{JOB}/executions/1/0/"))) == 1  # nothing uploaded twice


def test_another_execution_cannot_publish_the_same_step(store: PosixStore, tmp_path: Path) -> None:
    save = make_save(tmp_path / "s", {"m": 10})
    publish(store, ident(1, "0"), save, 5)
    with pytest.raises(AlreadyPublished, match="already published by submission 1 execution 0"):
        publish(store, ident(2, "0"), save, 5)
    assert not list(store.keys(f"{JOB}/executions/2/"))  # refused before any data moved


def test_two_writers_racing_for_one_step_exactly_one_wins(
    store: PosixStore, tmp_path: Path
) -> None:
    for step in range(5):
        saves = [make_save(tmp_path / f"w{i}/{step}", {"m": 50_000}) for i in range(2)]
        calls = [
            functools.partial(publish, store, ident(1, str(i)), saves[i], step) for i in range(2)
        ]
        winners, losers = race(calls, AlreadyPublished)
        assert (len(winners), len(losers)) == (1, 1)
        assert "already published by submission 1 execution" in str(losers[0])
        entry = newest(store, JOB)
        assert entry == winners[0].entry
        # The loser's data was removed; only the winner's folder holds this step.
        folders = [f for e in ("0", "1") for f in store.children(f"{JOB}/executions/1/{e}/")]
        assert sum(f"/step-{step}." in f for f in folders) == 1


def test_resolve_picks_the_newest_step_across_executions(store: PosixStore, tmp_path: Path) -> None:
    plan = [
        ((1, "0"), 100),
        ((1, "0"), 200),
        ((1, "1"), 300),
        ((2, "0"), 250),
        ((2, "0"), 400),
        ((3, "7"), 350),
    ]
    for (sub, ex), step in plan:
        publish(
            store,
            ident(sub, ex),
            make_save(tmp_path / f"{sub}-{ex}-{step}", {"m": step.to_bytes(4, "big")}),
            step,
        )
    found = resolve(store, JOB)
    assert found is not None
    assert (found.entry.step, found.entry.submission, found.entry.execution) == (400, 2, "0")
    assert (found.path / "m").read_bytes() == (400).to_bytes(4, "big")


def test_resolve_into_links_the_files_and_survives_pruning(
    store: PosixStore, tmp_path: Path
) -> None:
    publish(store, ident(), make_save(tmp_path / "a", {"m": b"old"}), 1)
    publish(store, ident(), make_save(tmp_path / "b", {"m": b"new"}), 2)
    dest = tmp_path / "resume"
    found = resolve(store, JOB, into=dest)
    assert found is not None
    assert found.path == dest
    assert (dest / "m").read_bytes() == b"new"
    assert (dest / MARKER).is_file()
    # Resolving again into the same folder reuses it; a different checkpoint there is refused.
    assert resolve(store, JOB, into=dest) == found
    publish(store, ident(), make_save(tmp_path / "c", {"m": b"newer"}), 3)
    with pytest.raises(Invalid, match="not empty"):
        resolve(store, JOB, into=dest)


def test_nothing_published_resolves_to_none(store: PosixStore) -> None:
    assert resolve(store, JOB) is None


def test_in_place_publication_of_a_save_in_the_executions_own_folder(store: PosixStore) -> None:
    own = store.root / layout.execution_prefix(ident()) / "step-30"
    make_save(own, {"m": 10})
    result = publish(store, ident(), own, 30)
    assert result.entry.data == f"{JOB}/executions/1/0/step-30/"
    other = store.root / layout.execution_prefix(ident(1, "9")) / "step-31"
    make_save(other, {"m": 10})
    with pytest.raises(Invalid, match="not in this execution's folder"):
        publish(store, ident(), other, 31)


def test_missing_published_data_is_reported_as_corrupt(store: PosixStore, tmp_path: Path) -> None:
    entry = publish(store, ident(), make_save(tmp_path / "a", {"m": 10}), 1).entry
    (store.root / entry.data / "m").unlink()
    with pytest.raises(Corrupt, match="missing"):
        resolve(store, JOB, into=tmp_path / "resume")
    assert not (tmp_path / "resume").exists()


def test_a_save_changing_during_publication_is_refused(store: PosixStore, tmp_path: Path) -> None:
    save = make_save(tmp_path / "s", {"m": 10})

    class Touching(PosixStore):
        def put_files(self, files, prefix, progress=None):  # type: ignore[no-untyped-def]
            records = super().put_files(files, prefix, progress)
            (save / "m").write_bytes(b"changed!!!!")
            return records

    with pytest.raises(Invalid, match="changed while it was being published"):
        publish(Touching(store.root), ident(), save, 1)
    assert resolve(store, JOB) is None


def _publish_cmd(root: Path, save: Path, step: int, execution: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "jobdispatch_publish", "publish", str(save), "--step", str(step),
        "--root", str(root), "--job", JOB, "--submission", "1", "--execution", execution, *extra,
    ]  # fmt: skip


def test_a_writer_killed_mid_copy_leaves_nothing_resolvable(
    store: PosixStore, tmp_path: Path
) -> None:
    save = make_save(tmp_path / "big", {"a.bin": 8 << 20, "b.bin": 8 << 20})
    proc = subprocess.Popen(_publish_cmd(store.root, save, 9, "0", "--max-bandwidth", "2M"))
    folder = store.root / JOB / "executions/1/0"
    eventually(
        lambda: folder.is_dir() and [p.name for p in folder.iterdir()],
        "the publish to start copying (a .partial file)",
        holds=lambda names: names and any(n.endswith(".partial") for n in names),
    )
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    assert resolve(store, JOB) is None
    assert list(store.keys(f"{JOB}/log/")) == []
    # The step is still free for the next execution, and prune clears what was left.
    assert publish(store, ident(1, "1"), make_save(tmp_path / "small", {"m": 1}), 9).written
    report = prune(store, JOB, keep_last=1, grace=0)
    assert report.unfinished == 1
    assert not any(p.name.startswith(".") for p in (store.root / JOB / "executions/1/0").iterdir())


# ------------------------------------------------------------------ folders emptied meanwhile


def test_ranks_resolving_one_step_together_never_trip_over_each_others_pins(
    store: PosixStore, tmp_path: Path
) -> None:
    """Every rank of a job resolves at once, and each pins the step under one folder that the
    last unpin removes: a write into it, or a sync of it, lost the folder under it about once
    in 160 resolves (a DDP job's rank 0 failing at its start on Slurm, in CI)."""
    publish(store, ident(), make_save(tmp_path / "s", {"m": 10}), 80)

    def resolves() -> int:
        for _ in range(100):
            into = Path(tempfile.mkdtemp(dir=tmp_path))
            assert resolve(store, JOB, into=into) is not None
        return 100

    done, errors = race([resolves] * 4, Exception)
    assert errors == [] and done == [100] * 4, errors
    assert not (store.root / JOB / "pins").exists()  # every pin gone, and its folders


def test_a_write_into_a_folder_removed_as_it_was_made_makes_it_again(
    store: PosixStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window the race above hits, made certain: the folder is removed (by another
    process's delete, which empties it) between being made and being written into."""
    made = posix._makedirs
    removed: list[Path] = []

    def made_then_removed(path: Path) -> None:
        made(path)
        if not removed:
            removed.append(path)
            path.rmdir()

    monkeypatch.setattr(posix, "_makedirs", made_then_removed)
    store.write(f"{JOB}/pins/000000000000000080/h", b"{}")
    assert removed and store.read(f"{JOB}/pins/000000000000000080/h") == b"{}"


def test_a_delete_whose_emptied_folder_another_delete_removed_does_not_fail(
    store: PosixStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.write("a/b/c", b"1")
    from jobdispatch.durable import fsync_dir as synced

    calls: list[Path] = []

    def gone_first(path: Path) -> None:
        calls.append(Path(path))
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        synced(path)

    monkeypatch.setattr(posix, "fsync_dir", gone_first)
    store.delete(["a/b/c"])
    assert calls and not (store.root / "a").exists()
