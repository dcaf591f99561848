"""The jobdispatch-publish command: start-up cost, messages and exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jobdispatch.exitcodes import ExitCode
from jobdispatch.testing import eventually
from jobdispatch_publish.cli import main
from publish_helpers import HELPER, make_save


def test_help_does_not_import_boto3() -> None:
    code = (
        "import sys\n"
        "from jobdispatch_publish.cli import main\n"
        "for argv in (['--help'], ['resolve', '--help'], ['watch', '--help'],\n"
        "             ['progress', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('boto3', 'botocore', 'hvac', 'requests', 'jsonschema')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "[]"
    assert "exit codes (shared with jobdispatch):" in out.stdout


def test_version() -> None:
    out = subprocess.run([*HELPER, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("jobdispatch-publish ")


@pytest.mark.parametrize(
    ("argv", "env", "code", "message"),
    [
        (["resolve"], {}, ExitCode.USAGE, "JOBDISPATCH_CHECKPOINT_ROOT: not set (or pass --root)"),
        (
            ["resolve", "--root", "gs://b/p"],
            {"JOBDISPATCH_JOB": "j"},
            ExitCode.USAGE,
            "scheme 'gs' is not supported",
        ),
        (
            ["resolve"],
            {"JOBDISPATCH_CHECKPOINT_ROOT": "s3://B!/x", "JOBDISPATCH_JOB": "j"},
            ExitCode.USAGE,
            "is not a bucket name",
        ),
        (
            ["resolve", "--root", "/tmp"],
            {"JOBDISPATCH_JOB": "../etc"},
            ExitCode.USAGE,
            "JOBDISPATCH_JOB: '../etc' is not a valid name",
        ),
        (
            ["publish", ".", "--step", "1", "--root", "/tmp"],
            {"JOBDISPATCH_JOB": "j", "JOBDISPATCH_SUBMISSION": "0"},
            ExitCode.USAGE,
            "2 problems",
        ),
        (
            ["resolve", "--root", "s3://bucket/p"],
            {"JOBDISPATCH_JOB": "j"},
            ExitCode.UNAUTHORIZED,
            "no credentials found; tried aws:",
        ),
        (
            ["resolve", "--config", "/nonexistent.json", "--root", "/tmp"],
            {"JOBDISPATCH_JOB": "j"},
            ExitCode.USAGE,
            "cannot be read",
        ),
    ],
)
def test_bad_input_is_named_with_a_meaningful_exit_code(
    clean_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    code: int,
    message: str,
) -> None:
    assert main(argv, env={**clean_env, **env}) == code
    assert message in capsys.readouterr().err


def test_publish_resolve_list_prune_on_a_posix_root(
    posix_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = posix_env
    assert main(["resolve"], env=env) == 0
    assert capsys.readouterr().out == ""
    assert main(["resolve", "--require"], env=env) == ExitCode.NOT_FOUND
    for step in (1, 2, 3):
        assert (
            main(
                ["publish", str(make_save(tmp_path / f"s{step}", {"m": 10})), "--step", str(step)],
                env=env,
            )
            == 0
        )
    assert "published step 3" in capsys.readouterr().out
    again = ["publish", str(tmp_path / "s3"), "--step", "3", "--execution", "1"]
    assert main(again, env=env) == ExitCode.CONFLICT
    assert "already published by submission 1 execution 0" in capsys.readouterr().err
    assert (
        main(
            ["resolve", "--json", "--into", str(tmp_path / "resume")],
            env={**env, "JOBDISPATCH_SUBMISSION": "2"},
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["step"] == 3
    assert main(["prune", "--keep-last", "1"], env=env) == 0
    assert "withdrew 2: 1, 2" in capsys.readouterr().out
    assert main(["list"], env=env) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["3", "published"],
        ["2", "withdrawn"],
        ["1", "withdrawn"],
    ]
    assert main(["probe"], env=env) == 0
    assert "n/a" in capsys.readouterr().out


def test_watch_publishes_the_last_save_when_stopped(
    posix_env: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    saves = tmp_path / "saves"
    saves.mkdir()
    env = posix_env
    proc = subprocess.Popen(
        [*HELPER, "watch", str(saves), "--interval", "0.2", "-v"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        make_save(saves / "global_step100", {"m": 10})
        eventually(lambda: list((root / "j" / "log").glob("*.json")), "step 100 logged", every=0.05)
        make_save(saves / "global_step200", {"m": 10}, marker=None)
        make_save(saves / ".global_step300.tmp", {"m": 10})  # hidden: in progress
        (saves / "global_step200" / "COMPLETE").write_text("done")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines() == ["published step 100", "published step 200"]


@pytest.mark.s3
def test_a_wrong_secret_exits_unauthorized_and_is_not_printed(
    s3_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "wrong-secret-that-must-stay-hidden"
    env = {**s3_env, "AWS_SECRET_ACCESS_KEY": secret, "JOBDISPATCH_JOB": "j"}
    assert main(["resolve", "--into", "/tmp/nowhere", "-v"], env=env) == ExitCode.UNAUTHORIZED
    captured = capsys.readouterr()
    assert "SignatureDoesNotMatch" in captured.err
    assert secret not in captured.err + captured.out


def test_file_system_errors_are_named_with_an_exit_code(
    posix_env: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import errno
    import os

    env = posix_env
    save = make_save(tmp_path / "s", {"m": 1})
    for code, exit_code, text in (
        (errno.EACCES, ExitCode.UNAUTHORIZED, "Permission denied"),
        (errno.ENOSPC, ExitCode.UNREACHABLE, "No space left"),
    ):

        def refuse(src: object, dst: object, code: int = code) -> None:
            raise OSError(code, os.strerror(code), str(dst))

        monkeypatch.setattr(os, "link", refuse)
        assert main(["publish", str(save), "--step", "1"], env=env) == exit_code
        assert f"file system error: {text}" in capsys.readouterr().err
