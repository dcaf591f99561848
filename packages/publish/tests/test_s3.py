"""Publish, resolve, prune and probe against a real S3 implementation (radosgw, tools/s3/up)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from jobdispatch.errors import Unauthorized
from jobdispatch.exitcodes import ExitCode
from jobdispatch.testing import eventually
from jobdispatch_publish import layout
from jobdispatch_publish.config import Settings
from jobdispatch_publish.errors import AlreadyPublished, Corrupt
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.probe import probe
from jobdispatch_publish.prune import prune
from jobdispatch_publish.publish import publish
from jobdispatch_publish.resolve import resolve
from jobdispatch_publish.root import root_from
from jobdispatch_publish.s3 import S3Store
from jobdispatch_publish.store import Exists
from jobdispatch_publish.stores import open_store, wrong_secret_store
from publish_fakes import RecordingProxy
from publish_helpers import helper, make_save, race, watch_giving_up

pytestmark = pytest.mark.s3

JOB = "job-s3"


def ident(submission: int = 1, execution: str = "0") -> Identity:
    return Identity(JOB, submission, execution)


def ignoring_if_none_match(store: S3Store) -> S3Store:
    """A wrapper that makes a store ignore If-None-Match: it strips the header from every
    PutObject before the request is signed, so the server sees a plain, valid overwrite. It
    stands for a store that silently overwrites, which the probe must refuse."""

    def strip(request: Any, **_: Any) -> None:
        if "If-None-Match" in request.headers:
            del request.headers["If-None-Match"]

    store.client.meta.events.register("before-sign.s3.PutObject", strip)
    return store


def test_create_only_entries_refuse_a_second_write(make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store()
    store.create("k/entry.json", b"first")
    with pytest.raises(Exists):
        store.create("k/entry.json", b"second")
    assert store.read("k/entry.json") == b"first"


def test_a_wrong_secret_is_refused_and_never_shown(s3_env: dict[str, str]) -> None:
    secret = "a-wrong-secret-value-123"
    env = {**s3_env, "AWS_SECRET_ACCESS_KEY": secret}
    store = open_store(root_from(env), Settings(), env)
    with pytest.raises(Unauthorized, match="SignatureDoesNotMatch") as caught:
        store.create("x", b"x")
    assert secret not in str(caught.value)


def test_probe_accepts_radosgw(
    make_s3_store: Callable[..., S3Store], s3_env: dict[str, str]
) -> None:
    root = root_from(s3_env)
    checks = probe(make_s3_store(), signed_wrongly=wrong_secret_store(root, Settings(), s3_env))  # type: ignore[arg-type]
    assert [(c.name, c.ok) for c in checks] == [
        ("create-only write", True),
        ("listing", True),
        ("signatures", True),
    ]


def test_probe_refuses_a_store_that_silently_overwrites(
    make_s3_store: Callable[..., S3Store],
    s3_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks = probe(ignoring_if_none_match(make_s3_store()))
    create_only = checks[0]
    assert create_only.ok is False
    assert "overwrote" in create_only.detail or "acknowledged" in create_only.detail
    # Through the command: exit code 4 (refused) and a message naming the failed check.
    from jobdispatch_publish import cli, stores

    real = stores.open_store

    def overwriting(*args: Any, **kwargs: Any) -> S3Store:
        store = real(*args, **kwargs)
        assert isinstance(store, S3Store), f"an s3:// root opened {store!r}"
        return ignoring_if_none_match(store)

    monkeypatch.setattr(stores, "open_store", overwriting)
    assert cli.main(["probe"], env=s3_env) == ExitCode.REFUSED
    err = capsys.readouterr().err
    assert "create-only write failed" in err


def test_a_store_that_ignores_if_none_match_would_let_a_zombie_overwrite(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    """Why probe matters: with the header dropped, a second publisher replaces the entry."""
    honest, broken = make_s3_store(), ignoring_if_none_match(make_s3_store())
    publish(honest, ident(1, "0"), make_save(tmp_path / "a", {"m": 10}), 1)
    broken.create(layout.entry_key(JOB, 1), b"zombie")  # no Exists: the store overwrote
    assert honest.read(layout.entry_key(JOB, 1)) == b"zombie"


def test_two_writers_publishing_the_same_step_exactly_one_wins(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    for step in range(4):
        stores = [make_s3_store(), make_s3_store()]
        saves = [make_save(tmp_path / f"w{i}-{step}", {"m": 200_000}) for i in range(2)]
        calls = [
            functools.partial(publish, stores[i], ident(1, str(i)), saves[i], step)
            for i in range(2)
        ]
        winners, losers = race(calls, AlreadyPublished)
        assert (len(winners), len(losers)) == (1, 1)
        expected = f"step {step} of job {JOB} was already published by submission 1 execution"
        assert expected in str(losers[0])
        found = resolve(stores[0], JOB, into=tmp_path / f"resume-{step}")
        assert found is not None
        assert found.entry == winners[0].entry


def test_resolve_across_several_executions_fetches_the_newest(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    store = make_s3_store(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    plan = [
        ((1, "0"), 10, 1000),
        ((1, "1"), 20, 1000),
        ((2, "0"), 15, 1000),
        ((2, "3"), 30, 12 << 20),
    ]
    for (sub, ex), step, size in plan:
        publish(
            store,
            ident(sub, ex),
            make_save(
                tmp_path / f"{sub}{ex}{step}", {"model.bin": size, "meta/step": str(step).encode()}
            ),
            step,
        )
    found = resolve(store, JOB, into=tmp_path / "resume")
    assert found is not None
    assert (found.entry.step, found.entry.submission, found.entry.execution) == (30, 2, "3")
    assert (tmp_path / "resume/meta/step").read_text() == "30"
    assert (tmp_path / "resume/model.bin").stat().st_size == 12 << 20
    # The 12 MiB file went up in parts: its ETag is a multipart one.
    etag = next(f.etag for f in found.entry.files if f.path == "model.bin")
    assert etag is not None and etag.endswith('-3"'), etag


def test_data_replaced_after_publication_is_detected(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    store = make_s3_store()
    entry = publish(store, ident(), make_save(tmp_path / "a", {"m": 100}), 1).entry
    store.write(entry.data + "m", b"tampered")
    with pytest.raises(Corrupt, match="changed after it was published"):
        resolve(store, JOB, into=tmp_path / "resume")


def test_prune_on_s3_keeps_the_newest_and_aborts_unfinished_uploads(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    store = make_s3_store()
    for s in (1, 2, 3, 4):
        publish(store, ident(), make_save(tmp_path / f"s{s}", {"m": 100}), s)
    upload = store.client.create_multipart_upload(
        Bucket=store.root.bucket, Key=store.root.key(f"{JOB}/executions/1/0/step-9.1-ab/m")
    )
    report = prune(store, JOB, keep_last=2, grace=0)
    assert (report.withdrawn, report.deleted, report.unfinished) == ([1, 2], [1, 2], 1)
    uploads = store.client.list_multipart_uploads(
        Bucket=store.root.bucket, Prefix=store.root.key(JOB)
    ).get("Uploads", [])
    assert upload["UploadId"] not in {u["UploadId"] for u in uploads}
    found = resolve(store, JOB, into=tmp_path / "resume")
    assert found is not None
    assert found.entry.step == 4


def test_a_writer_killed_mid_upload_leaves_nothing_resolvable(
    make_s3_store: Callable[..., S3Store], s3_env: dict[str, str], tmp_path: Path
) -> None:
    store = make_s3_store()
    save = make_save(tmp_path / "big", {"model.bin": 24 << 20})
    config = tmp_path / "publish.json"
    config.write_text(
        json.dumps({"s3": {"multipart_threshold": 5 << 20, "multipart_chunksize": 5 << 20}})
    )
    cmd = [
        sys.executable, "-m", "jobdispatch_publish", "publish", str(save), "--step", "7",
        "--job", JOB, "--submission", "1", "--execution", "0", "--config", str(config),
        "--max-bandwidth", "4M",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=s3_env)
    prefix = store.root.key(f"{JOB}/executions/")
    eventually(
        lambda: store.client.list_multipart_uploads(Bucket=store.root.bucket, Prefix=prefix),
        "the publish to begin its multipart upload",
        holds=lambda reply: reply.get("Uploads"),
        every=0.05,
    )
    time.sleep(1.0)  # some parts are up, most are not
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    assert store.read(layout.entry_key(JOB, 7)) is None
    assert resolve(store, JOB, into=tmp_path / "resume") is None
    assert not (tmp_path / "resume").exists()
    # The step is free for the next execution; prune then aborts the abandoned upload.
    assert publish(store, ident(1, "1"), make_save(tmp_path / "small", {"m": 1}), 7).written
    assert prune(store, JOB, keep_last=1, grace=0).unfinished >= 1


def test_the_helper_end_to_end(s3_env: dict[str, str], tmp_path: Path) -> None:
    env = {
        **s3_env,
        "JOBDISPATCH_JOB": JOB,
        "JOBDISPATCH_SUBMISSION": "1",
        "JOBDISPATCH_EXECUTION": "0",
    }
    saves = tmp_path / "saves"
    make_save(saves / "step-100", {"model.bin": 1000})
    make_save(saves / "step-200", {"model.bin": 1000}, marker=None)  # still being written
    assert helper("watch", str(saves), "--once", env=env).stdout.strip() == "published step 100"
    (saves / "step-200/COMPLETE").write_text("done")
    assert helper("watch", str(saves), "--once", env=env).stdout.strip() == "published step 200"
    env2 = {**env, "JOBDISPATCH_SUBMISSION": "2"}
    out = helper("resolve", "--into", str(tmp_path / "resume"), "--json", env=env2)
    doc = json.loads(out.stdout)
    assert (doc["step"], doc["path"]) == (200, str(tmp_path / "resume"))
    out = helper("probe", env=env, check=False)
    assert out.returncode == 0, out.stderr


def test_the_s3_client_follows_the_proxy_rule(s3_env: dict[str, str], tmp_path: Path) -> None:
    proxy = RecordingProxy().start()
    try:
        env = {**s3_env, "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
        settings = Settings(proxy={"url": proxy.url})
        store = open_store(root_from(env), settings, env)
        publish(store, ident(), make_save(tmp_path / "a", {"m": 10}), 1)
        endpoint = s3_env["AWS_ENDPOINT_URL_S3"].removeprefix("http://")
        assert proxy.hosts
        assert set(proxy.hosts) == {endpoint}
        # Bypassed by no_proxy: nothing more goes through the proxy.
        seen = len(proxy.hosts)
        direct = open_store(
            root_from(env), Settings(proxy={"url": proxy.url, "no_proxy": ["127.0.0.1"]}), env
        )
        assert resolve(direct, JOB, into=tmp_path / "resume") is not None
        assert len(proxy.hosts) == seen
    finally:
        proxy.stop()


def test_digests_are_recorded_and_a_changed_resume_copy_is_not_reused(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    store = make_s3_store()
    save = make_save(tmp_path / "a", {"model.bin": 9 << 20, "optim.bin": 1000})
    entry = publish(store, ident(), save, 1).entry
    for record in entry.files:
        assert record.sha256 == hashlib.sha256((save / record.path).read_bytes()).hexdigest()
    resume = tmp_path / "resume"
    found = resolve(store, JOB, into=resume)
    assert found is not None
    assert found.checked == "sha256"
    with open(resume / "optim.bin", "r+b") as f:  # same size, other bytes
        f.write(b"X" * 32)
    with pytest.raises(Corrupt, match="was changed after it was fetched"):
        resolve(store, JOB, into=resume)
    again = resolve(store, JOB, into=tmp_path / "r2")
    assert again is not None
    assert (again.path / "optim.bin").read_bytes() == (save / "optim.bin").read_bytes()


def test_a_download_that_differs_from_the_recorded_digest_is_corrupt(
    make_s3_store: Callable[..., S3Store], tmp_path: Path
) -> None:
    store = make_s3_store()
    entry = publish(store, ident(), make_save(tmp_path / "a", {"m": 100}), 1).entry
    # An entry whose digest does not match its data (as a bit flip in the data store would
    # leave it, with the size and ETag the store reports unchanged).
    wrong = attrs.evolve(entry.files[0], sha256="0" * 64)
    bad = attrs.evolve(entry, files=(wrong, *entry.files[1:]))
    key = layout.entry_key(JOB, 1)
    store.delete([key])
    store.create(key, bad.to_json())
    with pytest.raises(Corrupt, match="is not the file that was published"):
        resolve(store, JOB, into=tmp_path / "resume")
    assert not (tmp_path / "resume").exists()


def test_a_missing_bucket_is_the_root_unavailable(
    s3_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from jobdispatch_publish.cli import main

    env = {
        **s3_env,
        "JOBDISPATCH_CHECKPOINT_ROOT": "s3://no-such-bucket-jd/x",
        "JOBDISPATCH_JOB": "j",
    }
    assert main(["resolve", "--into", str(tmp_path / "r")], env=env) == ExitCode.ROOT_UNAVAILABLE
    assert "the bucket does not exist" in capsys.readouterr().err


def test_watch_gives_up_on_refused_credentials(s3_env: dict[str, str], tmp_path: Path) -> None:
    saves = tmp_path / "saves"
    make_save(saves / "step-5", {"m": 10})
    out = watch_giving_up(saves, {**s3_env, "AWS_SECRET_ACCESS_KEY": "wrong-secret"}, JOB)
    assert out.returncode == ExitCode.UNAUTHORIZED, out.stderr
    assert "watch gave up" in out.stderr
    assert "SignatureDoesNotMatch" in out.stderr
    assert "wrong-secret" not in out.stderr
