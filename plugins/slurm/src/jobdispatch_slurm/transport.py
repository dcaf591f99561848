"""How Slurm's commands reach the cluster: this machine's shell, or SSH.

A transport runs one argument list and returns its exit status and output. It never goes
through a shell on this machine (``subprocess`` with a list); over SSH the remote side has one,
so the argument list is joined with :func:`shlex.join` and every word arrives as it was given.
Every command runs with ``TZ=UTC``: Slurm reads and prints times in the client's zone (0007 §2).

What a transport can say went wrong, and what the caller makes of it:

- :class:`~jobdispatch.errors.Unreachable`: nothing ran (no such program, no connection).
- :class:`~jobdispatch.errors.Unauthorized`: SSH refused the credentials, or the host's key is
  not one the site trusts.
- :class:`Interrupted`: the command was started but its reply was lost (a timeout, a dropped
  connection). A query can simply be called unreachable; a command that changes something may
  have taken effect, so the caller turns this into ``OutcomeUnknown``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

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


def _completed(
    argv: list[str],
    what: str,
    *,
    timeout: float,
    stdin: bytes | None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``argv`` run to its end, fed ``stdin`` (nothing when None), its output captured;
    Interrupted, naming ``what``, when it has not finished within ``timeout`` seconds. Not
    being able to start it (an OSError) is the transport's to name."""
    try:
        return subprocess.run(
            argv,
            input=stdin if stdin is not None else b"",
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"{what} did not finish within {timeout:g}s"
        raise Interrupted(msg) from exc


class LocalTransport:
    """Commands on this machine, as the user this process runs as."""

    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        self.where = "local"
        self._env = {**os.environ, **(env or {}), "TZ": "UTC"}

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        try:
            done = _completed(list(argv), argv[0], timeout=timeout, stdin=stdin, env=self._env)
        except OSError as exc:
            msg = f"cannot run {argv[0]} on this machine: {exc}"
            raise Unreachable(msg) from exc
        return Result(tuple(argv), done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        pass


#: What the OpenSSH client prints (exit 255) when it, not the remote command, failed.
_AUTH_FAILED = re.compile(
    r"Permission denied|Too many authentication failures|Load key|no such identity"
)
_HOST_KEY = re.compile(
    r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No \S+ host key is known"
    r"|host key for .* has changed"
)
#: What OpenSSH prints when the host offers a key other than the one known_hosts holds for it.
_HOST_KEY_CHANGED = re.compile(
    r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"
)
_OFFERED = re.compile(
    r"fingerprint for the (\S+) key sent by the remote host is\s+(SHA256:[^\s.]+)"
)
_OFFENDING = re.compile(r"Offending \S+ key in (.+):(\d+)\s*$", re.MULTILINE)
_CHANGED_FOR = re.compile(r"Host key for (\S+) has changed")
_NO_CONNECTION = re.compile(
    r"Connection refused|Could not resolve|No route to host|Network is unreachable"
    r"|Connection timed out|Operation timed out|timed out during banner|kex_exchange_identification"
    r"|Connection closed by .* port \d+$|UNKNOWN port|Bad port|Bad configuration option"
    r"|Can't open user config file|ssh: connect to host",
    re.MULTILINE,
)
_LOST = re.compile(
    r"mux_client|client_loop|Broken pipe|Connection reset|Connection to .* closed"
    r"|Control socket connect|packet_write_wait|Timeout, server .* not responding"
)


class SshTransport:
    """Commands over SSH, through the system's OpenSSH client, one connection multiplexed.

    Why the system client and not a Python library: HPC login nodes are reached the way their
    users reach them, which lives in ``~/.ssh/config`` (aliases, ``ProxyJump`` bastions,
    ``IdentityAgent``, GSSAPI/Kerberos, certificates, ``Match`` blocks), and OpenSSH honours all
    of it; paramiko reads only part of that file and none of GSSAPI delegation or MFA prompts.
    A ControlMaster connection is opened on first use and every command is a session on it, so
    a command costs a local socket round trip, not a handshake. For MFA, open the master
    yourself (``ssh -fN -o ControlMaster=yes -o ControlPath=PATH HOST``, answering the prompts)
    and give the same ``control_path``: no prompt is ever shown by this class
    (``BatchMode=yes``), so a supervisor never hangs waiting for one.

    Host keys are checked strictly (``StrictHostKeyChecking=yes``, set on the command line so
    no ssh_config can loosen it for the login node). With ``accept_unknown_hosts`` a key missing
    from ``known_hosts`` is accepted into a private copy of the file, never into the file
    itself, and a key that *differs* from a known one is still refused. With ``key_file`` only
    that key is offered (``IdentitiesOnly``); without it, ssh_config and the agent decide.
    Jump hosts (``jump``, or ``ProxyJump`` in the file) take their own settings from the
    ssh_config file: options on the command line apply to the login node only.
    """

    def __init__(
        self,
        *,
        host: str,
        user: str | None = None,
        port: int | None = None,
        key_filename: str | None = None,
        known_hosts: str | None = None,
        accept_unknown_hosts: bool = False,
        connect_timeout: float = 10.0,
        config_file: str | None = None,
        jump: str | None = None,
        control_path: str | None = None,
        control_persist: float = 60.0,
        ssh_program: str = "ssh",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self.user = user
        self.port = port
        # Local paths: ``~`` is this machine's home, as a site's configuration means it.
        self.key_filename = os.path.expanduser(key_filename) if key_filename else None
        self.known_hosts = os.path.expanduser(known_hosts) if known_hosts else None
        self.config_file = os.path.expanduser(config_file) if config_file else None
        self.accept_unknown_hosts = accept_unknown_hosts
        self.connect_timeout = connect_timeout
        self.jump = jump
        self.control_persist = control_persist
        self.ssh_program = ssh_program
        dest = f"{user}@{host}" if user else host
        self.where = f"ssh {dest}" + (f":{port}" if port else "") + (f" via {jump}" if jump else "")
        self._env = {**(env or {}), "TZ": "UTC"}
        self._lock = threading.Lock()
        # The control socket: the site's (a master it opened, with MFA), or a private one that
        # this transport opens and closes. ``%C`` is a hash of host, port and user, short
        # enough for a socket path.
        self._own_master = control_path is None
        self._dir = tempfile.mkdtemp(prefix="jd-ssh-") if control_path is None else None
        self.control_path = (
            os.path.join(self._dir, "%C") if self._dir else os.path.expanduser(control_path or "")
        )
        self._started = False
        self._hosts_copy: str | None = None

    # -- the ssh command line -------------------------------------------------------------

    def _options(self) -> list[str]:
        """Options every invocation shares: batch mode, strict host keys, the control socket."""
        opts: list[str] = []
        if self.config_file:
            opts += ["-F", self.config_file]
        known = self.known_hosts
        strict = "yes"
        if self.accept_unknown_hosts:
            known, strict = self._private_known_hosts(), "accept-new"
        opts += [
            "-o", "BatchMode=yes",
            "-o", f"StrictHostKeyChecking={strict}",
            "-o", f"ConnectTimeout={max(1, math.ceil(self.connect_timeout))}",
            "-o", f"ControlPath={self.control_path}",
            "-o", "LogLevel=ERROR",
            "-o", "ClearAllForwardings=yes",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=3",
        ]  # fmt: skip
        if known:
            opts += ["-o", f"UserKnownHostsFile={known}"]
        if self.key_filename:
            opts += ["-i", self.key_filename, "-o", "IdentitiesOnly=yes"]
        if self.user:
            opts += ["-l", self.user]
        if self.port:
            opts += ["-p", str(self.port)]
        if self.jump:
            opts += ["-J", self.jump]
        return opts

    def _private_known_hosts(self) -> str:
        """A copy of known_hosts that ``accept-new`` may add to: the site's file never changes."""
        if self._hosts_copy is None:
            assert self._dir is not None or self.control_path
            where = self._dir or tempfile.mkdtemp(prefix="jd-ssh-")
            copy = os.path.join(where, "known_hosts")
            source = self.known_hosts or os.path.expanduser("~/.ssh/known_hosts")
            try:
                with open(source, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            with open(copy, "wb") as f:
                f.write(data)
            self._hosts_copy = copy
        return self._hosts_copy

    def command_line(self, argv: Sequence[str]) -> str:
        """The remote command: ``env TZ=UTC ... argv``, every word quoted for the remote shell."""
        return shlex.join(["env", *(f"{k}={v}" for k, v in sorted(self._env.items())), *argv])

    def ssh_argv(self, argv: Sequence[str]) -> list[str]:
        """The local ``ssh`` invocation that runs ``argv`` remotely, on the shared connection.

        The remote command is one argument, already quoted, after ``--`` and the destination:
        ssh passes it to the remote shell as it is, so every word arrives as given.
        """
        return [
            self.ssh_program,
            *self._options(),
            "-o",
            "ControlMaster=no",
            "-T",
            "--",
            self.host,
            self.command_line(argv),
        ]

    # -- the master connection ------------------------------------------------------------

    def _socket(self) -> str | None:
        """The private control socket's real path (``%C`` expanded by ssh itself), or None."""
        assert self._dir is not None
        with os.scandir(self._dir) as entries:
            found = [e.path for e in entries if stat.S_ISSOCK(e.stat().st_mode)]
        return found[0] if found else None

    def control_socket(self) -> str | None:
        """The socket of the master this transport opened, while it is open; else None."""
        return self._socket() if self._dir else None

    def _ensure_master(self) -> None:
        """Open the shared connection if no master answers; raise as the module says."""
        with self._lock:
            if not self._own_master:
                self._check_site_master()
                return
            if self._socket() is not None:
                return
            assert self._dir is not None
            log_path = os.path.join(self._dir, "master.log")
            argv = [
                self.ssh_program,
                *self._options(),
                "-o", "ControlMaster=yes",
                "-o", f"ControlPersist={max(1, math.ceil(self.control_persist))}",
                "-N", "-f", "--", self.host,
            ]  # fmt: skip
            # -f backgrounds the master after authentication; its stderr goes to a file, not a
            # pipe, so this call returns then instead of waiting for the master to exit.
            with open(log_path, "wb") as errors:
                try:
                    done = subprocess.run(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=errors,
                        timeout=self.connect_timeout * 3 + 5,
                        check=False,
                    )
                except FileNotFoundError as exc:
                    msg = f"cannot run {self.ssh_program} (the OpenSSH client): {exc}"
                    raise Unreachable(msg) from exc
                except subprocess.TimeoutExpired as exc:
                    msg = f"cannot connect to {self.where}: no answer within the timeout"
                    raise Unreachable(msg) from exc
            with open(log_path, "rb") as f:
                err = _decode(f.read()).strip()
            if done.returncode != 0:
                raise self._failure(err, connecting=True)
            self._started = True

    def _check_site_master(self) -> None:
        """Once: the site's master (opened with MFA, say) answers on ``control_path``."""
        if self._started:
            return
        try:
            done = subprocess.run(
                [self.ssh_program, *self._options(), "-O", "check", "--", self.host],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            msg = f"cannot run {self.ssh_program} (the OpenSSH client): {exc}"
            raise Unreachable(msg) from exc
        if done.returncode != 0:
            msg = (
                f"{self.where}: no SSH master answers at {self.control_path}; open it first "
                f"(ssh -fN -o ControlMaster=yes -o ControlPath={self.control_path} {self.host})"
            )
            raise Unreachable(msg)
        self._started = True

    def _site_known_hosts(self) -> str:
        return self.known_hosts or os.path.expanduser("~/.ssh/known_hosts")

    def _changed_host_key(self, err: str) -> Unauthorized:
        """The host offers another key than the one known_hosts holds for it. Adding a key or
        ``accept_unknown_hosts`` cannot help (and must not): either the login node's key was
        replaced, or someone sits between; only a person who checks the new fingerprint with
        the site can tell which."""
        offered = _OFFERED.search(err)
        key = f"an {offered[1]} key {offered[2]}" if offered else "another key"
        found = _OFFENDING.search(err)
        path = self._site_known_hosts()
        where = path
        if found:
            # Under accept_unknown_hosts ssh reads a private copy; its lines are the site's.
            path = found[1] if found[1] != self._hosts_copy else path
            where = f"{path} line {found[2]}"
        host = _CHANGED_FOR.search(err)
        remove = shlex.join(["ssh-keygen", "-f", path, "-R", host[1] if host else self.host])
        return Unauthorized(
            f"{self.where}: the host key has CHANGED: the host offers {key}, not the one "
            f"{where} holds for it. Either the login node's key was replaced or the connection "
            f"is being intercepted: check the offered fingerprint with the site's administrators "
            f"before anything else, and only then replace that entry ({remove}, then add the "
            f"checked key). accept_unknown_hosts never accepts a changed key."
        )

    def _failure(self, err: str, *, connecting: bool) -> Exception:
        """What an ssh failure (exit 255) means, from what ssh printed."""
        said = err.splitlines()[-1] if err else "no message"
        if _HOST_KEY_CHANGED.search(err):
            return self._changed_host_key(err)
        if _HOST_KEY.search(err):
            return Unauthorized(
                f"{self.where}: the host key is unknown: known_hosts {self._site_known_hosts()} "
                f"holds no key for this host; refusing it (add its key once you have checked "
                f"its fingerprint, or set accept_unknown_hosts): {said}"
            )
        if _AUTH_FAILED.search(err):
            key = f"the key {self.key_filename}" if self.key_filename else "its keys"
            return Unauthorized(f"{self.where} refused {key}: {said}")
        if connecting or _NO_CONNECTION.search(err):
            return Unreachable(f"cannot connect to {self.where}: {said}")
        return Interrupted(f"{self.where}: the connection was lost: {said}")

    # -- running --------------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        self._ensure_master()
        full = self.ssh_argv(argv)
        log.debug("running %s on %s", argv[0], self.where)
        try:
            done = _completed(full, f"{argv[0]} on {self.where}", timeout=timeout, stdin=stdin)
        except FileNotFoundError as exc:
            msg = f"cannot run {self.ssh_program} (the OpenSSH client): {exc}"
            raise Unreachable(msg) from exc
        if done.returncode == 255:
            err = _decode(done.stderr)
            if _HOST_KEY.search(err) or _AUTH_FAILED.search(err) or _NO_CONNECTION.search(err):
                raise self._failure(err, connecting=False)
            if _LOST.search(err):
                msg = f"{argv[0]} on {self.where}: the connection was lost: {err.strip()}"
                raise Interrupted(msg)
        return Result(tuple(argv), done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        """Stop the master this transport opened; a site's own master is left alone."""
        with self._lock:
            if self._own_master and self._dir and self._socket() is not None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(
                        [self.ssh_program, *self._options(), "-O", "exit", "--", self.host],
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=10,
                        check=False,
                    )
            self._started = False

    def __del__(self) -> None:
        if getattr(self, "_dir", None):
            with contextlib.suppress(Exception):
                self.close()
                shutil.rmtree(self._dir or "", ignore_errors=True)


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
