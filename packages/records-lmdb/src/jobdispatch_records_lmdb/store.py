"""The durable record store: one LMDB environment (a directory holding ``data.mdb`` and
``lock.mdb``) shared by every process on the host that opens it.

What the guarantees rest on (docs/specs/0002-record.md says it at length):

* **Durability.** The environment is opened with ``sync=True`` and ``metasync=True`` and without
  ``writemap``/``map_async``: every commit writes its pages, calls ``fdatasync`` on the data
  file, then writes the new meta page through a descriptor opened with ``O_DSYNC``, before
  ``commit`` returns. A commit that returned survives ``kill -9`` and a power cut exactly as far
  as the file system and the disk honour ``fdatasync`` and ``O_DSYNC`` (a disk that lies about
  its write cache, or a file system mounted with barriers off, loses the promise; nothing in a
  process can make up for that). A crash at any point leaves either the previous meta page or
  the new one, never half an event.
* **Concurrency.** Every conditional write (the revision check, the lease check and the write)
  happens inside one LMDB write transaction. LMDB allows one writer at a time across every
  process on the host (a robust process-shared mutex in ``lock.mdb``, recovered when its holder
  dies), so exactly one of several racing appenders wins each revision. Readers use MVCC read
  transactions and never block the writer, nor it them.
* **Growth.** A write that finds the map full grows it (doubling) and retries. A process that
  sees another process's larger map (``MDB_MAP_RESIZED``) adopts it and retries. Both need every
  transaction of this process closed, which a per-environment gate arranges.
* **Damage.** LMDB maps the file and trusts it; where it does not, no damage may kill the
  process without a word. Every search from a tree's root checks the type of each page it
  meets (``MDB_CORRUPTED``, reported as :class:`Unreadable` naming ``data.mdb``, never as
  "try again"), but a cursor stepping on to the next leaf does not: a zeroed leaf there is a
  failed assertion and ``abort()``. So every row is read by its exact key (the record numbers
  of ``order``, the revisions of ``events``), never by stepping a cursor across leaves; a
  batch of reads that meets a damaged page is read again job by job, so the page costs only
  the records on it. A file shorter than its last commit needs is refused before LMDB maps it,
  and one that shrinks while open is refused before the next transaction: a page past the
  end is a SIGBUS.

The store keeps one environment per directory per process (LMDB forbids opening one twice in a
process: its POSIX locks are per process), shared by every :class:`LmdbRecords` on that path,
and never uses an environment inherited across ``fork``.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import attrs
import lmdb
from jobdispatch import codec
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import (
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    ReadOnly,
    Unavailable,
    Unreadable,
)
from jobdispatch.records import rules, store
from jobdispatch.records.decoded import DEFAULT_CACHE_EVENTS, Decoded, DecodedCache, extend
from jobdispatch.records.events import AnyEvent, Header, Settled, View
from jobdispatch.records.singles import SingleCalls
from jobdispatch.types import JobID

__all__ = ["FORMAT", "FORMAT_VERSION", "LmdbRecords"]

T = TypeVar("T")

#: The marker written in the ``meta`` database: a directory without it is not ours.
FORMAT = b"jobdispatch-records"
#: The layout version (of the databases and keys, not of the events: those carry their own
#: schema version). A store written with a newer layout is refused, never guessed at.
FORMAT_VERSION = 1
#: The first map size; it doubles whenever a commit finds it full.
DEFAULT_MAP_SIZE = 1 << 26
#: The files LMDB keeps in an environment directory. Anything else there is someone else's.
_LMDB_FILES = frozenset({"data.mdb", "lock.mdb"})
#: The mode of a store's directory, and (LMDB drops the execute bits) of its files: the owner's
#: alone, whatever the umask, since a record keeps its job's ``env`` (tokens, keys) verbatim.
_PRIVATE = 0o700
#: LMDB's meta page magic (``MDB_MAGIC``), after the 16-byte page header, little-endian on the
#: hosts LMDB runs on.
_LMDB_MAGIC = struct.pack("<I", 0xBEEFC0DE)
#: Where LMDB 0.9's meta page (``MDB_meta`` after the 16-byte page header, 64-bit hosts) keeps
#: the page size (the free database's ``md_pad``), then the last page used and the
#: transaction id, which together say how long the file must be.
_META_PSIZE = 40
_META_LAST_PAGE = 136
_META_END = 152
_META_TAIL = struct.Struct("<QQ")
_U32 = struct.Struct("<I")
_MIN_PAGE = 512
_DATABASES = ("meta", "jobs", "headers", "events", "keys", "order", "leases")
_LIST_BATCH = 256
#: Members (spec 0004 D7) live in ``meta`` under this prefix, each with its expiry in
#: microseconds since the epoch: no new database, so the layout version stays, and a version
#: that knows nothing of members reads the store as before.
_MEMBER = b"member/"
#: What each member measured of its latest poll (:class:`Measured`), under this prefix in
#: ``meta`` beside its expiry: two little-endian doubles, NaN for one not measured. A key of
#: its own, so a version that knows nothing of it reads members as before.
_MEASURED = b"measured/"
_MEASURES = struct.Struct("<dd")


def _dump_measured(measured: store.Measured) -> bytes:
    nan = float("nan")
    poll, commit = measured.poll_seconds, measured.commit_seconds
    return _MEASURES.pack(nan if poll is None else poll, nan if commit is None else commit)


def _load_measured(raw: bytes) -> store.Measured | None:
    if len(raw) != _MEASURES.size:
        return None  # not one this version wrote: as if nothing were measured
    poll, commit = _MEASURES.unpack(raw)
    return store.Measured(
        poll_seconds=None if math.isnan(poll) else poll,
        commit_seconds=None if math.isnan(commit) else commit,
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(instant: datetime) -> int:
    return (instant - _EPOCH) // timedelta(microseconds=1)


def _from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


_MAX_RETRIES = 64

_U64 = struct.Struct(">Q")
#: jobs db value: creation sequence, revision, settled.
_JOB = struct.Struct(">QQB")
_Rows = list[tuple[bytes, bytes]]


def _get(txn: lmdb.Transaction, key: bytes, db: Any) -> bytes | None:
    value = txn.get(key, db=db)
    return None if value is None else bytes(value)


def _u64(n: int) -> bytes:
    return _U64.pack(n)


def _event_key(seq: int, revision: int) -> bytes:
    # Big-endian, so LMDB's byte order is revision order and a job's events are contiguous.
    return _U64.pack(seq) + _U64.pack(revision)


def _last_seq(txn: lmdb.Transaction, dbs: dict[str, Any]) -> int:
    """The highest record number given out: the meta counter, or the order index's last key
    if that is higher (a counter that went back is damage the walk must not hide behind)."""
    counter = _get(txn, b"next-seq", db=dbs["meta"])
    cursor = txn.cursor(db=dbs["order"])
    last = _U64.unpack(bytes(cursor.key()))[0] if cursor.last() else 0
    return max(last, _U64.unpack(counter)[0] if counter is not None else 0)


# ---------------------------------------------------------------------- the shared environment


class _Gate:
    """A readers-writer gate over one environment in this process.

    Every transaction runs under ``shared()``; changing the map size runs under
    ``exclusive()``, which LMDB requires to happen with no transaction of the process open.
    Waiting exclusives bar new shared entries, so a resize is not starved.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._active:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


@attrs.define(eq=False)
class _Env:
    """One open environment, shared by every store on its path in this process."""

    path: Path
    env: lmdb.Environment
    dbs: dict[str, Any]
    gate: _Gate
    pid: int
    readonly: bool = False
    users: int = 0
    #: The map size this process last set or adopted (env.info() costs a call into LMDB on
    #: every transaction otherwise); only _resize changes it, under the exclusive gate.
    size: int = attrs.field(default=0)
    #: ``data.mdb``, opened for ``fstat`` alone, and the longest this process has seen it.
    #: LMDB never shortens the file, so a shorter one was truncated under the open store:
    #: every transaction checks first, because a page past the end is a SIGBUS (see
    #: :func:`_check_data_file`).
    data_fd: int = -1
    length: int = 0

    def __attrs_post_init__(self) -> None:
        self.size = self.env.info()["map_size"]
        self.data_fd = os.open(self.path / "data.mdb", os.O_RDONLY | os.O_CLOEXEC)
        self.length = os.fstat(self.data_fd).st_size

    def check_length(self) -> None:
        """Refuse to go on with a data file shorter than it was: the transaction about to
        begin could touch a page that is gone and die of SIGBUS without a word."""
        length = os.fstat(self.data_fd).st_size
        if length < self.length:
            data = self.path / "data.mdb"
            msg = (
                f"{data} is damaged: it was {self.length} bytes long and is now {length}; it "
                "was truncated while the store was open (a copy or restore over it, or a full "
                "disk?). Restore the store from a whole copy; nothing more was read or changed"
            )
            raise Unreadable(msg, path=str(data))
        self.length = length

    def close(self) -> None:
        self.env.close()
        os.close(self.data_fd)


class _This:
    """This process's id, kept current across forks so that a transaction checks for a fork
    without a system call of its own (``getpid`` is one: measured at about 8 us on this
    project's sandboxed test machine, 40% of an unchanged record's read)."""

    pid = os.getpid()

    @classmethod
    def forked(cls) -> None:
        cls.pid = os.getpid()


os.register_at_fork(after_in_child=_This.forked)

_open_lock = threading.Lock()
_open_envs: dict[tuple[int, int], _Env] = {}


def _refuse(path: Path, why: str) -> Invalid:
    return Invalid(f"{path} is not a dispatch record store: {why}; nothing was changed")


def _check_directory(path: Path) -> None:
    """Refuse, before LMDB touches anything, a path that holds something else."""
    if path.is_symlink() and not path.exists():
        raise _refuse(path, "it is a dangling symbolic link")
    if path.exists() and not path.is_dir():
        raise _refuse(path, "it is a file, and a store is a directory")
    if not path.exists():
        return
    try:
        names = set(os.listdir(path))
    except OSError as exc:
        raise Unavailable(f"{path}: cannot list the store's directory: {exc}") from exc
    foreign = sorted(names - _LMDB_FILES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise _refuse(path, f"the directory holds other files ({shown})")
    for name in sorted(names):
        if not (path / name).is_file() or (path / name).is_symlink():
            raise _refuse(path, f"{name} is not a regular file")
    data = path / "data.mdb"
    if "data.mdb" in names and data.stat().st_size:
        _check_data_file(path, data)


def _check_data_file(path: Path, data: Path) -> None:
    """Refuse a ``data.mdb`` that is not LMDB's, or that is shorter than its newest meta page
    says it is.

    LMDB maps the file and trusts it: a page past the end of a truncated file (an incomplete
    copy or restore, a file system that ran out of space) is a SIGBUS in whatever process
    touches it, with no message and no way to catch it. So the two meta pages are read with
    plain reads first, and the file must reach the last page the newer one refers to.
    """
    try:
        with data.open("rb") as f:
            first = f.read(_META_END)
            if len(first) < 20 or first[16:20] != _LMDB_MAGIC:
                raise _refuse(path, "data.mdb is not an LMDB file")
            if len(first) < _META_END:
                raise _truncated(data, len(first), 2 * _MIN_PAGE)
            (page_size,) = _U32.unpack_from(first, _META_PSIZE)
            if page_size < _MIN_PAGE or page_size & (page_size - 1):
                msg = f"{data} is damaged: its first meta page gives page size {page_size}"
                raise Unreadable(msg, path=str(data))
            f.seek(page_size)
            second = f.read(_META_END)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise Unavailable(f"{data}: cannot read the store's data file: {exc}") from exc
    if len(second) < _META_END:
        raise _truncated(data, size, 2 * page_size)
    metas = []
    for number, meta in enumerate((first, second)):
        if meta[16:20] != _LMDB_MAGIC:
            msg = f"{data} is damaged: meta page {number} has no LMDB magic number"
            raise Unreadable(msg, path=str(data))
        metas.append(_META_TAIL.unpack_from(meta, _META_LAST_PAGE))
    last_page, _ = max(metas, key=lambda m: m[1])  # the newer transaction is the one LMDB reads
    need = (last_page + 1) * page_size
    if size < need:
        raise _truncated(data, size, need)


def _truncated(data: Path, size: int, need: int) -> Unreadable:
    msg = (
        f"{data} is damaged: the file is {size} bytes long, but its last commit needs "
        f"{need} bytes; it was truncated (an incomplete copy or restore, or a full disk?). "
        "Restore the store from a whole copy; nothing was changed"
    )
    return Unreadable(msg, path=str(data))


def _inspect(txn: lmdb.Transaction, env: lmdb.Environment, path: Path) -> bool:
    """Whether the environment is empty (False) or a valid store of ours (True); Invalid for
    anything else."""
    names = [bytes(k) for k in txn.cursor().iternext(values=False)]
    if not names:
        return False
    if b"meta" not in names:
        raise _refuse(path, "an LMDB environment without the dispatch marker")
    try:
        meta = env.open_db(b"meta", txn=txn, create=False)
    except lmdb.Error as exc:
        raise _refuse(path, "an LMDB environment without the dispatch marker") from exc
    marker = _get(txn, b"format", db=meta)
    if marker != FORMAT:
        raise _refuse(path, "an LMDB environment without the dispatch marker")
    raw = _get(txn, b"version", db=meta)
    try:
        version = int(raw.decode()) if raw is not None else -1
    except ValueError:
        version = -1
    if version > FORMAT_VERSION:
        msg = (
            f"{path}: store written by a newer version (layout {version}; this reads up to "
            f"{FORMAT_VERSION}); nothing was changed"
        )
        raise Invalid(msg)
    if version < 1:
        raise _refuse(path, f"its layout version {raw!r} is not one any version wrote")
    return True


def _initialize(txn: lmdb.Transaction, env: lmdb.Environment) -> None:
    for name in _DATABASES:
        env.open_db(name.encode(), txn=txn, create=True)
    meta = env.open_db(b"meta", txn=txn, create=False)
    txn.put(b"format", FORMAT, db=meta)
    txn.put(b"version", str(FORMAT_VERSION).encode(), db=meta)
    txn.put(b"next-seq", _u64(0), db=meta)


#: Below this much free space, an I/O error from a commit is the disk being full: LMDB reports a
#: short write (the file system ran out of room mid-write) as EIO, not ENOSPC.
_FULL_BELOW = 16 << 20


def _why_not_writable(path: Path) -> str | None:
    """Why this process cannot write the store's directory or files, or None if it can."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        return None
    for target in (path, path / "data.mdb", path / "lock.mdb"):
        if target.exists() and not os.access(target, os.W_OK):
            return f"this user may not write {target}"
    return None


def _disk_full(path: Path, error: str) -> str | None:
    """How full the file system under ``path`` is, when that explains a failed write."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if "No space left" in error or ("Input/output error" in error and free < _FULL_BELOW):
        return f"{free} bytes free"
    return None


#: What LMDB answers when the file itself is wrong: a page of the wrong type or out of range,
#: a file that is not LMDB's or of another LMDB format, a database whose flags do not match.
#: None of these heals by trying again.
_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.VersionMismatchError,
    lmdb.IncompatibleError,
)


class _Corrupted(Unreadable):
    """LMDB found a damaged page: the store as a whole is named, and a batch of reads is tried
    again job by job, so that one damaged page costs only the records on it."""


def _store_error(path: Path, exc: lmdb.Error, *, what: str) -> Unavailable | Unreadable:
    """An LMDB error as Unavailable naming the store, saying so plainly when the disk is full
    (LMDB calls it "Input/output error" or "No space left on device" depending on where the
    write was cut short); as Unreadable naming the data file when LMDB says the file is
    damaged, which trying again cannot mend."""
    if isinstance(exc, _DAMAGE):
        data = path / "data.mdb"
        msg = (
            f"{data} is damaged: {what}: LMDB says {exc}. Restore the store from a whole "
            "copy; nothing was changed"
        )
        return _Corrupted(msg, path=str(data))
    full = _disk_full(path, str(exc))
    if full is not None:
        msg = (
            f"{path}: {what}: the disk holding the store is full ({full}); nothing was "
            "committed. Free some space and try again"
        )
        return Unavailable(msg)
    return Unavailable(f"{path}: {what}: {type(exc).__name__}: {exc}")


def _open_readonly(path: Path, map_size: int) -> _Env:
    """Open a store for reading only, changing nothing in it (no directory, no initialization,
    no reader-slot clean-up), for a store this process may not write: a read-only snapshot or
    mount, or another user's store."""
    _check_directory(path)
    if not (path / "data.mdb").is_file():
        raise NotFound(f"no record store at {path} (opened read-only, so none was created)")
    options: dict[str, Any] = {
        "subdir": True,
        "map_size": map_size,
        "max_dbs": len(_DATABASES) + 1,
        "readonly": True,
        "create": False,
        "mode": _PRIVATE,
    }
    try:
        # With the lock file where it can be written, readers register as usual; on a
        # read-only file system LMDB itself goes on without locks.
        env = lmdb.open(str(path), lock=True, **options)
    except lmdb.Error:
        try:
            # A lock file this user may not write: read without one. Such a reader is
            # invisible to writers, so a writer working meanwhile may reuse pages it reads:
            # this is for a store nobody writes now (a snapshot, another user's idle store),
            # and a value read half-rewritten fails its checksum rather than decoding.
            env = lmdb.open(str(path), lock=False, **options)
        except lmdb.Error as exc:
            raise _store_error(path, exc, what="cannot open the store read-only") from exc
    try:
        with env.begin() as txn:
            if not _inspect(txn, env, path):
                raise NotFound(f"no record store at {path}: its LMDB environment is empty")
        # In a read-only environment py-lmdb opens handles in a read transaction it commits,
        # so they stay valid.
        dbs = {name: env.open_db(name.encode(), create=False) for name in _DATABASES}
    except lmdb.Error as exc:
        env.close()
        raise _store_error(path, exc, what="cannot read the store") from exc
    except BaseException:
        env.close()
        raise
    return _Env(path=path, env=env, dbs=dbs, gate=_Gate(), pid=_This.pid, readonly=True)


def _open_env(path: Path, map_size: int) -> _Env:
    _check_directory(path)
    created_dir = not path.exists()
    had_lock = (path / "lock.mdb").exists()
    if created_dir:
        try:
            path.mkdir(parents=True, mode=_PRIVATE)
        except FileExistsError:
            _check_directory(path)  # someone else made it meanwhile
        except OSError as exc:
            raise Unavailable(f"{path}: cannot create the store's directory: {exc}") from exc
    try:
        env = lmdb.open(
            str(path),
            subdir=True,
            map_size=map_size,
            max_dbs=len(_DATABASES) + 1,
            sync=True,
            metasync=True,
            writemap=False,
            map_async=False,
            lock=True,
            readonly=False,
            create=True,
            mode=_PRIVATE,
        )
    except lmdb.Error as exc:
        why = _why_not_writable(path)
        if why is not None:
            msg = (
                f"{path}: cannot open the store for writing: {why}; commands that only read "
                "it (list, status, logs) open it read-only"
            )
            raise ReadOnly(msg) from exc
        raise _store_error(path, exc, what="cannot open the store") from exc
    try:
        # Reader slots of processes that died (kill -9) would otherwise pin old pages forever.
        env.reader_check()
        with env.begin() as txn:
            ours = _inspect(txn, env, path)
        if not ours:
            with env.begin(write=True) as txn:
                if not _inspect(txn, env, path):
                    _initialize(txn, env)
        # Handles opened in a read transaction do not outlive it (py-lmdb aborts read
        # transactions), so they are opened in a write transaction that changes nothing.
        with env.begin(write=True) as txn:
            dbs = {name: env.open_db(name.encode(), txn=txn, create=False) for name in _DATABASES}
    except lmdb.Error as exc:
        env.close()
        if not had_lock and not created_dir:
            (path / "lock.mdb").unlink(missing_ok=True)
        raise _store_error(path, exc, what="cannot open the store") from exc
    except BaseException:
        env.close()
        if not had_lock and not created_dir:
            # Leave a foreign directory as it was found.
            (path / "lock.mdb").unlink(missing_ok=True)
        raise
    return _Env(path=path, env=env, dbs=dbs, gate=_Gate(), pid=_This.pid)


def _acquire_env(path: Path, map_size: int, *, readonly: bool) -> _Env:
    with _open_lock:
        if path.is_dir():
            st = path.stat()
            shared = _open_envs.get((st.st_dev, st.st_ino))
            if shared is not None and shared.pid == _This.pid:
                if shared.readonly and not readonly:
                    msg = (
                        f"{path}: the store is open read-only in this process; it cannot be "
                        "opened for writing beside that"
                    )
                    raise ReadOnly(msg)
                shared.users += 1
                return shared
        opened = _open_readonly(path, map_size) if readonly else _open_env(path, map_size)
        st = path.stat()
        _open_envs[(st.st_dev, st.st_ino)] = opened
        opened.users += 1
        return opened


def _release_env(shared: _Env) -> None:
    with _open_lock:
        shared.users -= 1
        if shared.users:
            return
        for key, value in list(_open_envs.items()):
            if value is shared:
                del _open_envs[key]
        if shared.pid == _This.pid:
            with shared.gate.exclusive():
                shared.close()


# ------------------------------------------------------------------------------ value helpers


def _encode_events(
    events: Sequence[AnyEvent], token: int | None
) -> tuple[tuple[AnyEvent, ...], list[tuple[bytes, bool]]]:
    """The events as stored (decisions carry ``token``; controls and evidence none), and each
    encoded, with whether it settles the job."""
    stamped = tuple(rules.stamp(events, token))
    return stamped, [(codec.encode_event(e), isinstance(e, Settled)) for e in stamped]


def _key_bytes(what: str, value: str, limit: int) -> bytes:
    raw = rules.key_utf8(what, value)
    if not raw:
        msg = f"the {what} must not be empty"
        raise Invalid(msg)
    rules.check_key_size(what, value, raw, limit)
    return raw


@attrs.frozen
class _LeaseRow:
    holder: str | None
    token: int
    expires: datetime | None

    @classmethod
    def load(cls, raw: bytes | None) -> _LeaseRow:
        if raw is None:
            return cls(None, 0, None)
        data = json.loads(raw)
        expires = datetime.fromisoformat(data["expires"]) if data["expires"] else None
        return cls(data["holder"], int(data["token"]), expires)

    @classmethod
    def of(cls, lease: store.Lease) -> _LeaseRow:
        return cls(lease.holder, lease.token, lease.expires)

    def dump(self) -> bytes:
        expires = self.expires.isoformat() if self.expires is not None else None
        body = {"holder": self.holder, "token": self.token, "expires": expires}
        return json.dumps(body, separators=(",", ":")).encode()

    def lease(self, job: JobID) -> store.Lease | None:
        """The job's lease as the rules see it: None once released (or never taken)."""
        if self.holder is None or self.expires is None:
            return None
        return store.Lease(job, self.holder, self.token, self.expires)


@attrs.frozen
class _Prepared:
    """One job's part of an append batch, checked and encoded outside the transaction."""

    request: store.AppendRequest
    job_key: bytes
    decides: bool
    stamped: tuple[AnyEvent, ...]
    encoded: list[tuple[bytes, bool]]


@attrs.frozen
class _Fetched:
    """What a read transaction brings out: raw rows after the cached prefix, if any."""

    seq: int
    revision: int
    head: bytes | None
    cached: Decoded | None
    start: int
    rows: _Rows


# ---------------------------------------------------------------------------------- the store


class LmdbRecords(SingleCalls):
    """A durable, multi-process record store in the directory ``path``.

    Args:
        path: the store's directory; created when missing. A path that holds anything else (a
            file, a directory with foreign files, an LMDB environment that is not a dispatch
            store, or one written by a newer version) is refused with :class:`Invalid` and left
            exactly as it was.
        clock: judges lease expiry in this process (each process uses its own).
        map_size: the initial map size in bytes; it grows on demand, so this is a starting
            reservation of address space, not of disk.
        cache_events: how many decoded events this store keeps (least recently read records
            go first; 0 turns the cache off). Records only grow and events never change, so a
            record read again is fetched and decoded from where the cached part ends: a
            supervisor re-reading a long record every poll decodes only what is new.
        readonly: open for reading only, changing nothing in the store (no directory is
            created, nothing initialized, no reader slot cleaned; LMDB's lock file is used as
            any reader uses it where it can be written, and not at all where it cannot): for
            a store on a read-only file system or one this user may not write. A missing
            store is then NotFound, and every write (create, append, leases) raises
            :class:`ReadOnly`. A store opened for writing
            where it cannot be written raises ReadOnly saying why, so a caller that only reads
            can open it again with ``readonly=True``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        clock: Clock = system_clock,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        cache_events: int = DEFAULT_CACHE_EVENTS,
        readonly: bool = False,
    ) -> None:
        self.path = Path(path).absolute()
        self._clock = clock
        self._decoded = DecodedCache(cache_events)
        #: Asked for read-only: this store refuses writes even when it shares an environment
        #: this process opened for writing (a supervisor serving its metrics beside it).
        self._readonly = readonly
        self._shared: _Env | None = _acquire_env(self.path, map_size, readonly=readonly)
        self._max_key = self._shared.env.max_key_size()

    def __repr__(self) -> str:
        return f"LmdbRecords({str(self.path)!r})"

    # --------------------------------------------------------------------------- the interface

    def create(
        self, header: Header, events: Sequence[AnyEvent] = (), *, idempotency_key: str = ""
    ) -> store.Created:
        job = header.job
        job_key = self._job_key(job)
        key = rules.effective_key(header, idempotency_key)
        if key != header.idempotency_key:
            header = attrs.evolve(header, idempotency_key=key)
        rules.check_header(header)
        idem = _key_bytes("idempotency key", key, self._max_key) if key else b""
        rules.check_events(job, events)
        head = codec.encode_header(header)
        stamped, encoded = _encode_events(events, rules.CREATOR_TOKEN)
        made: list[int] = []  # the new record's sequence, once its transaction made it

        def txn_create(txn: lmdb.Transaction, dbs: dict[str, Any]) -> store.Created:
            made.clear()  # the body runs again when LMDB asks for a retry
            if idem:
                existing = _get(txn, idem, db=dbs["keys"])
                if existing is not None:
                    return store.Created(job=bytes(existing).decode(), created=False)
            if _get(txn, job_key, db=dbs["jobs"]) is not None:
                raise rules.exists_already(job)
            seq = _U64.unpack(_get(txn, b"next-seq", db=dbs["meta"]) or _u64(0))[0] + 1
            txn.put(b"next-seq", _u64(seq), db=dbs["meta"])
            settled = any(s for _, s in encoded)
            txn.put(job_key, _JOB.pack(seq, len(encoded), settled), db=dbs["jobs"])
            txn.put(_u64(seq), head, db=dbs["headers"])
            txn.put(_u64(seq), job_key, db=dbs["order"])
            if idem:
                txn.put(idem, job_key, db=dbs["keys"])
            for revision, (data, _) in enumerate(encoded, start=1):
                txn.put(_event_key(seq, revision), data, db=dbs["events"])
            made.append(seq)
            return store.Created(job=job, created=True)

        created = self._transact(txn_create, write=True)
        if made:
            # Committed: the record as stored is what was just encoded, so its first read
            # (a supervisor's, moments later) need not decode it.
            self._decoded.put(made[0], header, stamped)
        return created

    def read(self, job: JobID) -> View:
        (answer,) = self.read_many([job])
        if isinstance(answer, View):
            return answer
        raise answer

    def read_many(self, jobs: Sequence[JobID]) -> tuple[store.ReadAnswer, ...]:
        keyed = [(job, self._job_key(job)) for job in rules.read_batch(jobs)]

        def txn_read(txn: lmdb.Transaction, dbs: dict[str, Any]) -> list[_Fetched | DispatchError]:
            out: list[_Fetched | DispatchError] = []
            for job, job_key in keyed:
                try:
                    out.append(self._fetch(txn, dbs, job, job_key))
                except (NotFound, Unreadable) as exc:
                    out.append(exc)
            return out

        # One read transaction for every job, so the views are of one moment; decoding
        # happens after it closed: it is the slow part.
        try:
            fetched = self._transact(txn_read, write=False)
        except _Corrupted:
            # A damaged page ends the transaction it was met in: each job alone then, so
            # those whose pages are whole still read (each view of its own moment).
            fetched = [self._fetch_alone(job, job_key) for job, job_key in keyed]
        answers: list[store.ReadAnswer] = []
        for (job, _), got in zip(keyed, fetched, strict=True):
            if isinstance(got, DispatchError):
                answers.append(self._named(got))
                continue
            try:
                answers.append(self._decode(job, got))
            except Unreadable as exc:
                answers.append(self._named(exc))
        return tuple(answers)

    def revisions(self, jobs: Sequence[JobID]) -> tuple[int | None, ...]:
        """:class:`~jobdispatch.records.store.Revisions`: each job's row in the jobs index (its
        revision is what a read would fetch up to), from one read transaction, no event read.
        A damaged page is Unreadable naming the store, as for any read."""
        keyed = [self._job_key(job) for job in rules.batch(jobs, str, "revisions")]

        def txn_revisions(txn: lmdb.Transaction, dbs: dict[str, Any]) -> tuple[int | None, ...]:
            rows = [_get(txn, key, db=dbs["jobs"]) for key in keyed]
            return tuple(None if row is None else int(_JOB.unpack(row)[1]) for row in rows)

        return self._transact(txn_revisions, write=False)

    def _fetch_alone(self, job: str, job_key: bytes) -> _Fetched | DispatchError:
        def txn_read(txn: lmdb.Transaction, dbs: dict[str, Any]) -> _Fetched:
            return self._fetch(txn, dbs, job, job_key)

        try:
            return self._transact(txn_read, write=False)
        except _Corrupted as exc:
            return Unreadable(f"record {job}: {exc.message}", job=job, path=exc.path)
        except (NotFound, Unreadable) as exc:
            return exc

    def _named(self, exc: DispatchError) -> DispatchError:
        """A record's damage, its message naming the store's data file (the job alone does
        not say which store, and several may be at hand)."""
        if not isinstance(exc, Unreadable) or exc.path is not None:
            return exc
        data = self.path / "data.mdb"
        message = f"{exc.message} ({data})"
        return Unreadable(message, job=exc.job, revision=exc.revision, path=str(data))

    def _fetch(
        self, txn: lmdb.Transaction, dbs: dict[str, Any], job: str, job_key: bytes
    ) -> _Fetched:
        """What one record's read needs from the transaction: the rows after the prefix this
        process decoded already (none when the record did not change since)."""
        try:
            seq, revision, _ = self._job(txn, dbs, job, job_key)
        except NotFound:
            number = self._unindexed(txn, dbs, job)
            if number is None:
                raise
            data = self.path / "data.mdb"
            msg = (
                f"record {job} is damaged: its row in the jobs index is gone, while the store "
                f"still lists it as record number {number} ({data})"
            )
            raise Unreadable(msg, job=job, path=str(data)) from None
        cached = self._decoded.get(seq)
        if cached is not None and len(cached[1]) == revision:
            # Unchanged since it was decoded (the common case of a poll): nothing to fetch.
            return _Fetched(seq, revision, None, cached, revision + 1, [])
        # Records only grow, so a decoded prefix stays true: fetch what follows it.
        if cached is not None and len(cached[1]) <= revision:
            head, start = None, len(cached[1]) + 1
        else:
            cached, start = None, 1
            head = _get(txn, _u64(seq), db=dbs["headers"])
            if head is None:
                msg = f"record {job} is damaged: its header is missing"
                raise Unreadable(msg, job=job, revision=0)
        # Each event is looked up by its exact key (see "Damage" in the module's docstring):
        # the revisions the row promises, then any stored past them (damage the decoding
        # names).
        cursor = txn.cursor(db=dbs["events"])
        keys = [_event_key(seq, r) for r in range(start, revision + 1)]
        rows = [(bytes(k), bytes(v)) for k, v in cursor.getmulti(keys)]
        past = revision + 1
        while (extra := _get(txn, _event_key(seq, past), db=dbs["events"])) is not None:
            rows.append((_event_key(seq, past), extra))
            past += 1
        return _Fetched(seq, revision, head, cached, start, rows)

    def _unindexed(self, txn: lmdb.Transaction, dbs: dict[str, Any], job: str) -> int | None:
        """The record number the ``order`` index gives ``job``, for a job the ``jobs`` index
        does not know: a record that exists with its index row gone, which must read as
        damaged, not as no record at all. A walk of every number, so only a miss pays it."""
        for seq in range(1, _last_seq(txn, dbs) + 1):
            if _get(txn, _u64(seq), db=dbs["order"]) == job.encode():
                return seq
        return None

    def _decode(self, job: str, got: _Fetched) -> View:
        """The View of one fetched record, its new events decoded and the whole kept in the
        decoded cache; Unreadable for damage the rows show."""
        if got.cached is not None and not got.rows and len(got.cached[1]) == got.revision:
            return View(*got.cached)
        if got.cached is not None:
            header: Header | bytes = got.cached[0]
            prefix: tuple[AnyEvent, ...] = got.cached[1]
        else:
            assert got.head is not None
            header, prefix = got.head, ()
        rows = [(_U64.unpack(key[8:])[0], value) for key, value in got.rows]
        header, events = extend(job, header, prefix, rows, got.revision)
        self._decoded.put(got.seq, header, events)
        return View(header, events)

    def append_many(
        self, requests: Sequence[store.AppendRequest]
    ) -> tuple[int | store.Refusal, ...]:
        requests = rules.batch(requests, store.AppendRequest, "append_many")
        rules.check_batch_jobs([r.job for r in requests])
        # Everything that needs no stored state is checked and encoded before the write
        # transaction opens, so the writer lock is held only for the conditional part. The
        # whole batch is checked and encoded before any part is refused for its lease: a
        # malformed part makes the batch Invalid whatever the other checks would say.
        encoded: list[tuple[bytes, tuple[AnyEvent, ...], list[tuple[bytes, bool]]]] = []
        for request in requests:
            job_key = self._job_key(request.job)
            rules.check_events(request.job, request.events)
            token = request.owner.token if request.owner is not None else None
            encoded.append((job_key, *_encode_events(request.events, token)))
        prepared: list[_Prepared | store.Refusal] = []
        for request, (job_key, stamped, values) in zip(requests, encoded, strict=True):
            try:
                decides = rules.decides(request.job, request.events, request.owner)
            except Conflict as refused:
                prepared.append(refused)
                continue
            prepared.append(_Prepared(request, job_key, decides, stamped, values))
        if not prepared:
            return ()  # nothing to decide: no write transaction, no writer lock
        seqs: dict[str, int] = {}  # job -> its record's sequence, for the parts applied

        def txn_append(
            txn: lmdb.Transaction, dbs: dict[str, Any]
        ) -> tuple[int | store.Refusal, ...]:
            seqs.clear()  # the body runs again when LMDB asks for a retry
            now = self._clock()
            return tuple(
                part
                if isinstance(part, (Conflict, NotFound))
                else self._append_one(txn, dbs, part, now, seqs)
                for part in prepared
            )

        answers = self._transact(txn_append, write=True)
        for part in prepared:
            if isinstance(part, _Prepared) and part.stamped and part.request.job in seqs:
                # Committed: the writer's next read (the supervisor's next round) need
                # not decode what it just wrote.
                self._decoded.committed(
                    seqs[part.request.job], part.request.expect_revision, part.stamped
                )
        return answers

    def _append_one(
        self,
        txn: lmdb.Transaction,
        dbs: dict[str, Any],
        part: _Prepared,
        now: datetime,
        seqs: dict[str, int],
    ) -> int | store.Refusal:
        """One job's part of a batch inside its transaction. Every refusal is decided before
        the first write of the part, so a refused part leaves nothing behind."""
        job, request = part.request.job, part.request
        try:
            seq, revision, settled = self._job(txn, dbs, job, part.job_key)
            rules.check_revision(job, revision, request.expect_revision)
            if part.decides:
                assert request.owner is not None
                row = _LeaseRow.load(_get(txn, _u64(seq), db=dbs["leases"]))
                rules.check_owner(job, request.owner, row.lease(job), now)
        except (Conflict, NotFound) as refused:
            return refused
        for revision_, (data, _) in enumerate(part.encoded, start=revision + 1):
            if not txn.put(_event_key(seq, revision_), data, db=dbs["events"], overwrite=False):
                msg = f"record {job} is damaged: revision {revision_} exists past its revision"
                raise Invalid(msg)
        if not part.encoded:
            return revision  # nothing to write: no dirty page, so no sync either
        new = revision + len(part.encoded)
        settles = any(s for _, s in part.encoded)
        txn.put(part.job_key, _JOB.pack(seq, new, settled or settles), db=dbs["jobs"])
        seqs[job] = seq
        return new

    def list(self, filter: store.ListFilter | None = None) -> Iterator[JobID]:
        want = filter.settled if filter is not None else None
        return self._list(want)

    def _list(self, want: bool | None) -> Iterator[JobID]:
        # Batches, each in its own short read transaction, so that a caller who stops
        # iterating (or iterates slowly) pins no old pages and holds no reader slot.
        after = 0
        while True:

            def txn_batch(
                txn: lmdb.Transaction, dbs: dict[str, Any], after: int = after
            ) -> tuple[int, list[str]]:
                # By record number, each row by its exact key (see "Damage" in the module's
                # docstring); numbers are given out one after another and never taken back.
                last = min(_last_seq(txn, dbs), after + _LIST_BATCH)
                out = []
                for seq in range(after + 1, last + 1):
                    job = self._listed(txn, dbs, seq)
                    if want is not None:
                        row = _get(txn, job.encode(), db=dbs["jobs"])
                        # A job whose jobs row is gone is listed whatever is asked, so that
                        # reading it reports the damage instead of nothing showing it.
                        if row is not None and bool(_JOB.unpack(row)[2]) is not want:
                            continue
                    out.append(job)
                return (last if last > after else -1), out

            last, batch = self._transact(txn_batch, write=False)
            yield from batch
            if last < 0:
                return
            after = last

    def _listed(self, txn: lmdb.Transaction, dbs: dict[str, Any], seq: int) -> str:
        """The job of record number ``seq``, from the ``order`` index, or when its row there is
        gone, from the record's header; Unreadable when neither is left."""
        row = _get(txn, _u64(seq), db=dbs["order"])
        if row is not None:
            return row.decode()
        head = _get(txn, _u64(seq), db=dbs["headers"])
        if head is None:
            data = self.path / "data.mdb"
            msg = (
                f"{data} is damaged: record number {seq} has neither its row in the order "
                "index nor its header, so which job it was cannot be told"
            )
            raise Unreadable(msg, path=str(data))
        return codec.decode_header(head, job=f"number {seq}").job

    def acquire_many(
        self, jobs: Sequence[JobID], holder: str, ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        jobs = rules.batch(jobs, str, "acquire_many")
        keys = [self._job_key(job) for job in jobs]
        rules.check_ttl(ttl)
        rules.check_batch_jobs(jobs)
        for job in jobs:
            rules.check_holder(job, holder)

        def txn_acquire(
            txn: lmdb.Transaction, dbs: dict[str, Any]
        ) -> tuple[store.Lease | store.Refusal, ...]:
            now = self._clock()
            answers: list[store.Lease | store.Refusal] = []
            for job, job_key in zip(jobs, keys, strict=True):
                try:
                    seq, _, _ = self._job(txn, dbs, job, job_key)
                    row = _LeaseRow.load(_get(txn, _u64(seq), db=dbs["leases"]))
                    lease = rules.acquired(job, holder, ttl, row.lease(job), row.token, now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                txn.put(_u64(seq), _LeaseRow.of(lease).dump(), db=dbs["leases"])
                answers.append(lease)
            return tuple(answers)

        return self._transact(txn_acquire, write=True)

    def renew_many(
        self, leases: Sequence[store.Lease], ttl: timedelta
    ) -> tuple[store.Lease | store.Refusal, ...]:
        leases = rules.batch(leases, store.Lease, "renew_many")
        keys = [self._job_key(lease.job) for lease in leases]
        rules.check_ttl(ttl)
        rules.check_batch_jobs([lease.job for lease in leases])

        def txn_renew(
            txn: lmdb.Transaction, dbs: dict[str, Any]
        ) -> tuple[store.Lease | store.Refusal, ...]:
            now = self._clock()
            answers: list[store.Lease | store.Refusal] = []
            for lease, job_key in zip(leases, keys, strict=True):
                try:
                    seq, _, _ = self._job(txn, dbs, lease.job, job_key)
                    row = _LeaseRow.load(_get(txn, _u64(seq), db=dbs["leases"]))
                    renewed = rules.renewed(lease, ttl, row.lease(lease.job), now)
                except (Conflict, NotFound) as refused:
                    answers.append(refused)
                    continue
                txn.put(_u64(seq), _LeaseRow.of(renewed).dump(), db=dbs["leases"])
                answers.append(renewed)
            return tuple(answers)

        return self._transact(txn_renew, write=True)

    def release_many(self, leases: Sequence[store.Lease]) -> None:
        leases = rules.batch(leases, store.Lease, "release_many")
        keys = [self._job_key(lease.job) for lease in leases]
        rules.check_batch_jobs([lease.job for lease in leases])

        def txn_release(txn: lmdb.Transaction, dbs: dict[str, Any]) -> None:
            # An unknown job raises NotFound from inside the transaction, which aborts it:
            # nothing of the batch is released.
            for lease, job_key in zip(leases, keys, strict=True):
                seq, _, _ = self._job(txn, dbs, lease.job, job_key)
                row = _LeaseRow.load(_get(txn, _u64(seq), db=dbs["leases"]))
                if rules.released(lease, row.lease(lease.job)):
                    # The token stays: the next acquisition must hand out a greater one.
                    txn.put(_u64(seq), _LeaseRow(None, row.token, None).dump(), db=dbs["leases"])

        self._transact(txn_release, write=True)

    def announce(
        self, member: str, ttl: timedelta, measured: store.Measured | None = None
    ) -> tuple[str, ...]:
        rules.check_member(member)
        rules.check_ttl(ttl)
        key = _MEMBER + member.encode()

        def txn_announce(txn: lmdb.Transaction, dbs: dict[str, Any]) -> tuple[str, ...]:
            now = self._clock()
            txn.put(key, _u64(_micros(now + ttl)), db=dbs["meta"])
            if measured is None:
                txn.delete(_MEASURED + member.encode(), db=dbs["meta"])
            else:
                txn.put(_MEASURED + member.encode(), _dump_measured(measured), db=dbs["meta"])
            cursor = txn.cursor(db=dbs["meta"])
            expiries: dict[str, datetime] = {}
            if cursor.set_range(_MEMBER):
                for raw, value in cursor:
                    name = bytes(raw)
                    if not name.startswith(_MEMBER):
                        break
                    expiries[name[len(_MEMBER) :].decode()] = _from_micros(
                        _U64.unpack(bytes(value))[0]
                    )
            # Expired members are dropped as they are seen: every restart names a new holder.
            for gone, expires in expiries.items():
                if not now < expires:
                    txn.delete(_MEMBER + gone.encode(), db=dbs["meta"])
                    txn.delete(_MEASURED + gone.encode(), db=dbs["meta"])
            return rules.live_members(expiries, now)

        return self._transact(txn_announce, write=True)

    def withdraw(self, member: str) -> None:
        rules.check_member(member)
        key = _MEMBER + member.encode()

        def txn_withdraw(txn: lmdb.Transaction, dbs: dict[str, Any]) -> None:
            txn.delete(key, db=dbs["meta"])
            txn.delete(_MEASURED + member.encode(), db=dbs["meta"])

        self._transact(txn_withdraw, write=True)

    def survey(self) -> store.Survey:
        """Every job's revision, the members and the unexpired leases per holder, from one
        read transaction (so a read-only store answers too), and the data file's size."""

        def txn_survey(txn: lmdb.Transaction, dbs: dict[str, Any]) -> store.Survey:
            now = self._clock()
            by_seq: list[tuple[int, str, int]] = []
            for key, value in txn.cursor(db=dbs["jobs"]):
                seq, revision, _ = _JOB.unpack(bytes(value))
                by_seq.append((seq, bytes(key).decode(), revision))
            by_seq.sort()
            leases: dict[str, int] = {}
            for _, raw in txn.cursor(db=dbs["leases"]):
                row = _LeaseRow.load(bytes(raw))
                if row.holder is not None and row.expires is not None and now < row.expires:
                    leases[row.holder] = leases.get(row.holder, 0) + 1
            members: dict[str, datetime] = {}
            cursor = txn.cursor(db=dbs["meta"])
            if cursor.set_range(_MEMBER):
                for raw, value in cursor:
                    name = bytes(raw)
                    if not name.startswith(_MEMBER):
                        break
                    expires = _from_micros(_U64.unpack(bytes(value))[0])
                    members[name[len(_MEMBER) :].decode()] = expires
            measured: dict[str, store.Measured] = {}
            if cursor.set_range(_MEASURED):
                for raw, value in cursor:
                    name = bytes(raw)
                    if not name.startswith(_MEASURED):
                        break
                    loaded = _load_measured(bytes(value))
                    member = name[len(_MEASURED) :].decode()
                    if loaded is not None and member in members:
                        measured[member] = loaded
            return store.Survey(
                now=now,
                revisions={job: revision for _, job, revision in by_seq},
                members=members,
                leases=leases,
                measured=measured,
            )

        found = self._transact(txn_survey, write=False)
        try:
            size = (self.path / "data.mdb").stat().st_size
        except OSError:
            return found
        return attrs.evolve(found, size_bytes=size)

    def close(self) -> None:
        """Let go of the environment; the last store on a path in this process closes it."""
        shared, self._shared = self._shared, None
        if shared is not None:
            _release_env(shared)

    # ------------------------------------------------------------------------------ internals

    def _job_key(self, job: JobID) -> bytes:
        if not isinstance(job, str):
            msg = f"a job id is a string, got {job!r}"
            raise Invalid(msg)
        return _key_bytes("job id", job, self._max_key)

    @staticmethod
    def _job(
        txn: lmdb.Transaction, dbs: dict[str, Any], job: str, job_key: bytes
    ) -> tuple[int, int, bool]:
        row = _get(txn, job_key, db=dbs["jobs"])
        if row is None:
            msg = f"no record for job {job!r}"
            raise NotFound(msg)
        seq, revision, settled = _JOB.unpack(row)
        return seq, revision, bool(settled)

    def _transact(self, body: Callable[[lmdb.Transaction, dict[str, Any]], T], *, write: bool) -> T:
        """Run ``body`` in one transaction (committed when it returns, aborted when it raises),
        growing or adopting the map size and retrying when LMDB asks for it. ``body`` must
        have no effect outside the transaction, since it may run more than once."""
        shared = self._shared
        if shared is None:
            msg = f"{self.path}: the store is closed"
            raise Unavailable(msg)
        if shared.pid != _This.pid:
            msg = f"{self.path}: the store was opened before a fork; open it again in this process"
            raise Unavailable(msg)
        if write and (shared.readonly or self._readonly):
            msg = f"{self.path}: the store is opened read-only; nothing was written"
            raise ReadOnly(msg)
        shared.check_length()
        for _ in range(_MAX_RETRIES):
            with shared.gate.shared():
                size = shared.size
                try:
                    with shared.env.begin(write=write) as txn:
                        return body(txn, shared.dbs)
                except lmdb.MapFullError:
                    grow = True
                except lmdb.MapResizedError:
                    grow = False
                except lmdb.ReadersFullError as exc:
                    msg = f"{self.path}: every reader slot is taken: {exc}"
                    raise Unavailable(msg) from exc
                except lmdb.Error as exc:
                    what = "cannot commit" if write else "cannot read"
                    raise _store_error(self.path, exc, what=what) from exc
            self._resize(shared, size, grow=grow)
        msg = f"{self.path}: the map kept changing size under {_MAX_RETRIES} tries"
        raise Unavailable(msg)

    @staticmethod
    def _resize(shared: _Env, seen: int, *, grow: bool) -> None:
        """Adopt a size another process set (``set_mapsize(0)``); if that is no larger than the
        size that was full, double it. Nothing happens if another thread already resized."""
        with shared.gate.exclusive():
            env = shared.env
            if shared.size != seen:
                return  # another thread of this process resized meanwhile
            try:
                env.set_mapsize(0)
                if grow and env.info()["map_size"] <= seen:
                    env.set_mapsize(seen * 2)
            except lmdb.Error as exc:
                msg = f"{shared.path}: cannot resize the map past {seen} bytes: {exc}"
                raise Unavailable(msg) from exc
            finally:
                shared.size = env.info()["map_size"]
