"""The S3 tests skip without a server, and fail instead when CI requires the services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.parametrize(("require", "outcome"), [("", "1 skipped"), ("1", "1 error")])
def test_without_a_server(tmp_path: Path, require: str, outcome: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBDISPATCH_")}
    env.update({"JOBDISPATCH_S3_STATE": str(tmp_path), "JOBDISPATCH_REQUIRE_SERVICES": require})
    test = f"{HERE / 'test_s3.py'}::test_create_only_entries_refuse_a_second_write"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            test,
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(HERE.parents[2]),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE.parents[2],
    )
    assert outcome in out.stdout, out.stdout
    if require:
        assert "JOBDISPATCH_REQUIRE_SERVICES=1 but no S3 server" in out.stdout
    else:
        assert "tools/s3/up" in out.stdout
