"""What resolve hands over is the checkpoint that was published, and a root that is not there is
an error: the regressions of issue 14 item 3 (reliability report D3), on a POSIX root."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from jobdispatch.errors import Unreachable
from jobdispatch.exitcodes import ExitCode
from jobdispatch_publish import layout
from jobdispatch_publish.cli import main
from jobdispatch_publish.entry import Entry
from jobdispatch_publish.errors import Corrupt, RootUnavailable
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.posix import PosixStore
from jobdispatch_publish.publish import publish
from jobdispatch_publish.resolve import resolve
from jobdispatch_publish.watch import Watcher
from publish_helpers import make_save, watch_giving_up

JOB = "job-h"
MODEL = os.urandom(100_000)
OPTIM = os.urandom(1000)


@pytest.fixture
def store(tmp_path: Path) -> PosixStore:
    root = tmp_path / "root"
    root.mkdir()
    return PosixStore(root)


def ident(submission: int = 1) -> Identity:
    return Identity(JOB, submission, "0")


def _published(store: PosixStore, tmp_path: Path, step: int = 10) -> Entry:
    save = make_save(tmp_path / f"save-{step}", {"model.bin": MODEL, "optim.bin": OPTIM})
    return publish(store, ident(), save, step).entry


def test_rewriting_the_resume_copy_in_place_leaves_the_published_checkpoint_alone(
    store: PosixStore, tmp_path: Path
) -> None:
    _published(store, tmp_path)
    resume = tmp_path / "resume"
    assert resolve(store, JOB, into=resume) is not None
    # Execution 2 trains from its copy and saves into the folder it loaded from, in place.
    with open(resume / "model.bin", "r+b") as f:
        f.write(b"X" * 32)
    (resume / "optim.bin").write_bytes(b"short")
    later = resolve(store, JOB, into=tmp_path / "r3")
    assert later is not None
    assert (later.path / "model.bin").read_bytes() == MODEL
    assert (later.path / "optim.bin").read_bytes() == OPTIM
    plain = resolve(store, JOB)
    assert plain is not None
    assert (plain.path / "optim.bin").read_bytes() == OPTIM


def test_published_files_are_read_only_and_carry_their_digests(
    store: PosixStore, tmp_path: Path
) -> None:
    entry = _published(store, tmp_path)
    for record in entry.files:
        path = store.root / entry.data / record.path
        assert stat.S_IMODE(path.stat().st_mode) & 0o222 == 0, path
        assert record.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # The private copy is the caller's to write.
    found = resolve(store, JOB, into=tmp_path / "resume")
    assert found is not None
    assert os.access(found.path / "model.bin", os.W_OK)
    assert found.checked == "sha256"


def _modes(top: Path) -> dict[str, set[int]]:
    """The permission bits of every file and every folder under ``top`` (itself included)."""
    found: dict[str, set[int]] = {"files": set(), "folders": {stat.S_IMODE(top.stat().st_mode)}}
    for path in top.rglob("*"):
        kind = "folders" if path.is_dir() else "files"
        found[kind].add(stat.S_IMODE(path.stat().st_mode))
    return found


@pytest.mark.parametrize("umask", [0o022, 0o077])
@pytest.mark.parametrize("how", ["copied", "in place"])
def test_published_files_and_their_folders_follow_one_rule_under_any_umask(
    tmp_path: Path, umask: int, how: str
) -> None:
    """Issue 34.12: files were made 0444 whatever the umask while their folders kept it (0700
    under 077: world-readable files in private folders). One rule now: publishing takes write
    away and nothing else, so readers are the umask's choice for files and folders alike."""
    root = tmp_path / "root"
    root.mkdir()
    env = {
        **os.environ,
        "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
        "JOBDISPATCH_JOB": JOB,
        "JOBDISPATCH_SUBMISSION": "1",
        "JOBDISPATCH_EXECUTION": "0",
    }
    helper = [sys.executable, "-m", "jobdispatch_publish"]
    if how == "copied":
        save = tmp_path / "save"
    else:
        save = root / layout.execution_prefix(ident()) / "step-10"
    # The save as training would write it under this umask (a nested folder included).
    write = "import os, sys; os.makedirs(sys.argv[1] + '/sub'); "
    write += "[open(sys.argv[1] + n, 'wb').write(b'x' * 100) for n in ('/m.bin', '/sub/o.bin')]"
    subprocess.run([sys.executable, "-c", write, str(save)], umask=umask, check=True)
    done = subprocess.run(
        [*helper, "publish", str(save), "--step", "10", "--json"],
        env=env,
        umask=umask,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = root / json.loads(done.stdout)["data"]
    modes = _modes(data)
    assert modes == {"files": {0o444 & ~umask}, "folders": {0o777 & ~umask}}, {
        k: sorted(oct(m) for m in v) for k, v in modes.items()
    }


@pytest.mark.parametrize("damage", ["same size", "truncated"])
def test_plain_resolve_refuses_a_published_folder_changed_after_publication(
    store: PosixStore, tmp_path: Path, damage: str
) -> None:
    entry = _published(store, tmp_path)
    target = store.root / entry.data / "optim.bin"
    os.chmod(target, 0o644)  # what a zombie running as the owner could do
    target.write_bytes(b"Y" * len(OPTIM) if damage == "same size" else b"short")
    with pytest.raises(Corrupt, match=r"optim\.bin"):
        resolve(store, JOB)
    with pytest.raises(Corrupt, match=r"optim\.bin"):
        resolve(store, JOB, into=tmp_path / "resume")
    assert not (tmp_path / "resume").exists()


def test_an_into_folder_changed_after_it_was_fetched_is_not_reused(
    store: PosixStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _published(store, tmp_path)
    resume = tmp_path / "resume"
    assert resolve(store, JOB, into=resume) is not None
    assert resolve(store, JOB, into=resume) is not None  # untouched: reused as it is
    (resume / "optim.bin").write_bytes(b"junk\n")
    with pytest.raises(Corrupt, match="was changed after it was fetched"):
        resolve(store, JOB, into=resume)
    env = {
        "JOBDISPATCH_CHECKPOINT_ROOT": str(store.root),
        "JOBDISPATCH_JOB": JOB,
    }
    assert main(["resolve", "--into", str(resume)], env=env) == ExitCode.UNREADABLE
    assert "optim.bin" in capsys.readouterr().err
    (resume / ".jobdispatch-checkpoint.json").write_text("{torn")
    assert main(["resolve", "--into", str(resume)], env=env) == ExitCode.USAGE
    assert "is not empty and does not hold step 10" in capsys.readouterr().err


def test_an_entry_of_an_older_helper_without_digests_still_resolves_on_sizes(
    store: PosixStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entry = _published(store, tmp_path)
    legacy = attrs.evolve(entry, files=tuple(attrs.evolve(f, sha256=None) for f in entry.files))
    doc = json.loads(legacy.to_json())
    assert all("sha256" not in f for f in doc["files"])  # the shape older helpers wrote
    key = layout.entry_key(JOB, entry.step)
    (store.root / key).unlink()
    store.create(key, legacy.to_json())
    caplog.set_level(logging.WARNING)
    found = resolve(store, JOB, into=tmp_path / "resume")
    assert found is not None
    assert found.checked == "size"
    assert (found.path / "model.bin").read_bytes() == MODEL
    assert "without file digests" in caplog.text
    # Sizes are still checked.
    target = store.root / entry.data / "model.bin"
    os.chmod(target, 0o644)
    target.write_bytes(b"short")
    with pytest.raises(Corrupt, match="is 5 bytes, its publication entry says 100000"):
        resolve(store, JOB)


def test_a_malformed_digest_in_an_entry_is_reported() -> None:
    doc = {
        "format": 1, "job": JOB, "submission": 1, "execution": "0", "step": 1, "data": "d/",
        "files": [{"path": "m", "size": 1, "sha256": "not-hex"}], "published_at": "now",
    }  # fmt: skip
    with pytest.raises(Exception, match="sha256 'not-hex' is not 64 hex digits"):
        Entry.from_json(json.dumps(doc).encode(), key="k")


@pytest.mark.parametrize("kind", ["missing", "a file", "unreadable"])
def test_a_root_that_is_not_there_is_an_error_not_nothing_published(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    root = tmp_path / "ckpt"
    if kind == "a file":
        root.write_text("")
    elif kind == "unreadable":
        root.mkdir()
        real = os.access
        monkeypatch.setattr(
            os, "access", lambda p, mode, **kw: False if Path(p) == root else real(p, mode, **kw)
        )
    expected = {"missing": "does not exist", "a file": "is not a folder"}.get(
        kind, "cannot be read"
    )
    with pytest.raises(RootUnavailable, match=expected):
        resolve(PosixStore(root), JOB)
    env = {"JOBDISPATCH_CHECKPOINT_ROOT": str(root), "JOBDISPATCH_JOB": JOB}
    assert main(["resolve"], env=env) == ExitCode.ROOT_UNAVAILABLE
    err = capsys.readouterr().err
    assert expected in err
    assert "start fresh" not in err


def test_watch_gives_up_on_a_missing_root_with_its_exit_code(tmp_path: Path) -> None:
    saves = tmp_path / "saves"
    make_save(saves / "step-5", {"m": 10})
    env = {**os.environ, "JOBDISPATCH_CHECKPOINT_ROOT": str(tmp_path / "not-mounted")}
    out = watch_giving_up(saves, env, JOB)
    assert out.returncode == ExitCode.ROOT_UNAVAILABLE, out.stderr
    assert "watch gave up" in out.stderr
    assert "does not exist" in out.stderr


class _Flaky(PosixStore):
    """A root that is unreachable for its first ``failures`` checks (a stale NFS handle)."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures

    def check_root(self) -> None:
        if self.failures:
            self.failures -= 1
            msg = f"{self.root}: stale file handle"
            raise Unreachable(msg)
        super().check_root()


def test_watch_retries_what_can_heal_and_skips_a_save_that_cannot_be_published(
    store: PosixStore, tmp_path: Path
) -> None:
    saves = tmp_path / "saves"
    make_save(saves / "step-1", {"m": 10})
    inside = store.root / layout.execution_prefix(Identity(JOB, 9, "0")) / "step-2"
    make_save(inside, {"m": 10})
    (saves / "step-2").symlink_to(inside)  # resolves into another execution's folder
    watcher = Watcher(_Flaky(store.root, failures=2), ident(), saves)
    assert watcher.scan() == []
    assert watcher.scan() == []
    published = watcher.scan()
    assert [e.step for e in published] == [1]
    assert watcher.failures == 2
    assert list(watcher.skipped) == [2]
    assert "not in this execution's folder" in watcher.skipped[2]
    # The root vanishing later is not retried.
    store.root.rename(tmp_path / "gone")
    with pytest.raises(RootUnavailable):
        watcher.scan()
