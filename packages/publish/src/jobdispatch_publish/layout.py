"""Where everything lives under the checkpoint root, as pure functions of names and steps.

Under ``<root>/<job>/``::

    log/<inverted step>.step-<step>.json     publication entries, create-only, never rewritten
    pruned/<step>.json                       withdrawal markers, create-only: do not resolve
    swept/<step>.json                        the withdrawn checkpoint's data is deleted
    pins/<step>/<holder>.json                a resolve fetching this step right now
    executions/<submission>/<execution>/step-<step>.<millis>-<token>/...   one save's data

and, beside the jobs, one folder for every job's progress::

    _progress/<job>,<inverted millis>,<kind>,<submission>,<step>,<execution>    (empty objects)

The log key carries the step *inverted* (``10**18 - 1 - step``, zero-padded): S3 lists keys in
ascending order only, so with the inversion the newest checkpoint is the first key listed and
resolve reads one short page however long the log is. The key depends on the step alone, so two
executions publishing the same step race for the same key and a create-only write lets exactly
one win. Data folders carry a creation time and a random token: no publish ever writes into a
folder another publish (or a zombie of the same execution) could be writing, and an abandoned
folder's age can be read from its name.

Progress lives in one flat folder for the whole root, so that a supervisor learns every job's
newest step with *one* listing (one ``ListObjectsV2`` pagination, one ``scandir``) and no read
of any object: everything it needs is in the key's name, and the objects are empty. The name
starts with the job and a ``,`` (a character no job name may hold, and lower than every one that
may), so one job's keys are contiguous; then the time, inverted like the log's steps, so a job's
newest key is listed first; then the kind (``mark``, ``published``, ``resumed``), the submission,
the step (``-`` for a resumed entry of an execution that found nothing to resume from) and the
execution last (it may hold ``.`` and ``-``, and nothing after it needs parsing). ``_progress``
cannot be a job's folder: a job name starts with a letter or digit.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import time
from typing import Literal

import attrs

from jobdispatch_publish.errors import BadStep
from jobdispatch_publish.identity import Identity

__all__ = [
    "MAX_MILLIS",
    "MAX_STEP",
    "PROGRESS_KINDS",
    "PROGRESS_PREFIX",
    "ProgressKey",
    "ProgressKind",
    "data_prefix",
    "entry_key",
    "job_prefix",
    "parse_data_folder",
    "parse_entry_key",
    "parse_progress_key",
    "pin_key",
    "pins_prefix",
    "progress_fields",
    "progress_prefix",
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
    """A step is a whole number from 0 to :data:`MAX_STEP`; :class:`BadStep` (exit 3) if not."""
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        msg = f"step must be a whole number from 0 to {MAX_STEP}, got {step!r}"
        raise BadStep(msg)
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


# -- progress ----------------------------------------------------------------------------------

PROGRESS_PREFIX = "_progress/"
#: Key times are milliseconds since the epoch, 13 digits (until the year 2286).
MAX_MILLIS = 10**13 - 1
_MILLIS_WIDTH = 13
ProgressKind = Literal["mark", "published", "resumed"]
PROGRESS_KINDS: tuple[ProgressKind, ...] = ("mark", "published", "resumed")
_KINDS: dict[str, ProgressKind] = {k: k for k in PROGRESS_KINDS}
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_PROGRESS = re.compile(
    rf"(?P<job>{_NAME}),(?P<inv>[0-9]{{{_MILLIS_WIDTH}}}),(?P<kind>mark|published|resumed),"
    rf"(?P<sub>[1-9][0-9]{{0,8}}),(?P<step>0|[1-9][0-9]{{0,17}}|-),(?P<exec>{_NAME})"
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def millis_of(when: dt.datetime) -> int:
    """Whole milliseconds since the epoch, exactly (no float rounding); ``when`` must be aware."""
    if when.tzinfo is None:
        msg = f"a progress time must be timezone-aware, got {when!r}"
        raise ValueError(msg)
    return (when - _EPOCH) // dt.timedelta(milliseconds=1)


def time_of(millis: int) -> dt.datetime:
    """The UTC time of a key's milliseconds."""
    return _EPOCH + dt.timedelta(milliseconds=millis)


@attrs.frozen
class ProgressKey:
    """What one progress key says: a job's execution reached ``step`` at ``millis``.

    ``mark``: the job called ``progress``; ``published``: it published a checkpoint of that step;
    ``resumed``: its ``resolve`` handed over the checkpoint of that step (``None``: nothing was
    published, the execution started fresh). Only ``resumed`` may lack a step.
    """

    kind: ProgressKind
    job: str
    submission: int
    execution: str
    step: int | None
    millis: int

    def __attrs_post_init__(self) -> None:
        if self.kind not in PROGRESS_KINDS:
            msg = f"progress kind must be one of {', '.join(PROGRESS_KINDS)}, got {self.kind!r}"
            raise ValueError(msg)
        for what, name in (("job", self.job), ("execution", self.execution)):
            if not re.fullmatch(_NAME, name):
                msg = f"{what} {name!r} is not a valid name"
                raise ValueError(msg)
        if not 1 <= self.submission <= 999_999_999:
            msg = f"submission must be from 1 to 999999999, got {self.submission}"
            raise ValueError(msg)
        if self.step is None:
            if self.kind != "resumed":
                msg = f"a {self.kind} key needs a step"
                raise ValueError(msg)
        else:
            check_step(self.step)
        if not 0 <= self.millis <= MAX_MILLIS:
            msg = f"a progress time must be from 1970 to 2286, got {self.millis} ms"
            raise ValueError(msg)

    @property
    def at(self) -> dt.datetime:
        return time_of(self.millis)

    def key(self) -> str:
        step = "-" if self.step is None else str(self.step)
        return (
            f"{PROGRESS_PREFIX}{self.job},{MAX_MILLIS - self.millis:0{_MILLIS_WIDTH}d},"
            f"{self.kind},{self.submission},{step},{self.execution}"
        )


def progress_key(
    kind: ProgressKind, identity: Identity, step: int | None, when: dt.datetime
) -> str:
    """The key of one progress record of ``identity`` at ``when``."""
    return ProgressKey(
        kind, identity.job, identity.submission, identity.execution, step, millis_of(when)
    ).key()


def progress_prefix(job: str | None = None) -> str:
    """The folder every job's progress is under, or the start of one job's keys in it."""
    return PROGRESS_PREFIX if job is None else f"{PROGRESS_PREFIX}{job},"


#: The fields of a progress key, as :func:`progress_fields` gives them.
ProgressFields = tuple[str, int, ProgressKind, int, "int | None", str]


def progress_fields(key: str) -> ProgressFields | None:
    """(job, millis, kind, submission, step, execution) of a progress key, or ``None``.

    The pattern is the whole check (names, digits, no leading zeros, a step for every kind but
    ``resumed``), so the reader can take a listing of tens of thousands of keys through this
    without building an object per key. Pure.
    """
    if not key.startswith(PROGRESS_PREFIX):
        return None
    m = _PROGRESS.fullmatch(key, len(PROGRESS_PREFIX))
    if m is None:
        return None
    job, inv, kind, sub, step, execution = m.groups()
    of_kind = _KINDS[kind]  # the pattern admits the three kinds only
    if step == "-":
        if kind != "resumed":
            return None
        return job, MAX_MILLIS - int(inv), of_kind, int(sub), None, execution
    return job, MAX_MILLIS - int(inv), of_kind, int(sub), int(step), execution


def parse_progress_key(key: str) -> ProgressKey | None:
    """What a progress key says, or ``None`` for anything else (a stray file, a tampered name).

    Pure: the reader lists the folder once and gives every key here, no object is read.
    """
    fields = progress_fields(key)
    if fields is None:
        return None
    job, millis, kind, submission, step, execution = fields
    return ProgressKey(kind, job, submission, execution, step, millis)
