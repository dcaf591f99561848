"""How the store reaches its database through the database's outages, and says why it cannot.

A store holds a pool of connections while the database answers, and none while it is away:

* **The first connection is opened by the caller, directly.** While there is no pool (the
  store just opened, or the database was lost), a call first opens one connection itself. The
  database's own answer is then told at once, and classified: a refused login is
  Unauthorized, settings libpq refuses before connecting are Invalid, a server that is down or
  cannot be reached is Unavailable, in one exception, with nothing logged. (The pool would keep
  retrying in the background for its whole timeout, logging a warning per attempt, and end in
  a timeout that hides the cause.) Once that connection succeeds, a fresh pool serves.
* **A lost database drops the pool.** A pooled connection that fails its check, breaks in use,
  or does not come within ``connect_timeout`` means the server restarted, failed over, or is
  cut off: every pooled connection is as good as dead, so the pool is let go, and the next
  call starts again with a connection of its own. So a store is back within one call of the
  database answering, however long it was away, and never waits out the pool's growing
  back-off between attempts.
* **No call waits for ever.** A connection cut off by a partition that drops nothing but
  answers nothing (a relay or firewall that stops forwarding) would leave a call blocked in
  ``recv`` until TCP gives up, a quarter of an hour later. Each call has ``call_timeout``
  seconds; past that its socket is shut down, so the call fails Unavailable and the connection
  is dropped. The server ends a session stalled inside a transaction by itself
  (``stalled_transaction_timeout``, see :mod:`jobdispatch_records_postgres.settings`).

Nothing here shows the password: errors carry libpq's message, which never holds it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg_pool
from jobdispatch.errors import DispatchError, Invalid, Unauthorized, Unavailable

from jobdispatch_records_postgres.settings import Settings

__all__ = ["Connections"]

#: What libpq or the server says when the login itself is refused: the credentials (or the
#: server's rules for this user and host) are wrong, and trying again cannot help.
_REFUSED_LOGIN = (
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "authentication failed",
    "password is required",
    "certificate verify failed",
)
#: psycopg's prefix for settings libpq refused before trying to connect (a port out of
#: range, an unknown sslmode): the configuration is wrong.
_BAD_SETTINGS = "connection is bad:"
#: Every pool of this package is named so, which is how its log lines are told apart.
_POOL_PREFIX = "jobdispatch-"


class _Lost(BaseException):
    """A pooled connection failed its check: the database restarted or the session was ended.

    A BaseException so that it leaves the pool's ``getconn`` at once instead of the pool
    trying its other (as dead) connections one by one with a growing pause between them; it
    never leaves this module."""


class _QuietPool(logging.Filter):
    """Drops the warnings of this package's pools (one per failed connection attempt, and
    when the pool gives up): the store reports the same failure once, as the error it raises,
    and a supervisor once for the whole outage. Other pools in the process keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(a, str) and a.startswith(_POOL_PREFIX) for a in args)


_quiet = _QuietPool()
logging.getLogger("psycopg.pool").addFilter(_quiet)


def _detail(exc: BaseException) -> str:
    """libpq's message without psycopg's prefix, on one line."""
    text = " ".join(str(exc).split())
    for prefix in ("connection failed: ", "connection is bad: "):
        text = text.removeprefix(prefix)
    return text or type(exc).__name__


def connect_error(settings: Settings, exc: psycopg.Error) -> DispatchError:
    """What a failed connection attempt means, as the store's error naming the database."""
    where = settings.where()
    text = str(exc)
    detail = _detail(exc)
    if any(marker in text for marker in _REFUSED_LOGIN):
        return Unauthorized(f"{where}: the database refused the login: {detail}")
    if text.startswith(_BAD_SETTINGS):
        return Invalid(f"{where}: the connection settings are wrong: {detail}")
    return Unavailable(f"{where}: cannot connect: {detail}")


class _Deadlines:
    """Ends calls the database has not answered in time, by shutting their socket down (the
    blocked ``recv`` then returns, and psycopg raises). One thread per store, started with the
    first call; it sleeps until the earliest deadline."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._due: dict[int, tuple[float, int]] = {}  # call -> (deadline, socket)
        self._expired: set[int] = set()
        self._changed = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextlib.contextmanager
    def bounded(
        self, conn: psycopg.Connection[Any], seconds: float | None = None
    ) -> Iterator[set[int]]:
        """Run the block with ``conn`` under the deadline (``seconds``, by default the
        store's); answers a set that holds this call's key once its deadline passed."""
        key = id(conn)
        seconds = self.seconds if seconds is None else seconds
        with self._lock:
            self._due[key] = (time.monotonic() + seconds, conn.pgconn.socket)
            self._expired.discard(key)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="jobdispatch-pg-deadlines", daemon=True
                )
                self._thread.start()
        self._changed.set()
        expired = {key}
        try:
            yield expired
        finally:
            # Under the lock: the socket is never shut down once the call has left the block
            # (its connection may then serve another call, or be closed and its number reused).
            with self._lock:
                self._due.pop(key, None)
                if key in self._expired:
                    self._expired.discard(key)
                else:
                    expired.clear()

    def _watch(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                for key, (due, fd) in list(self._due.items()):
                    if due <= now:
                        del self._due[key]
                        self._expired.add(key)
                        _shut(fd)
                pause = min((due for due, _ in self._due.values()), default=now + 60.0) - now
            self._changed.wait(max(pause, 0.05))
            self._changed.clear()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._changed.set()


def _shut(fd: int) -> None:
    """Shut down the socket behind ``fd`` (both ways) without closing the descriptor."""
    with contextlib.suppress(OSError):
        dup = socket.socket(fileno=os.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


class Connections:
    """The store's connections: a pool while the database answers, none while it is away."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._deadlines = _Deadlines(settings.call_timeout)
        self._closed = False

    def _kwargs(self) -> dict[str, Any]:
        kwargs = self.settings.connect_kwargs()
        kwargs["autocommit"] = True  # transactions are explicit blocks
        return kwargs

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection before it is handed out: one round trip, so
        bounded as a connection is (``connect_timeout``), not as a call."""
        try:
            with self._deadlines.bounded(conn, self.settings.connect_timeout):
                conn.execute("")
        except Exception:
            raise _Lost from None

    def _pool_now(self) -> psycopg_pool.ConnectionPool[Any]:
        """The pool, made after one connection of the caller's own succeeded when there is
        none; that connection's failure raised as the store's error (:func:`connect_error`)."""
        with self._lock:
            if self._closed:
                msg = f"{self.settings.where()}: the store is closed"
                raise Unavailable(msg)
            if self._pool is not None:
                return self._pool
            try:
                psycopg.connect(**self._kwargs()).close()
            except psycopg.Error as exc:
                raise connect_error(self.settings, exc) from None
            pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
                kwargs=self._kwargs,
                min_size=1,
                max_size=self.settings.pool_size,
                timeout=self.settings.connect_timeout,
                open=False,
                name=f"{_POOL_PREFIX}{self.settings.schema}",
                check=self._check,
                reconnect_timeout=max(30.0, self.settings.connect_timeout),
            )
            pool.open(wait=False)
            self._pool = pool
            return pool

    def _drop(self, pool: psycopg_pool.ConnectionPool[Any]) -> None:
        """Let ``pool`` go (the database was lost); the next call connects anew. Its workers
        may be blocked connecting to an unreachable host, so it is closed in the background."""
        with self._lock:
            if self._pool is not pool:
                return  # another call dropped it already
            self._pool = None
        threading.Thread(target=pool.close, kwargs={"timeout": 5.0}, daemon=True).start()

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one call. Connecting fails as the store's errors (Unavailable,
        Unauthorized, Invalid); the block's own ``psycopg.Error`` passes through, except when
        the call ran out of time (Unavailable, saying so). A connection lost in either case
        drops the pool."""
        where = self.settings.where()
        for attempt in (1, 2):
            pool = self._pool_now()
            try:
                with pool.connection() as conn:
                    try:
                        with self._deadlines.bounded(conn) as expired:
                            yield conn
                    except psycopg.Error:
                        if conn.broken or conn.closed:
                            self._drop(pool)
                        if expired:
                            msg = (
                                f"{where}: no answer within {self.settings.call_timeout:g} s "
                                "(call_timeout); the connection was given up"
                            )
                            raise Unavailable(msg) from None
                        raise
                return
            except _Lost:
                # A pooled connection was dead before anything was sent on it: the database
                # restarted or ended the session. Nothing of the call ran, so it is tried once
                # more on a connection of its own (which tells the outage, if it is one).
                self._drop(pool)
                if attempt == 2:
                    msg = f"{where}: the database ended every connection"
                    raise Unavailable(msg) from None
            except psycopg_pool.PoolTimeout as exc:
                self._drop(pool)
                msg = f"{where}: no connection within {self.settings.connect_timeout:g} s: {exc}"
                raise Unavailable(msg) from None
            except psycopg_pool.PoolClosed:
                # Another call dropped the pool while this one waited on it.
                msg = f"{where}: the connection to the database was lost"
                raise Unavailable(msg) from None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        self._deadlines.close()
        if pool is not None:
            pool.close()
