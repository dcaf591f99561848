"""Progress marks: a job says "I reached step N", as often as every step, for almost nothing.

A supervisor that sees only endings cannot tell a job that trains from one hung in a collective.
So a job marks its step, and the supervisor lists every job's marks under a checkpoint root at
once (:mod:`jobdispatch_publish.reader`). A mark is an empty object whose *name* says everything
(:class:`~jobdispatch_publish.layout.ProgressKey`), so the listing alone is enough.

Marking is throttled: :meth:`Marker.mark` writes at most once per ``interval`` (60 s unless the
job's settings say otherwise), and only when the step moved since the last write; every other
call only remembers the step, in a few microseconds. Each write replaces the mark before it (one
``rename`` on POSIX, a ``PutObject`` and a ``DeleteObjects`` on S3), so an execution keeps one
mark in the listing however long it runs. The mark written lags the job by at most one interval;
:meth:`Marker.flush` writes the last step at once (before a long pause, or at the end).

The throttle's state (when the last mark was written, its step and key) is kept by the
:class:`Marker` between calls in one process, and by :class:`StateFile`, a small locked file in
the node's temporary folder, between the processes that ``jobdispatch-publish progress`` starts.

Every publication is progress too: :func:`record_publication` leaves a ``published`` key for
the step published, and :func:`record_resumed` the ``resumed`` entry ``resolve`` writes.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import logging
import math
import operator
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Invalid

from jobdispatch_publish import layout
from jobdispatch_publish.errors import BadStep, can_heal
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.store import Exists, Store

__all__ = [
    "DEFAULT_INTERVAL",
    "ENV_INTERVAL",
    "ENV_STATE",
    "MarkState",
    "Marker",
    "StateFile",
    "check_step",
    "parse_interval",
    "parse_step",
    "progress",
    "record_publication",
    "record_resumed",
]

log = logging.getLogger(__name__)

#: Seconds between two marks of one execution unless the job's settings say otherwise: with a
#: stall rule of tens of minutes, a minute's lag is nothing, and 1,440 small writes a day per job
#: cost nothing on any store.
DEFAULT_INTERVAL = 60.0
ENV_INTERVAL = "JOBDISPATCH_PROGRESS_INTERVAL"
ENV_STATE = "JOBDISPATCH_PROGRESS_STATE"
_TICK = 1e-6

Clock = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def check_step(step: object, *, where: str = "step") -> int:
    """``step`` as an ``int`` (anything with ``__index__``: numpy and torch integers too), or
    :class:`BadStep` naming ``where`` and what is wrong. Booleans and floats are refused."""
    if isinstance(step, bool | float):
        msg = f"{where}: {step!r} is not a whole number (a step is 0, 1, 2, ...)"
        raise BadStep(msg)
    try:
        value = operator.index(step)  # type: ignore[arg-type]
    except TypeError:
        msg = f"{where}: {step!r} is not a whole number (a step is 0, 1, 2, ...)"
        raise BadStep(msg) from None
    if value < 0:
        msg = f"{where}: {value} is negative (a step is 0, 1, 2, ...)"
        raise BadStep(msg)
    if value > layout.MAX_STEP:
        msg = f"{where}: {value} is above the largest step, {layout.MAX_STEP}"
        raise BadStep(msg)
    return value


def parse_step(text: str, *, where: str = "--step") -> int:
    """A step given as text (a flag): digits only, else :class:`BadStep` saying why."""
    stripped = text.strip()
    if stripped.startswith("-") and stripped[1:].isdigit():
        msg = f"{where}: {stripped} is negative (a step is 0, 1, 2, ...)"
        raise BadStep(msg)
    if not (stripped.isascii() and stripped.isdigit()):
        msg = f"{where}: {text!r} is not a whole number (a step is 0, 1, 2, ...)"
        raise BadStep(msg)
    return check_step(int(stripped), where=where)


def parse_interval(value: object, *, where: str) -> float:
    """Seconds between marks: a finite number above 0, from a flag, a variable or the
    configuration; :class:`Invalid` naming ``where`` otherwise."""
    number: float
    if isinstance(value, bool):
        number = math.nan
    elif isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
    else:
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        msg = f"{where}: {value!r} is not an interval: give a number of seconds above 0 (e.g. 60)"
        raise Invalid(msg)
    return number


def interval_from(
    env: Mapping[str, str], settings: Any, given: object = None, *, where: str = "--interval"
) -> float:
    """The interval: given (``--interval``, an argument), else the variable, else the
    configuration's ``[progress] interval``, else :data:`DEFAULT_INTERVAL`; each validated and
    named where it came from."""
    if given is not None:
        return parse_interval(given, where=where)
    if env.get(ENV_INTERVAL) is not None:
        return parse_interval(env[ENV_INTERVAL], where=ENV_INTERVAL)
    if settings.progress_interval is not None:
        return parse_interval(
            settings.progress_interval, where=f"{settings.origin}: progress.interval"
        )
    return DEFAULT_INTERVAL


@attrs.define
class MarkState:
    """What the throttle remembers between calls: the last write's time (epoch seconds) and
    step, the keys of the marks this writer left (to be replaced by the next), and the newest
    step asked for that is not written yet."""

    last_at: float | None = None
    last_step: int | None = None
    live: list[str] = attrs.field(factory=list)
    pending: int | None = None
    adopted: bool = False

    def due(self, now: float, step: int, interval: float) -> bool:
        """Whether a call at ``now`` for ``step`` writes: the first call does; later ones once
        ``interval`` has passed since the last write, and only if the step moved (a job that
        repeats one step is not advancing). A clock set back writes at once rather than going
        silent until it catches up."""
        if self.last_at is None:
            return True
        if step == self.last_step:
            return False
        elapsed = now - self.last_at
        # Epoch seconds as floats keep about a microsecond: an interval that has passed to the
        # microsecond has passed (1.1 s after 1.7e9 s reads 1.0999999 s).
        return elapsed < 0 or elapsed >= interval - _TICK

    def to_json(self) -> str:
        return json.dumps(self.to_doc(), sort_keys=True)

    def to_doc(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, text: str) -> MarkState:
        """The state a text holds; an empty state for anything that is not one (the file is a
        cache: losing it costs one extra mark and one listing)."""
        try:
            return cls.from_doc(json.loads(text))
        except ValueError:
            return cls()

    @classmethod
    def from_doc(cls, doc: object) -> MarkState:
        """The state a parsed document holds; an empty state for anything that is not one."""
        if not isinstance(doc, dict):
            return cls()
        try:
            state = cls(
                last_at=doc["last_at"],
                last_step=doc["last_step"],
                live=list(doc["live"]),
                pending=doc.get("pending"),
                adopted=bool(doc.get("adopted", False)),
            )
        except (KeyError, TypeError):
            return cls()
        ok = (
            (state.last_at is None or isinstance(state.last_at, int | float))
            and (state.last_step is None or isinstance(state.last_step, int))
            and (state.pending is None or isinstance(state.pending, int))
            and all(isinstance(k, str) and layout.parse_progress_key(k) for k in state.live)
        )
        return state if ok else cls()


def _of(parsed: layout.ProgressKey, identity: Identity) -> bool:
    """Whether a progress key is of ``identity``'s own execution."""
    return (parsed.job, parsed.submission, parsed.execution) == (
        identity.job,
        identity.submission,
        identity.execution,
    )


def _own_mark(key: str, identity: Identity) -> bool:
    """Whether ``key`` is a progress mark of ``identity``'s own execution."""
    parsed = layout.parse_progress_key(key)
    return parsed is not None and parsed.kind == "mark" and _of(parsed, identity)


class Marker:
    """The throttled progress marks of one execution, and their state between calls.

    Thread-safe. A failure that waiting may mend (the store unreachable, a full disk) is logged
    and not raised (unless ``raise_healable``, as the command does to exit 5), so a blip of the
    store never stops training; the next try comes an interval later. A failure no wait mends (a
    missing root, refused credentials) is raised.
    """

    def __init__(
        self,
        store: Store,
        identity: Identity,
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Clock = _utcnow,
        state: MarkState | None = None,
        raise_healable: bool = False,
    ) -> None:
        self.store = store
        self.raise_healable = raise_healable
        self.identity = identity
        self.interval = parse_interval(interval, where="interval")
        self.clock = clock
        self.state = state if state is not None else MarkState()
        # An execution replaces its own marks and nothing else, whatever a state file says.
        self.state.live = [k for k in self.state.live if _own_mark(k, identity)]
        self._lock = threading.Lock()

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        interval: float | None = None,
        config: str | None = None,
        clock: Clock = _utcnow,
    ) -> Marker:
        """A marker for the execution the environment names (the variables the adapters set,
        the root, the configuration file), its store opened now so that a bad value or missing
        credentials are reported before training starts."""
        from jobdispatch_publish.config import load_settings
        from jobdispatch_publish.identity import identity_from
        from jobdispatch_publish.root import root_of
        from jobdispatch_publish.stores import open_store

        settings = load_settings(config, env)
        root = root_of(settings, env)
        identity = identity_from(env)
        chosen = interval_from(env, settings, interval, where="interval")
        store = open_store(root, settings, env)
        return cls(store, identity, interval=chosen, clock=clock)

    def mark(self, step: object) -> bool:
        """Note that training reached ``step``; write a mark if one is due. True if written."""
        value = check_step(step)
        now = self.clock()
        with self._lock:
            if not self.state.due(now.timestamp(), value, self.interval):
                if value != self.state.last_step:
                    self.state.pending = value
                return False
            return self._write(value, now)

    def flush(self) -> bool:
        """Write the newest step asked for, if it is not written yet, whatever the interval."""
        with self._lock:
            step = self.state.pending
            if step is None or step == self.state.last_step:
                return False
            return self._write(step, self.clock())

    def _adopt(self) -> None:
        """Once per writer: take over the marks an earlier process of this execution left (a
        restarted trainer), so that the next write replaces them too. One listing of the job's
        own keys."""
        self.state.adopted = True
        ident = self.identity
        for key in self.store.keys(layout.progress_prefix(ident.job)):
            if _own_mark(key, ident) and key not in self.state.live:
                self.state.live.append(key)

    def _write(self, step: int, now: dt.datetime) -> bool:
        key = layout.progress_key("mark", self.identity, step, now)
        try:
            if not self.state.adopted:
                self._adopt()
            self.store.replace_marks(key, list(self.state.live))
        except Exception as exc:
            if not can_heal(exc):
                raise
            self.state.last_at = now.timestamp()  # the next try an interval later, not next step
            self.state.pending = step
            # The new mark may have been written before the failure (S3: the PUT went through,
            # the DELETE did not): the next write replaces it too, whether it exists or not.
            if key not in self.state.live:
                self.state.live.append(key)
            if self.raise_healable:
                raise
            log.warning("progress mark of step %d not written (tried again later): %s", step, exc)
            return False
        self.state.live = [key]
        self.state.last_at = now.timestamp()
        self.state.last_step = step
        self.state.pending = None
        return True


class StateFile:
    """The :class:`MarkState` of one execution, kept in a small file between the processes of
    one node.

    ``jobdispatch-publish progress`` is a new process at every call; this file is how it knows
    whether a mark is due without asking the store. It is locked (``flock``) while a call reads
    and rewrites it; a call that finds it locked by another skips, since that other call is
    writing progress at this very moment. It holds one state per *owner* (the root and the
    execution), so a file shared by several executions (a fixed ``JOBDISPATCH_PROGRESS_STATE``)
    keeps a throttle for each, the :data:`MAX_OWNERS` most recent. It is a cache: lost or
    unreadable, it costs one extra mark and one listing.
    """

    #: Owners one file keeps, the most recently marked.
    MAX_OWNERS = 16

    def __init__(self, path: Path, owner: str) -> None:
        self.path = path
        self.owner = owner
        self._fd: int | None = None
        self._states: dict[str, Any] = {}

    @staticmethod
    def owner_of(root: str, identity: Identity) -> str:
        return f"{root} {identity.job} {identity.submission} {identity.execution}"

    @staticmethod
    def default_path(env: Mapping[str, str], root: str, identity: Identity) -> Path:
        """``$JOBDISPATCH_PROGRESS_STATE``, else a file named by the root and the execution in
        ``$XDG_RUNTIME_DIR`` or the temporary folder (per user: the uid is in the name)."""
        if env.get(ENV_STATE):
            return Path(env[ENV_STATE])
        folder = env.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
        ident = f"{root}\0{identity.job}\0{identity.submission}\0{identity.execution}"
        digest = hashlib.sha256(ident.encode()).hexdigest()[:20]
        return Path(folder) / f"jobdispatch-progress-{os.getuid()}-{digest}.json"

    def lock(self) -> MarkState | None:
        """This owner's state, with the file locked; ``None`` if another process holds it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            msg = f"{ENV_STATE}: the progress state file {self.path} cannot be opened ({exc})"
            raise Invalid(msg) from None
        if os.fstat(fd).st_uid != os.getuid():
            os.close(fd)
            msg = (
                f"{ENV_STATE}: the progress state file {self.path} belongs to another user; "
                f"set {ENV_STATE} to a file of your own"
            )
            raise Invalid(msg)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        self._fd = fd
        with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as f:
            text = f.read()
        try:
            doc = json.loads(text) if text.strip() else {}
        except ValueError:
            doc = {}
        states = doc.get("states") if isinstance(doc, dict) else None
        self._states = states if isinstance(states, dict) else {}
        return MarkState.from_doc(self._states.get(self.owner))

    def save(self, state: MarkState) -> None:
        """Rewrite the file (still locked) with this owner's ``state`` and the others'."""
        assert self._fd is not None, "save() without lock()"
        self._states[self.owner] = state.to_doc()

        def recency(item: tuple[str, Any]) -> float:
            at = item[1].get("last_at") if isinstance(item[1], dict) else None
            return at if isinstance(at, int | float) else 0.0

        kept = sorted(self._states.items(), key=recency, reverse=True)[: self.MAX_OWNERS]
        self._states = dict(kept)
        data = json.dumps({"states": self._states}, sort_keys=True).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def unlock(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor releases the lock
            self._fd = None


def record_publication(store: Store, identity: Identity, step: int, when: dt.datetime) -> None:
    """Leave the ``published`` key of a publication just made, and remove the older
    ``published`` keys of this execution (one listing of the job's keys): the listing needs
    each execution's newest only, and the log keeps every entry anyway.

    Best effort: the publication is done whatever happens here; a failure is logged.
    """
    key = layout.progress_key("published", identity, step, when)
    try:
        old = []
        for k in store.keys(layout.progress_prefix(identity.job)):
            parsed = layout.parse_progress_key(k)
            if (
                parsed is not None
                and parsed.kind == "published"
                and _of(parsed, identity)
                and parsed.step is not None
                and parsed.step <= step
            ):
                old.append(k)
        store.replace_marks(key, old)
    except Exception as exc:
        log.warning("step %d is published, but its progress key was not written: %s", step, exc)


def record_resumed(
    store: Store, identity: Identity, step: int | None, when: dt.datetime
) -> str | None:
    """Write the create-only ``resumed`` entry: ``identity`` resumed from ``step`` (``None``:
    nothing was published, it starts fresh). Its key, or ``None`` if it could not be written
    (logged: resolve has handed the checkpoint over, which is what the job waits for)."""
    key = layout.progress_key("resumed", identity, step, when)
    try:
        store.create(key, b"")
    except Exists:
        pass  # the same execution, step and millisecond: the same entry
    except Exception as exc:
        log.warning("the resumed entry of %s was not written: %s", identity, exc)
        return None
    return key


#: The marker :func:`progress` builds at its first call, kept for the process.
_default: dict[str, Marker] = {}
_default_lock = threading.Lock()


def progress(step: object, *, env: Mapping[str, str] | None = None) -> bool:
    """Mark that this job reached ``step``: call it every step if you like.

    The first call builds a :class:`Marker` from the environment (``JOBDISPATCH_JOB``,
    ``_SUBMISSION``, ``_EXECUTION``, ``_CHECKPOINT_ROOT``, ``JOBDISPATCH_PUBLISH_CONFIG``,
    ``JOBDISPATCH_PROGRESS_INTERVAL``) and keeps it for the process. True when a mark was
    written. Bad input (a negative or fractional step, a bad variable) raises at once.
    """
    value = check_step(step)
    marker = _default.get("marker")
    if marker is None:
        with _default_lock:
            if "marker" not in _default:
                _default["marker"] = Marker.from_env(os.environ if env is None else env)
            marker = _default["marker"]
    return marker.mark(value)
