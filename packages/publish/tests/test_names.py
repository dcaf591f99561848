"""Identities, roots and key names: what is refused, and the order keys sort in."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobdispatch.errors import ValidationError
from jobdispatch_publish import layout
from jobdispatch_publish.identity import Identity, identity_from, job_from
from jobdispatch_publish.root import PosixRoot, S3Root, parse_root


@given(
    st.lists(
        st.integers(min_value=0, max_value=layout.MAX_STEP), min_size=1, max_size=50, unique=True
    )
)
def test_log_keys_list_newest_first_and_parse_back(steps: list[int]) -> None:
    keys = sorted(layout.entry_key("j", s) for s in steps)
    assert [layout.parse_entry_key(k) for k in keys] == sorted(steps, reverse=True)


def test_a_tampered_or_stray_log_key_is_not_an_entry() -> None:
    assert layout.parse_entry_key("j/log/README") is None
    assert (
        layout.parse_entry_key("j/log/999999999999999998.step-7.json") is None
    )  # inverse mismatch
    with pytest.raises(ValueError, match="step must be"):
        layout.entry_key("j", -1)


def test_data_folders_are_fresh_and_carry_their_age() -> None:
    ident = Identity("j", 2, "rank-0")
    a, b = layout.data_prefix(ident, 5, now=1000.0), layout.data_prefix(ident, 5, now=1000.0)
    assert a != b
    assert a.startswith("j/executions/2/rank-0/step-5.1000000-")
    assert layout.parse_data_folder(a) == (5, 1000.0)


def test_identity_from_env_and_flags() -> None:
    env = {"JOBDISPATCH_JOB": "job-1", "JOBDISPATCH_SUBMISSION": "3", "JOBDISPATCH_EXECUTION": "4"}
    assert identity_from(env) == Identity("job-1", 3, "4")
    assert identity_from(env, execution="7", submission=1) == Identity("job-1", 1, "7")
    with pytest.raises(ValidationError) as caught:
        identity_from({"JOBDISPATCH_SUBMISSION": "-2", "JOBDISPATCH_EXECUTION": "a/b"})
    assert caught.value.paths == [
        "JOBDISPATCH_JOB",
        "JOBDISPATCH_SUBMISSION",
        "JOBDISPATCH_EXECUTION",
    ]
    with pytest.raises(ValidationError, match="--job"):
        job_from({}, "..")


def test_roots() -> None:
    assert parse_root("s3://bucket/a/b/") == S3Root("bucket", "a/b")
    assert parse_root("s3://bucket") == S3Root("bucket", "")
    assert parse_root("file:///shared/ckpt") == PosixRoot(Path("/shared/ckpt"))
    for bad in ("s3://b/x/../y", "s3://Bucket/x", "", "gs://b"):
        with pytest.raises(ValidationError):
            parse_root(bad)
