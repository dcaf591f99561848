"""Property-based fuzzing of everything a person hands the command: job files (TOML and YAML),
configuration files and arguments. Whatever they hold, the command ends with a code from the
documented set and never with a traceback: the command runs in this process, so an exception
escaping ``main`` fails the example by itself.

The example counts are modest so the suite stays quick on a small machine. For a longer hunt,
``JOBDISPATCH_FUZZ_PROFILE=cli-fuzz-long`` runs fifty times as many of each.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobdispatch.exitcodes import ExitCode, codes_of
from jobdispatch.types import RECOVERABLE, Action

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)

# The fixtures (a private config and state folder) are shared by a test's examples on purpose:
# each example is one more command against the same store, as a person's are.
_QUICK = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("cli-fuzz", _QUICK, max_examples=40)
settings.register_profile("cli-fuzz-long", _QUICK, max_examples=2000)
FUZZ = settings.get_profile(os.environ.get("JOBDISPATCH_FUZZ_PROFILE", "cli-fuzz"))

#: Every exit status errors.md documents for the command.
DOCUMENTED: set[int] = set(codes_of("jobdispatch"))
#: 1 means "the job run supervised failed"; any other command giving it is a crash.
NOT_RUN = DOCUMENTED - {ExitCode.FAILED}


def _told(ran: Any, allowed: set[int]) -> None:
    assert ran.code in allowed, (ran.code, ran.err)
    if ran.code not in (ExitCode.OK, ExitCode.INTERRUPTED):
        assert ran.err.strip(), "a failure must say why"
    assert "Traceback" not in ran.err


# ------------------------------------------------------------------------- values

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**18, max_value=10**40),
    st.floats(),
    text,
    st.datetimes(timezones=st.just(UTC)),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)
durations = st.one_of(
    st.from_regex(r"\A[0-9]{1,14}(\.[0-9]{1,3})?[dhms]\Z"),
    st.from_regex(r"\A([0-9]{1,6}d)?([0-9]{1,6}h)?([0-9]{1,6}m)?([0-9]{1,6}s)?\Z"),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-5", "0", "90s", "99999999999d", " "]),
    st.floats(),
    st.integers(),
    text,
)
causes = st.one_of(st.sampled_from([str(k) for k in RECOVERABLE] + ["cancelled", "none"]), text)
rules = st.fixed_dictionaries(
    {},
    optional={
        "on": st.one_of(causes, st.lists(causes, max_size=3)),
        "action": st.one_of(st.sampled_from([str(a) for a in Action]), text),
        "budget": st.one_of(st.integers(), st.integers(10**18, 10**30), st.floats(), text),
        "for": durations,
        "extra": anything,
    },
)
job_data = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z"), text),
        "command": st.one_of(st.lists(st.one_of(text, scalars), max_size=4), text, anything),
        "nodes": st.one_of(st.integers(), st.floats(), text),
        "procs_per_node": st.one_of(st.integers(), st.floats()),
        "time_limit": durations,
        "env": st.one_of(st.dictionaries(text, scalars, max_size=3), anything),
        "working_dir": st.one_of(text, anything),
        "output": st.one_of(text, anything),
        "image": st.one_of(text, anything),
        "checkpoint": st.one_of(st.sampled_from(["isolated", "shared"]), text, anything),
        "recovery": st.one_of(
            st.fixed_dictionaries({"rules": st.lists(rules, max_size=3)}), anything
        ),
        "unknown": anything,
    },
)


def _toml(value: Any) -> str:
    """One TOML value written inline (tables as ``{...}``), enough to say any parsed data."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        pairs = (f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(pairs) + "}"
    return '""'  # None has no TOML spelling: an empty string stands in


def _toml_document(data: dict[str, Any]) -> str:
    return "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in data.items() if v is not None)


#: Characters that carry structure in TOML or YAML, so raw text reaches the parsers' corners.
_SYNTAX = "abc019 \t\n\"'#=[]{},.:-?|>&*!%@`\\ue\u00e9\x00\x7f"
raw_text = st.text(st.sampled_from(_SYNTAX), max_size=200)


@pytest.fixture
def at_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in the test's own folder, so relative paths a fuzzed argument names land there."""
    work = home / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


# ------------------------------------------------------------------------- job files


@FUZZ
@given(data=job_data, kind=st.sampled_from(["toml", "yaml"]))
def test_any_job_file_is_planned_or_told(
    invoke: Invoke, at_home: Path, data: dict[str, Any], kind: str
) -> None:
    path = at_home / f"job.{kind}"
    if kind == "toml":
        path.write_text(_toml_document(data))
    else:
        path.write_text(yaml.safe_dump(data, allow_unicode=True))
    _told(invoke("plan", str(path)), NOT_RUN)


@FUZZ
@given(body=raw_text, kind=st.sampled_from(["toml", "yaml", "yml"]))
def test_any_job_file_text_is_planned_or_told(
    invoke: Invoke, at_home: Path, body: str, kind: str
) -> None:
    path = at_home / f"raw.{kind}"
    path.write_text(f'name = "a"\ncommand = ["true"]\n{body}' if kind == "toml" else body)
    _told(invoke("plan", str(path)), NOT_RUN)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_job_file_bytes_that_are_not_text_are_told(
    invoke: Invoke, at_home: Path, raw: bytes
) -> None:
    path = at_home / "bytes.yaml"
    path.write_bytes(raw)
    _told(invoke("plan", str(path)), NOT_RUN)


# ------------------------------------------------------------------------- configuration

plugin_table = st.fixed_dictionaries(
    {},
    optional={
        "adapter": st.one_of(st.sampled_from(["local", "memory", "slurm", "nope"]), anything),
        "sink": st.one_of(st.sampled_from(["command", "log", "nope"]), anything),
        "grace": st.one_of(st.floats(), st.integers(), text),
        "poll": st.one_of(st.floats(), st.integers()),
        "argv": st.one_of(st.lists(text, max_size=3), anything),
        "name": text,
        "other": anything,
    },
)
config_data = st.fixed_dictionaries(
    {},
    optional={
        "default_cluster": st.one_of(st.sampled_from(["local", "other"]), anything),
        "store": st.one_of(st.just(""), anything),
        "clusters": st.one_of(st.dictionaries(text, plugin_table, max_size=3), anything),
        "escalations": st.one_of(st.dictionaries(text, plugin_table, max_size=3), anything),
        "unknown": anything,
    },
)


@FUZZ
@given(data=config_data)
def test_any_configuration_is_read_or_told(
    invoke: Invoke, at_home: Path, data: dict[str, Any]
) -> None:
    path = at_home / "config.toml"
    path.write_text(_toml_document(data))
    _told(invoke("--config", str(path), "clusters", "--json"), NOT_RUN)


@FUZZ
@given(body=raw_text)
def test_any_configuration_text_is_read_or_told(invoke: Invoke, at_home: Path, body: str) -> None:
    path = at_home / "config.toml"
    path.write_text(body)
    _told(invoke("--config", str(path), "clusters"), NOT_RUN)


# ------------------------------------------------------------------------- arguments

COMMANDS = [
    ["status"],
    ["list"],
    ["cancel"],
    ["hold"],
    ["release"],
    ["resubmit"],
    ["give-up"],
    ["requeue"],
    ["abandon"],
    ["logs"],
    ["plan"],
    ["submit"],
    ["supersede"],
    ["capabilities"],
    ["clusters"],
    ["plugins"],
    ["local", "ps"],
    ["local", "preempt"],
]
OPTIONS = [
    "--json",
    "--reason",
    "--for",
    "--idempotency-key",
    "--accept-unenforced",
    "--timeline",
    "--svg",
    "--state",
    "--active",
    "--rank",
    "--stderr",
    "--submission",
    "--all",
    "--no-wait",
    "--help",
]
#: What a shell hands over for bytes that are not UTF-8: surrogate escapes.
undecodable = st.binary(min_size=1, max_size=6).map(lambda b: b.decode(errors="surrogateescape"))
values = st.one_of(
    text,
    undecodable,
    durations.map(str),
    st.integers().map(str),
    st.sampled_from(["", "\n", "a\nb", "-1", "0", "1", "nan", "ok.toml", "out/x.svg", "pending"]),
)


def _relative(token: str) -> bool:
    """Fuzzed paths stay inside the test's folder: none absolute, none from the home folder.
    And no NUL: an operating system cannot pass one in an argument."""
    return not token.lstrip().startswith(("/", "~")) and "\x00" not in token


tokens = st.one_of(st.sampled_from(OPTIONS), values, st.just("JOB")).filter(_relative)


@FUZZ
@given(
    command=st.sampled_from(COMMANDS),
    args=st.lists(tokens, max_size=5),
    actor=st.one_of(st.none(), values),
    store=st.one_of(st.none(), values.filter(_relative)),
)
def test_any_arguments_end_in_a_documented_code(
    invoke: Invoke,
    at_home: Path,
    command: list[str],
    args: list[str],
    actor: str | None,
    store: str | None,
) -> None:
    (at_home / "ok.toml").write_text('name = "a"\ncommand = ["true"]\n')
    known = invoke("--store", "records", "submit", "--json", "ok.toml")
    assert known.code == 0, known.err
    job = known.json()["job"]
    argv = ["--as", actor] if actor is not None else []
    argv += ["--store", store if store is not None else "records"]
    argv += command + [job if a == "JOB" else a for a in args]
    _told(invoke(*argv), NOT_RUN)


@FUZZ
@given(poll=values, ttl=values)
def test_any_supervisor_options_end_in_a_documented_code(
    invoke: Invoke, at_home: Path, monkeypatch: pytest.MonkeyPatch, poll: str, ttl: str
) -> None:
    from jobdispatch_supervise import Supervisor

    # Serving would last until stopped; the options are read and the supervisor made (which
    # is where a poll or ttl that cannot work is refused), then it returns at once.
    monkeypatch.setattr(Supervisor, "serve", lambda self: None)
    _told(invoke("--store", "records", "supervise", "--poll", poll, "--lease-ttl", ttl), NOT_RUN)


local_table = st.fixed_dictionaries(
    {"adapter": st.sampled_from(["local", "memory"])},
    optional={
        "grace": st.one_of(st.floats(), st.integers(), text),
        "poll": st.one_of(st.floats(), st.integers(), text),
        "other": anything,
    },
)
sink_table = st.fixed_dictionaries(
    {"sink": st.one_of(st.sampled_from(["command", "log", "nope"]), anything)},
    optional={
        "argv": st.one_of(st.lists(st.one_of(text, scalars), max_size=3), anything),
        "timeout": st.one_of(st.floats(), st.integers(), text),
        "name": text,
        "other": anything,
    },
)


@FUZZ
@given(
    clusters=st.dictionaries(text, local_table, max_size=2),
    sinks=st.dictionaries(text, sink_table, max_size=2),
)
def test_any_configuration_a_supervisor_is_built_from_is_told(
    invoke: Invoke,
    at_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    clusters: dict[str, Any],
    sinks: dict[str, Any],
) -> None:
    from jobdispatch_supervise import Supervisor

    # Clusters of in-process adapters only (a fuzzed Slurm cluster would reach for a real
    # one), and escalation sinks of any kind: both are built, then serving returns at once.
    monkeypatch.setattr(Supervisor, "serve", lambda self: None)
    path = at_home / "config.toml"
    path.write_text(_toml_document({"clusters": clusters, "escalations": sinks}))
    for name in [None, *clusters]:
        argv = ["--config", str(path), "--store", "records"]
        argv += ["--cluster", name] if name is not None else []
        _told(invoke(*argv, "supervise"), NOT_RUN)
