"""A damaged publication entry is damage, exit 8 (unreadable), naming the entry; ``list`` still
shows the job's other steps: the regressions of issue 34 item 7, on a POSIX root and on the real
S3 server.

Before, an entry with a field missing stopped ``resolve`` and ``list`` with exit 3 (then "invalid
input": "fix the job
spec; retrying cannot help") and the bare ``KeyError`` text ``cannot be read: 'size'``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobdispatch.exitcodes import ExitCode
from jobdispatch_publish import layout
from jobdispatch_publish.cli import main
from jobdispatch_publish.config import Settings
from jobdispatch_publish.entry import Entry
from jobdispatch_publish.errors import DamagedEntry
from jobdispatch_publish.root import root_from
from jobdispatch_publish.store import Store
from jobdispatch_publish.stores import open_store
from publish_helpers import make_save

JOB = "job-damaged"


@pytest.fixture(params=["posix", pytest.param("s3", marks=pytest.mark.s3)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The helper's environment for one execution of the job, on either kind of root."""
    if request.param == "posix":
        base = request.getfixturevalue("clean_env")
        root = tmp_path / "root"
        root.mkdir()
        base = {**base, "JOBDISPATCH_CHECKPOINT_ROOT": str(root)}
    else:
        base = request.getfixturevalue("s3_env")
    return {
        **base,
        "JOBDISPATCH_JOB": JOB,
        "JOBDISPATCH_SUBMISSION": "1",
        "JOBDISPATCH_EXECUTION": "0",
    }


def store_of(env: dict[str, str]) -> Store:
    return open_store(root_from(env), Settings(), env)


def published(env: dict[str, str], tmp_path: Path, steps: list[int]) -> Store:
    for step in steps:
        save = make_save(tmp_path / f"save-{step}", {"model.bin": 1000}, marker=None)
        assert main(["publish", str(save), "--step", str(step)], env=env) == 0
    return store_of(env)


def damage(store: Store, step: int, change: Callable[[bytes], bytes]) -> str:
    """Rewrite the stored entry of ``step`` (entries are create-only: delete, then create)."""
    key = layout.entry_key(JOB, step)
    raw = store.read(key)
    assert raw is not None
    store.delete([key])
    store.create(key, change(raw))
    return store.describe(key)


def without_size(raw: bytes) -> bytes:
    return raw.replace(b'"size"', b'"sise"')  # as in the report (R7)


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "a field missing": without_size,
    "not JSON": lambda raw: raw[: len(raw) // 2],
    "a field of the wrong kind": lambda raw: raw.replace(b'"step": ', b'"step": "x", "_": '),
    "not an object": lambda _: b"[1, 2]",
    "not UTF-8": lambda raw: b"\xff\xfe" + raw,
}


@pytest.mark.parametrize("how", DAMAGES)
def test_resolve_of_a_damaged_newest_entry_exits_9_naming_it(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    store = published(env, tmp_path, [1, 2])
    where = damage(store, 2, DAMAGES[how])
    capsys.readouterr()
    for argv in (["resolve", "--into", str(tmp_path / "resume")], ["resolve"]):
        if argv == ["resolve"] and where.startswith("s3://"):
            continue  # an S3 root resolves only --into
        assert main(argv, env=env) == ExitCode.UNREADABLE, argv
        err = capsys.readouterr().err
        assert f"corrupt: publication entry {where} is damaged: " in err
        assert "cannot be read: '" not in err
    assert not (tmp_path / "resume").exists()


def test_resolve_names_the_missing_field(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = published(env, tmp_path, [1])
    damage(store, 1, without_size)
    capsys.readouterr()
    assert main(["resolve", "--into", str(tmp_path / "resume")], env=env) == ExitCode.UNREADABLE
    assert "is damaged: field files[0].size is missing" in capsys.readouterr().err


def test_list_shows_the_other_steps_and_marks_the_damaged_one(
    env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = published(env, tmp_path, [1, 2, 3])
    where = damage(store, 2, without_size)
    capsys.readouterr()
    assert main(["list"], env=env) == ExitCode.UNREADABLE
    out, err = capsys.readouterr()
    rows = [line.split() for line in out.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [
        ("3", "published"),
        ("2", "damaged"),
        ("1", "published"),
    ]
    assert f"publication entry {where} is damaged: field files[0].size is missing" in err
    assert main(["list", "--json"], env=env) == ExitCode.UNREADABLE
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["step"], d["state"]) for d in docs] == [
        (3, "published"),
        (2, "damaged"),
        (1, "published"),
    ]
    assert "files[0].size is missing" in docs[1]["problem"]
    # The damaged entry is not the newest: resolve answers with step 3 as before.
    assert main(["resolve", "--into", str(tmp_path / "resume"), "--json"], env=env) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 3


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


#: The fields without which an entry cannot be read (top level, and of each file).
REQUIRED = {"format", "job", "submission", "execution", "step", "data", "files", "published_at"}
REQUIRED_OF_A_FILE = {"path", "size"}


def _mangled(doc: dict[str, Any], data: st.DataObject) -> tuple[dict[str, Any], bool]:
    """A good entry with one field (top level or of a file) removed or replaced, and whether
    a required field was removed (which must make it damaged)."""
    target = data.draw(st.sampled_from([doc, *doc["files"]]))
    name = data.draw(st.sampled_from(sorted(target)))
    if data.draw(st.booleans()):
        del target[name]
        return doc, name in (REQUIRED if target is doc else REQUIRED_OF_A_FILE)
    target[name] = data.draw(JSON)
    return doc, False


def read_back(raw: bytes) -> str:
    """ "read", or the message of the DamagedEntry; any other exception fails the test."""
    try:
        Entry.from_json(raw, key="the/key")
    except DamagedEntry as exc:
        assert exc.key == "the/key"  # noqa: PT017
        return exc.message
    return "read"


GOOD = Entry(
    job=JOB,
    submission=1,
    execution="0",
    step=7,
    data="d/",
    files=(),
    published_at="2026-01-01T00:00:00Z",
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a busy shared machine
@given(data=st.data(), raw=st.binary(max_size=64))
def test_a_stored_entry_either_reads_or_is_damaged_never_another_error(
    data: st.DataObject, raw: bytes
) -> None:
    """Whatever bytes an entry holds, reading it gives an Entry or DamagedEntry naming the key:
    never a KeyError, TypeError or any other exception that would leave the CLI's exit code to
    chance. An entry without a required field is always damaged."""
    damaged = "publication entry the/key is damaged: "
    assert read_back(raw) == "read" or read_back(raw).startswith(damaged)
    good = json.loads(GOOD.to_json())
    good["files"] = [{"path": "m", "size": 1, "sha256": "0" * 64}]
    assert read_back(json.dumps(good).encode()) == "read"
    doc, lost_required = _mangled(good, data)
    result = read_back(json.dumps(doc).encode())
    if lost_required:
        assert result.startswith(damaged), result
    else:
        assert result == "read" or result.startswith(damaged), result
