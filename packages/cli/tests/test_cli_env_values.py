"""A job's ``env`` reaches it as the file wrote it (issue 34, item 9). YAML and TOML read some
unquoted values as numbers whose text differs from what was written (``3.10`` → 3.1, ``0123``
→ 83, ``0x1F`` → 31, ``1e3`` → 1000.0); such a value is refused, naming the key and the quoted
form, and a number whose text is what was written (``42``, ``0.1``) is passed as written. The
same holds for the items of a ``command`` list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch_cli.jobfile import parse_job_text

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)

#: (suffix, how the value is written, what the number would have become)
REWRITTEN = [
    (".yaml", "3.10", "3.1"),
    (".yaml", "0123", "83"),
    (".yaml", "0777", "511"),
    (".yaml", "0x1F", "31"),
    (".yaml", "1_000", "1000"),
    (".yaml", "1.0e+3", "1000.0"),
    (".yaml", ".inf", "inf"),
    (".toml", "3.10", "3.1"),
    (".toml", "0o17", "15"),
    (".toml", "0x1F", "31"),
    (".toml", "1e3", "1000.0"),
    (".toml", "1_000", "1000"),
    (".toml", "+5", "5"),
]


def _job(suffix: str, key: str, value: str) -> str:
    if suffix == ".toml":
        return f'name = "v"\ncommand = ["true"]\n[env]\n{key} = {value}\n'
    return f'name: v\ncommand: ["true"]\nenv:\n  {key}: {value}\n'


@pytest.mark.parametrize(("suffix", "written", "became"), REWRITTEN)
def test_a_number_whose_text_would_change_is_refused_naming_the_key(
    invoke: Invoke, tmp_path: Path, suffix: str, written: str, became: str
) -> None:
    path = tmp_path / f"v{suffix}"
    path.write_text(_job(suffix, "PYTHON_VERSION", written))
    ran = invoke("plan", str(path))
    assert ran.code == 2, ran.err
    assert (
        f"{path}:4: env.PYTHON_VERSION: {written} would reach the job as {became}: "
        f'put it in quotes ("{written}") to pass it as written'
    ) in ran.err, ran.err


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_a_command_argument_whose_text_would_change_is_refused(
    invoke: Invoke, tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"c{suffix}"
    head = 'name = "c"\ncommand = ' if suffix == ".toml" else "name: c\ncommand: "
    path.write_text(head + '["python", "--version", 3.10]\n')
    ran = invoke("plan", str(path))
    assert ran.code == 2, ran.err
    assert f"{path}:2: command[2]: 3.10 would reach the job as 3.1" in ran.err, ran.err


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_strings_and_numbers_written_as_they_read_reach_the_job_as_written(
    invoke: Invoke, tmp_path: Path, suffix: str
) -> None:
    values = {"A": '"3.10"', "B": '"0123"', "C": "42", "D": "-7", "E": "0.1", "F": '"0x1F"'}
    path = tmp_path / f"ok{suffix}"
    script = "echo $A $B $C $D $E $F"
    if suffix == ".toml":
        body = f'name = "ok"\ncommand = ["sh", "-c", "{script}"]\n[env]\n'
        body += "".join(f"{k} = {v}\n" for k, v in values.items())
    else:
        body = f'name: ok\ncommand: ["sh", "-c", "{script}"]\nenv:\n'
        body += "".join(f"  {k}: {v}\n" for k, v in values.items())
    path.write_text(body)
    ran = invoke("run", str(path), "--poll", "0.05")
    assert ran.code == 0, ran.out + ran.err
    job = ran.out.split()[1]
    logs = invoke("logs", job, "--rank", "0")
    assert logs.out == "3.10 0123 42 -7 0.1 0x1F\n", logs.out


@settings(max_examples=60, deadline=None)
@given(number=st.integers(-(10**12), 10**12) | st.floats(allow_nan=False, allow_infinity=False))
def test_a_number_written_as_python_prints_it_passes_unchanged(number: int | float) -> None:
    """Any TOML number whose text is Python's own is taken, and as that very text."""
    text = repr(number)
    job = parse_job_text(
        f'command = ["true"]\n[env]\nN = {text}\n', file="n.toml", suffix=".toml", base=Path()
    )
    assert job.spec.env["N"] == text
