"""Where everything lives under the checkpoint root, as pure functions of names and steps.

Under ``<root>/<job>/``::

    log/<inverted step>.step-<step>.json     publication entries, create-only, never rewritten
    pruned/<step>.json                       withdrawal markers, create-only: do not resolve
    swept/<step>.json                        the withdrawn checkpoint's data is deleted
    pins/<step>/<holder>.json                a resolve fetching this step right now
    executions/<submission>/<execution>/step-<step>.<millis>-<token>/...   one save's data

The log key carries the step *inverted* (``10**18 - 1 - step``, zero-padded): S3 lists keys in
ascending order only, so with the inversion the newest checkpoint is the first key listed and
resolve reads one short page however long the log is. The key depends on the step alone, so two
executions publishing the same step race for the same key and a create-only write lets exactly
one win. Data folders carry a creation time and a random token: no publish ever writes into a
folder another publish (or a zombie of the same execution) could be writing, and an abandoned
folder's age can be read from its name.
"""

from __future__ import annotations

import re
import secrets
import time

from jobdispatch_publish.identity import Identity

__all__ = [
    "MAX_STEP",
    "data_prefix",
    "entry_key",
    "job_prefix",
    "parse_data_folder",
    "parse_entry_key",
    "pin_key",
    "pins_prefix",
    "pruned_key",
    "step_of_marker",
    "swept_key",
]

MAX_STEP = 10**18 - 1
_WIDTH = 18
_ENTRY = re.compile(r"(?P<inv>[0-9]{18})\.step-(?P<step>[0-9]+)\.json")
_DATA = re.compile(r"step-(?P<step>[0-9]+)\.(?P<millis>[0-9]+)-(?P<token>[0-9a-f]+)")
_MARKER = re.compile(r"(?P<step>[0-9]{18})\.json")


def check_step(step: int) -> int:
    """A step is a whole number from 0 to :data:`MAX_STEP`."""
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        msg = f"step must be a whole number from 0 to {MAX_STEP}, got {step!r}"
        raise ValueError(msg)
    return step


def job_prefix(job: str) -> str:
    return f"{job}/"


def log_prefix(job: str) -> str:
    return f"{job}/log/"


def entry_key(job: str, step: int) -> str:
    check_step(step)
    return f"{job}/log/{MAX_STEP - step:0{_WIDTH}d}.step-{step}.json"


def parse_entry_key(key: str) -> int | None:
    """The step of a log key, or ``None`` for a key that is not an entry (a stray file)."""
    m = _ENTRY.fullmatch(key.rsplit("/", 1)[-1])
    if m is None:
        return None
    step = int(m["step"])
    return step if MAX_STEP - step == int(m["inv"]) else None


def pruned_prefix(job: str) -> str:
    return f"{job}/pruned/"


def pruned_key(job: str, step: int) -> str:
    return f"{job}/pruned/{check_step(step):0{_WIDTH}d}.json"


def swept_prefix(job: str) -> str:
    return f"{job}/swept/"


def swept_key(job: str, step: int) -> str:
    return f"{job}/swept/{check_step(step):0{_WIDTH}d}.json"


def step_of_marker(key: str) -> int | None:
    m = _MARKER.fullmatch(key.rsplit("/", 1)[-1])
    return None if m is None else int(m["step"])


def pins_prefix(job: str, step: int | None = None) -> str:
    if step is None:
        return f"{job}/pins/"
    return f"{job}/pins/{check_step(step):0{_WIDTH}d}/"


def pin_key(job: str, step: int, holder: str) -> str:
    return f"{pins_prefix(job, step)}{holder}.json"


def executions_prefix(job: str) -> str:
    return f"{job}/executions/"


def execution_prefix(identity: Identity) -> str:
    return f"{identity.job}/executions/{identity.submission}/{identity.execution}/"


def data_prefix(identity: Identity, step: int, *, now: float | None = None) -> str:
    """A fresh, never-used folder for one publish of ``step`` by ``identity``."""
    millis = int((time.time() if now is None else now) * 1000)
    token = secrets.token_hex(6)
    return f"{execution_prefix(identity)}step-{check_step(step)}.{millis}-{token}/"


def parse_data_folder(name: str) -> tuple[int, float] | None:
    """The step and creation time (seconds) of a data folder's name, or ``None``."""
    m = _DATA.fullmatch(name.rstrip("/").rsplit("/", 1)[-1])
    if m is None:
        return None
    return int(m["step"]), int(m["millis"]) / 1000
