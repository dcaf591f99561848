"""Fixtures for the publish tests: clean environments, stores, and the S3 server gate.

The S3 tests run against the radosgw that ``tools/s3/up`` starts. They find it through the
``JOBDISPATCH_S3_*`` variables that script prints, or else the state file it writes
(``$JOBDISPATCH_S3_STATE/env``, default ``/var/lib/jobdispatch-s3/env``). Without a server they
skip, saying how to start one, except under ``JOBDISPATCH_REQUIRE_SERVICES=1`` (CI), where they
fail instead.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))

S3_VARS = ("JOBDISPATCH_S3_ENDPOINT", "JOBDISPATCH_S3_ACCESS_KEY", "JOBDISPATCH_S3_SECRET_KEY")


def _state_file() -> Path:
    return Path(os.environ.get("JOBDISPATCH_S3_STATE", "/var/lib/jobdispatch-s3")) / "env"


def _s3_settings() -> dict[str, str] | None:
    found = {k: os.environ[k] for k in (*S3_VARS, "JOBDISPATCH_S3_REGION") if k in os.environ}
    if all(k in found for k in S3_VARS):
        return found
    try:
        lines = _state_file().read_text().splitlines()
    except OSError:
        return None
    for raw in lines:
        line = raw.strip().removeprefix("export ")
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(key, value)
    return found if all(k in found for k in S3_VARS) else None


def _answers(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def s3_server() -> dict[str, str]:
    """The running S3 server's endpoint and credentials (radosgw from tools/s3/up)."""
    settings = _s3_settings()
    reason = None
    if settings is None:
        looked = f"{S3_VARS[0]} and {_state_file()}"
        reason = f'no S3 server: run `eval "$(tools/s3/up)"` (looked for {looked})'
    elif not _answers(settings["JOBDISPATCH_S3_ENDPOINT"]):
        endpoint = settings["JOBDISPATCH_S3_ENDPOINT"]
        reason = f"the S3 server at {endpoint} does not answer: run tools/s3/up"
    if reason is not None:
        if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
            pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {reason}")
        pytest.skip(reason)
    assert settings is not None
    settings.setdefault("JOBDISPATCH_S3_REGION", "us-east-1")
    return settings


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """No AWS, proxy or dispatch variables from the machine leak into a test."""
    for key in list(os.environ):
        if key.startswith(("AWS_", "JOBDISPATCH_", "VAULT_")) and not key.startswith(
            "JOBDISPATCH_S3_"
        ):
            monkeypatch.delenv(key)
        if key.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-such-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-such-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return dict(os.environ)


@pytest.fixture
def posix_env(clean_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The clean environment of execution 0 of submission 1 of job ``j``, its checkpoints
    published under a new POSIX root, ``tmp_path / "root"``."""
    root = tmp_path / "root"
    root.mkdir()
    return {
        **clean_env,
        "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
        "JOBDISPATCH_JOB": "j",
        "JOBDISPATCH_SUBMISSION": "1",
        "JOBDISPATCH_EXECUTION": "0",
    }


def s3_client(server: dict[str, str], *, secret: str | None = None) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=server["JOBDISPATCH_S3_ENDPOINT"],
        aws_access_key_id=server["JOBDISPATCH_S3_ACCESS_KEY"],
        aws_secret_access_key=secret or server["JOBDISPATCH_S3_SECRET_KEY"],
        region_name=server["JOBDISPATCH_S3_REGION"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
    )


@pytest.fixture(scope="session")
def bucket(s3_server: dict[str, str]) -> Iterator[str]:
    """A bucket of its own for this test session, emptied and removed at the end."""
    client = s3_client(s3_server)
    name = f"jd-test-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=name)
    yield name
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
    for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
        client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    client.delete_bucket(Bucket=name)


@pytest.fixture
def s3_env(
    s3_server: dict[str, str],
    bucket: str,
    clean_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """Environment for the helper against radosgw, under a fresh prefix of the test bucket."""
    values = {
        "AWS_ACCESS_KEY_ID": s3_server["JOBDISPATCH_S3_ACCESS_KEY"],
        "AWS_SECRET_ACCESS_KEY": s3_server["JOBDISPATCH_S3_SECRET_KEY"],
        "AWS_ENDPOINT_URL_S3": s3_server["JOBDISPATCH_S3_ENDPOINT"],
        "AWS_REGION": s3_server["JOBDISPATCH_S3_REGION"],
        "JOBDISPATCH_CHECKPOINT_ROOT": f"s3://{bucket}/{secrets.token_hex(4)}",
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return dict(os.environ)


@pytest.fixture
def make_s3_store(s3_env: dict[str, str]) -> Callable[..., Any]:
    """Build S3 stores on the test prefix (each call a new client), with optional settings."""
    from jobdispatch_publish.config import S3Settings, Settings
    from jobdispatch_publish.root import root_from
    from jobdispatch_publish.stores import open_store

    def make(**s3: Any) -> Any:
        settings = Settings(s3=S3Settings(**s3))
        return open_store(root_from(s3_env), settings, s3_env)

    return make
