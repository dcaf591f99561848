"""The base install needs neither boto3 nor hvac; a feature whose extra is missing names it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from jobdispatch.exitcodes import ExitCode
from publish_helpers import make_save

#: Runs the helper in a fresh interpreter where the named modules cannot be imported, as in an
#: environment where the extra that brings them was not installed.
_WITHOUT = """\
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # import raises ImportError
from jobdispatch_publish.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _helper(missing: str, *argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, missing, *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_posix_checkpoints_work_without_boto3_or_hvac(
    posix_env: dict[str, str], tmp_path: Path
) -> None:
    env = posix_env
    gone = "boto3,botocore,s3transfer,hvac,requests"
    save = make_save(tmp_path / "s", {"m": 10})
    assert _helper(gone, "publish", str(save), "--step", "1", env=env).returncode == 0
    out = _helper(gone, "resolve", "--json", "--into", str(tmp_path / "r"), env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["step"] == 1


def test_an_s3_root_without_the_s3_extra_names_it(clean_env: dict[str, str]) -> None:
    env = {**clean_env, "JOBDISPATCH_JOB": "j"}
    out = _helper("boto3,botocore", "resolve", "--root", "s3://bucket/p", "--into", "x", env=env)
    assert out.returncode == ExitCode.USAGE
    assert "the S3 checkpoint root s3://bucket/p needs the boto3 package" in out.stderr
    assert "pip install 'jobdispatch-publish[s3]'" in out.stderr


def test_the_vault_source_without_the_vault_extra_names_it(
    clean_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "c.json"
    vault = {"source": "vault", "url": "http://127.0.0.1:1", "path": "p"}
    vault["auth"] = {"method": "approle", "role_id": "r"}  # type: ignore[assignment]
    config.write_text(json.dumps({"credentials": [vault]}))
    env = {**clean_env, "JOBDISPATCH_JOB": "j", "JOBDISPATCH_PUBLISH_CONFIG": str(config)}
    out = _helper("hvac", "resolve", "--root", "s3://bucket/p", "--into", "x", env=env)
    assert out.returncode == ExitCode.USAGE
    assert "the 'vault' credential source needs the hvac package" in out.stderr
    assert "pip install 'jobdispatch-publish[vault]'" in out.stderr
