"""Text people wrote is shown as written: rich turned ``:name:`` into an emoji, so a GPU type
``x:ok:y`` was reported as ``x🆗y`` and a license ``a:b:c`` as ``a🅱c``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)
JobFile = Callable[..., Path]

#: rich emoji codes, each between colons: ok, b, smile, cat, +1.
CODES = ["ok", "b", "smile", "cat", "+1", "thumbs_up"]


def test_an_error_message_quotes_a_value_with_colons_as_written(
    invoke: Invoke, tmp_path: Path
) -> None:
    spec = tmp_path / "gpu.toml"
    spec.write_text(
        'name = "a"\ncommand = ["true"]\n[resources]\ngpus_per_node = 1\ngpu_type = "x:ok:y"\n'
    )
    ran = invoke("submit", str(spec))
    assert ran.code == 2, (ran.out, ran.err)
    assert "'x:ok:y'" in ran.err, ran.err
    assert "\N{SQUARED OK}" not in ran.err


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(CODES), st.text("abc:", max_size=4))
def test_a_reason_with_emoji_codes_reaches_the_table_and_json_as_written(
    invoke: Invoke, job_file: JobFile, code: str, tail: str
) -> None:
    reason = f"x:{code}:y{tail}"
    ran = invoke("submit", str(job_file(["true"])), "--json")
    assert ran.code == 0, ran.err
    job = ran.json()["job"]
    assert invoke("cancel", job, "--reason", reason).code == 0
    shown = invoke("status", job)
    assert shown.code == 0, shown.err
    assert reason in shown.out.replace("\n", ""), shown.out
    assert reason in json.dumps(invoke("status", job, "--json").json(), ensure_ascii=False)
