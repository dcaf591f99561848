"""How Slurm's commands reach the cluster: this machine's shell, or SSH.

A transport runs one argument list and returns its exit status and output. It never goes
through a shell on this machine (``subprocess`` with a list); over SSH the remote side has one,
so the argument list is joined with :func:`shlex.join` and every word arrives as it was given.
Every command runs with ``TZ=UTC``: Slurm reads and prints times in the client's zone (0007 §2).

What a transport can say went wrong, and what the caller makes of it:

- :class:`~jobdispatch.errors.Unreachable`: nothing ran (no such program, no connection).
- :class:`~jobdispatch.errors.Unauthorized`: SSH refused the key, or the host's key is not one
  the site trusts.
- :class:`Interrupted`: the command was started but its reply was lost (a timeout, a dropped
  connection). A query can simply be called unreachable; a command that changes something may
  have taken effect, so the caller turns this into ``OutcomeUnknown``.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs
from jobdispatch.errors import Unauthorized, Unreachable

__all__ = [
    "CountingTransport",
    "Interrupted",
    "LocalTransport",
    "Result",
    "SshTransport",
    "Transport",
]

log = logging.getLogger(__name__)


@attrs.frozen
class Result:
    """A finished command: its exit status and both streams, as bytes decoded leniently."""

    argv: tuple[str, ...]
    returncode: int
    out: bytes
    err: bytes = b""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def stdout(self) -> str:
        return _decode(self.out)

    @property
    def stderr(self) -> str:
        return _decode(self.err)


class Interrupted(Exception):
    """The command started, but no complete reply came back (a timeout, a lost connection)."""


@runtime_checkable
class Transport(Protocol):
    """Runs one command on the cluster's login side."""

    #: Where commands run, for messages (``local``, ``ssh root@host:22``).
    where: str

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        """Run ``argv`` with ``TZ=UTC``, feeding ``stdin``; raise as the module says."""
        ...

    def close(self) -> None: ...


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class LocalTransport:
    """Commands on this machine, as the user this process runs as."""

    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        self.where = "local"
        self._env = {**os.environ, **(env or {}), "TZ": "UTC"}

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        try:
            done = subprocess.run(
                list(argv),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
                env=self._env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            msg = f"{argv[0]} did not finish within {timeout:g}s"
            raise Interrupted(msg) from exc
        except OSError as exc:
            msg = f"cannot run {argv[0]} on this machine: {exc}"
            raise Unreachable(msg) from exc
        return Result(tuple(argv), done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        pass


class _AcceptForThisConnection:
    """Accept an unknown host key for this connection only, saying so in the log.

    paramiko's WarningPolicy would do the same through ``warnings``; this keeps it in the log,
    and it never writes the key anywhere (``AutoAddPolicy`` would add it for good).
    """

    def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
        log.warning(
            "accepting the unknown %s host key of %s for this connection only "
            "(accept_unknown_hosts is set); it is not saved",
            key.get_name(),
            hostname,
        )


class SshTransport:
    """Commands over SSH, through fabric, with key authentication only.

    The host key must be in ``known_hosts`` (or the user's system file when none is given):
    an unknown host is refused, unless ``accept_unknown_hosts`` is set, and then it is
    accepted for the connection only and never saved. Agent and ``~/.ssh`` key lookup are off,
    so the key used is exactly the configured one.
    """

    def __init__(
        self,
        *,
        host: str,
        user: str,
        port: int = 22,
        key_filename: str | None = None,
        known_hosts: str | None = None,
        accept_unknown_hosts: bool = False,
        connect_timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.user = user
        self.port = port
        # Local paths: ``~`` is this machine's home, as a site's configuration means it.
        self.key_filename = os.path.expanduser(key_filename) if key_filename else None
        self.known_hosts = os.path.expanduser(known_hosts) if known_hosts else None
        self.accept_unknown_hosts = accept_unknown_hosts
        self.connect_timeout = connect_timeout
        self.where = f"ssh {user}@{host}:{port}"
        self._env = {**(env or {}), "TZ": "UTC"}
        self._conn: Any = None
        self._lock = threading.Lock()

    def _client(self) -> Any:
        import paramiko

        client = paramiko.SSHClient()
        if self.known_hosts:
            try:
                client.get_host_keys().load(self.known_hosts)
            except OSError as exc:
                msg = f"cannot read known_hosts {self.known_hosts}: {exc}"
                raise Unauthorized(msg) from exc
        else:
            client.load_system_host_keys()
        if self.accept_unknown_hosts:
            client.set_missing_host_key_policy(_AcceptForThisConnection())
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        return client

    def _connect(self) -> Any:
        """The open connection, opened (or reopened) now if needed."""
        import fabric
        import paramiko

        with self._lock:
            conn = self._conn
            if conn is not None and conn.is_connected:
                return conn
            connect_kwargs: dict[str, Any] = {
                "look_for_keys": False,
                "allow_agent": False,
                "banner_timeout": self.connect_timeout,
                "auth_timeout": self.connect_timeout,
            }
            if self.key_filename:
                connect_kwargs["key_filename"] = [self.key_filename]
            conn = fabric.Connection(
                host=self.host,
                user=self.user,
                port=self.port,
                connect_timeout=self.connect_timeout,
                connect_kwargs=connect_kwargs,
            )
            # fabric's own client adds unknown host keys (AutoAddPolicy); ours refuses them.
            conn.client = self._client()
            try:
                conn.open()
            except paramiko.AuthenticationException as exc:
                msg = f"{self.where} refused the key {self.key_filename}: {exc}"
                raise Unauthorized(msg) from exc
            except paramiko.BadHostKeyException as exc:
                msg = f"{self.where} presented a host key that differs from known_hosts: {exc}"
                raise Unauthorized(msg) from exc
            except paramiko.SSHException as exc:
                if re.search(r"private key|expected OPENSSH key|not a valid", str(exc)):
                    msg = f"{self.where}: the key {self.key_filename} cannot be used: {exc}"
                    raise Unauthorized(msg) from exc
                if "not found in known_hosts" in str(exc):
                    msg = (
                        f"{self.where} is not in known_hosts {self.known_hosts or '(system)'}; "
                        "refusing it (add its key, or set accept_unknown_hosts)"
                    )
                    raise Unauthorized(msg) from exc
                msg = f"cannot connect to {self.where}: {exc}"
                raise Unreachable(msg) from exc
            except (OSError, EOFError) as exc:
                msg = f"cannot connect to {self.where}: {exc}"
                raise Unreachable(msg) from exc
            self._conn = conn
            return conn

    def command_line(self, argv: Sequence[str]) -> str:
        """The remote command: ``env TZ=UTC ... argv``, every word quoted for the remote shell."""
        return shlex.join(["env", *(f"{k}={v}" for k, v in sorted(self._env.items())), *argv])

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        import paramiko

        conn = self._connect()
        try:
            channel = conn.client.get_transport().open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
            self._drop()
            msg = f"cannot open a session on {self.where}: {exc}"
            raise Unreachable(msg) from exc
        deadline = time.monotonic() + timeout
        out = bytearray()
        err = bytearray()
        try:
            channel.exec_command(self.command_line(argv))
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            pause = 0.001
            while True:
                busy = False
                if channel.recv_ready():
                    out += channel.recv(65536)
                    busy = True
                if channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                    busy = True
                if busy:
                    pause = 0.001
                    continue
                if channel.exit_status_ready() and channel.eof_received:
                    break
                if time.monotonic() > deadline:
                    msg = f"{argv[0]} on {self.where} did not finish within {timeout:g}s"
                    raise Interrupted(msg)
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
            code = channel.recv_exit_status()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._drop()
            msg = f"{argv[0]} on {self.where}: the connection was lost: {exc}"
            raise Interrupted(msg) from exc
        finally:
            channel.close()
        return Result(tuple(argv), code, bytes(out), bytes(err))

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._drop()


class CountingTransport:
    """Wraps a transport and counts the commands run through it, by program name: what the
    benchmark and the query-cost tests measure."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.where = inner.where
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        with self._lock:
            name = os.path.basename(argv[0])
            self.counts[name] = self.counts.get(name, 0) + 1
        return self.inner.run(argv, timeout=timeout, stdin=stdin)

    def close(self) -> None:
        self.inner.close()
