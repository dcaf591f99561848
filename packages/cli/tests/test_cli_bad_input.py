"""Bad input ends in a clear error with a documented exit code, never a traceback (issue 14,
item 5). Each test runs the command in this process: an exception escaping ``main`` (what a
person would see as a traceback, exit 1) fails the test by itself."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jobdispatch_cli.jobfile import MAX_ALIAS_EXPANSION, MAX_DEPTH

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)

# The nine levels of nested aliases, each nine times the one before: 9**7 values in 600 bytes.
ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
name: x
command: *g
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _usage(ran: Any, *words: str) -> None:
    assert ran.code == 2, ran.err
    for word in words:
        assert word in ran.err, ran.err


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ('"99999999999d"', "time_limit"),
        ("1e20", "time_limit"),
        ("inf", "time_limit"),
        ("99999999999999999999999", "time_limit"),
    ],
)
def test_a_time_limit_out_of_range_names_its_line(
    invoke: Invoke, tmp_path: Path, value: str, field: str
) -> None:
    path = _write(tmp_path, "t.toml", f'name = "a"\ncommand = ["true"]\n{field} = {value}\n')
    _usage(invoke("plan", str(path)), f"{path}:3: {field}:", "too long", "36500d")


def test_a_nan_time_limit_is_not_a_duration(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(tmp_path, "t.toml", 'name = "a"\ncommand = ["true"]\ntime_limit = nan\n')
    _usage(invoke("plan", str(path)), f"{path}:3: time_limit: not a duration")


def test_a_hold_for_longer_than_a_century_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    text = (
        'name = "a"\ncommand = ["true"]\n[[recovery.rules]]\non = ["preempted"]\n'
        'action = "hold"\nfor = 1e300\n'
    )
    path = _write(tmp_path, "f.toml", text)
    _usage(invoke("plan", str(path)), f"{path}:6: recovery.rules[0].for:", "too long")
    # Within what a timedelta holds, past the core's bound (which the command reads with).
    path.write_text(text.replace("1e300", '"999999d"'))
    _usage(invoke("plan", str(path)), f"{path}:6: recovery.rules[0].for:", "at most 36500d")


def test_hold_for_out_of_range_is_a_bad_option(invoke: Invoke) -> None:
    _usage(invoke("hold", "somejob", "--for", "99999999999d"), "'--for'", "too long")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--lease-ttl", "99999999999d"], ["'--lease-ttl'", "too long"]),
        (["--lease-ttl", "0"], ["'--lease-ttl'", "must be positive"]),
        (["--lease-ttl", "-5s"], ["'--lease-ttl'"]),
        (["--poll", "nan"], ["'--poll'", "not a finite number"]),
        (["--poll", "inf"], ["'--poll'", "not a finite number"]),
        # Found by the long fuzz run: the reporter thread's wait overflowed (a traceback).
        (["--poll", "1e300"], ["'--poll'", "3153600000"]),
    ],
)
def test_supervisor_options_that_cannot_work_are_refused_at_once(
    invoke: Invoke, args: list[str], words: list[str]
) -> None:
    # Before the fix these started a supervisor: serving (a NaN poll spins a core; a ttl of 0
    # fails at the first lease) until stopped. Refused, they return before serving anything.
    _usage(invoke("supervise", *args), *words)


def test_run_refuses_a_nan_poll_before_submitting(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(tmp_path, "ok.toml", 'name = "a"\ncommand = ["true"]\n')
    _usage(invoke("run", str(path), "--poll", "nan"), "'--poll'")
    assert invoke("list", "--json").json() == []


def test_watch_refuses_a_nan_interval(invoke: Invoke) -> None:
    _usage(invoke("watch", "somejob", "--every", "nan"), "'--every'")


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_deeply_nested_job_files_are_refused(invoke: Invoke, tmp_path: Path, suffix: str) -> None:
    head = 'name = "a"\ncommand = ["true"]\nx = ' if suffix == ".toml" else "name: a\nx: "
    for depth in (5000, MAX_DEPTH + 2):
        path = _write(tmp_path, f"d{suffix}", head + "[" * depth + "]" * depth + "\n")
        _usage(invoke("plan", str(path)), str(path), f"nest more than {MAX_DEPTH} levels")
    # Within what the parsers can read, the message names the key and its line.
    ran = invoke("plan", str(path))
    assert f"{path}:{3 if suffix == '.toml' else 2}: x: values nest" in ran.err, ran.err


def test_a_deeply_nested_config_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    for depth in (5000, MAX_DEPTH + 2):
        path = _write(tmp_path, "cfg.toml", "x = " + "[" * depth + "]" * depth + "\n")
        _usage(invoke("--config", str(path), "list"), str(path), "nest more than")


def test_a_yaml_alias_bomb_is_refused_before_it_expands(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(tmp_path, "laughs.yaml", ALIAS_BOMB)
    tracemalloc.start()
    try:
        ran = invoke("plan", str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _usage(ran, str(path), f"more than {MAX_ALIAS_EXPANSION} repeated values")
    # Expanding it took 230 MB for six levels; refusing it must not build the values at all.
    assert peak < 20 * 2**20


def test_a_yaml_alias_that_contains_itself_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(tmp_path, "loop.yaml", "name: a\ncommand: &c [x, *c]\n")
    _usage(invoke("plan", str(path)), f"{path}:2: command", "nest more than")


def test_a_few_yaml_aliases_still_read(invoke: Invoke, tmp_path: Path) -> None:
    text = "name: a\ncommand: &c [echo, hi]\nenv: {A: &v one, B: *v}\n"
    ran = invoke("plan", str(_write(tmp_path, "ok.yaml", text)), "--json")
    assert ran.code == 0, ran.err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("name: !unknown a\ncommand: [x]\n", [":1: name: cannot be read"]),
        ("name: a\ncommand: [x]\nwhen: 2024-13-40\n", [":3: when: cannot be read"]),
        ("? [a, b]\n: c\nname: a\ncommand: [x]\n", [":1:", "keys must be plain words"]),
    ],
)
def test_yaml_values_that_cannot_be_built_name_their_line(
    invoke: Invoke, tmp_path: Path, text: str, words: list[str]
) -> None:
    _usage(invoke("plan", str(_write(tmp_path, "j.yaml", text))), *words)


def test_a_job_id_that_is_not_utf8_is_bad_input(invoke: Invoke) -> None:
    # What a shell passes for $'\xff\xfe': Python decodes argv with surrogate escapes.
    ran = invoke("status", b"\xff\xfe".decode(errors="surrogateescape"))
    _usage(ran, "job id", "not UTF-8 text")


def test_an_svg_into_a_missing_folder_is_not_found(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(tmp_path, "ok.toml", 'name = "a"\ncommand = ["true"]\n')
    job = invoke("submit", "--json", str(path)).json()["job"]
    target = tmp_path / "missing-dir" / "x.svg"
    ran = invoke("status", job, "--svg", str(target))
    assert ran.code == 3, ran.err
    assert f"--svg {target}: no such folder {target.parent}" in ran.err


def test_a_store_folder_that_cannot_be_created_is_named(invoke: Invoke, tmp_path: Path) -> None:
    blocker = _write(tmp_path, "a-file", "")
    _usage(invoke("--store", str(blocker / "store"), "list"), "cannot create the store folder")
    proc = invoke("--store", "/proc/nope", "list")
    _usage(proc, "cannot create the store folder /proc/nope", "--store")


def test_a_state_home_that_cannot_be_created_is_named(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = _write(tmp_path, "not-a-dir", "")
    config = tmp_path / "c.toml"
    config.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    ran = invoke("--config", str(config), "list")
    _usage(ran, f"cannot create the store folder {blocker}", "XDG_STATE_HOME")


def test_a_config_file_named_and_missing_is_not_found(invoke: Invoke, tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    ran = invoke("--config", str(missing), "list")
    assert ran.code == 3 and f"{missing}: no such file" in ran.err


def test_a_config_named_by_the_environment_and_missing_is_not_found(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope.toml"
    monkeypatch.setenv("JOBDISPATCH_CONFIG", str(missing))
    ran = invoke("clusters")
    assert ran.code == 3 and f"{missing}: no such file" in ran.err


def test_the_default_config_may_be_missing(invoke: Invoke, home: Path) -> None:
    (home / "config" / "jobdispatch" / "config.toml").unlink()
    ran = invoke("clusters", "--json")
    assert ran.code == 0, ran.err


def test_a_config_that_cannot_be_read_is_named(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("--config", str(tmp_path), "list")  # a folder, not a file
    _usage(ran, str(tmp_path))


def test_a_missing_job_file_is_not_found(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("plan", str(tmp_path / "nope.toml"))
    assert ran.code == 3 and f"{tmp_path}/nope.toml: no such file" in ran.err


@pytest.mark.parametrize("actor", ["", "  ", "a\nb", "a\x1bb", "ok\u2028no"])
def test_an_actor_that_cannot_be_recorded_is_refused(
    invoke: Invoke, tmp_path: Path, actor: str
) -> None:
    path = _write(tmp_path, "ok.toml", 'name = "a"\ncommand = ["true"]\n')
    job = invoke("submit", "--json", str(path)).json()["job"]
    _usage(invoke("--as", actor, "cancel", job), "'--as'")
    assert invoke("status", job, "--json").json()["state"] == "pending"
    ran = invoke("--as", "ops", "cancel", job)
    assert ran.code == 0 and "human:ops" in ran.out


# Found by the fuzz tests (test_cli_fuzz.py): each was a traceback before.


@pytest.mark.parametrize("key", ["working_dir", "output"])
def test_a_path_with_a_nul_byte_is_told_by_its_field(
    invoke: Invoke, tmp_path: Path, key: str
) -> None:
    path = _write(tmp_path, "n.toml", f'name = "a"\ncommand = ["true"]\n{key} = "a\\u0000b"\n')
    _usage(invoke("plan", str(path)), f"{path}:3: {key}:", "NUL")


def test_a_path_from_an_unknown_users_home_is_told(invoke: Invoke, tmp_path: Path) -> None:
    path = _write(
        tmp_path, "u.toml", 'name = "a"\ncommand = ["true"]\noutput = "~no-such-user-x"\n'
    )
    _usage(invoke("plan", str(path)), f"{path}:3: output:", "unknown user")
    config = _write(tmp_path, "c.toml", 'store = "~no-such-user-x/records"\n')
    _usage(invoke("--config", str(config), "list"), f"{config}:1: store:", "unknown user")


def test_a_store_path_that_is_not_utf8_is_told(invoke: Invoke) -> None:
    ran = invoke("--store", b"st\xffore".decode(errors="surrogateescape"), "list")
    _usage(ran, "store folder", "not UTF-8 text")


def test_a_store_path_with_a_nul_byte_is_told(invoke: Invoke, tmp_path: Path) -> None:
    config = _write(tmp_path, "c.toml", 'store = "a\\u0000b"\n')
    _usage(invoke("--config", str(config), "list"), f"{config}:1: store: must be a directory")


@pytest.mark.parametrize(
    ("lines", "field"),
    [
        ('name = "a\\n"\ncommand = ["true"]\n', "name"),
        ('name = "a"\ncommand = ["true"]\n[env]\n"A\\n" = "x"\n', "env.A"),
        ('name = "a"\ncommand = ["true"]\n[resources]\nqueue = "gpu\\n"\n', "resources.queue"),
        ('name = "a"\ncommand = ["true"]\n[resources]\naccount = "p\\n"\n', "resources.account"),
        (
            'name = "a"\ncommand = ["true"]\n[resources]\ngpus_per_node = 1\ngpu_type = "h\\n"\n',
            "resources.gpu_type",
        ),
        (
            'name = "a"\ncommand = ["true"]\n[resources]\nconstraints = ["ib\\n"]\n',
            "resources.constraints[0]",
        ),
    ],
)
def test_a_trailing_newline_is_refused_naming_the_field(
    invoke: Invoke, tmp_path: Path, lines: str, field: str
) -> None:
    path = _write(tmp_path, "t.toml", lines)
    for command in ("plan", "submit"):
        _usage(invoke(command, str(path)), f"{field}")
    assert not (tmp_path / "state" / "records").exists()  # nothing was recorded


def test_a_trailing_newline_in_a_cluster_setting_is_refused(invoke: Invoke, home: Path) -> None:
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text('[clusters.box]\nadapter = "local"\ngpu_type = "a100\\n"\n')
    _usage(invoke("clusters"), f"{config}:3: clusters.box.gpu_type")
