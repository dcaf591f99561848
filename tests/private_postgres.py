"""A PostgreSQL server of a test's own, to kill and cut off, and a relay that blackholes.

The shared server of ``tools/postgres/up`` must never be stopped by a test; a test of outages
starts one here: ``initdb`` into a fresh folder, the postmaster on a free loopback port, a
``jobdispatch`` role that logs in with a password (SCRAM over TCP, as the shared one). The
binaries are found as ``tools/postgres/up`` finds them (the newest
``/usr/lib/postgresql/*/bin``, else ``pg_ctl`` on the PATH); without them the test skips, and
fails under ``JOBDISPATCH_REQUIRE_SERVICES=1``. As root the server runs as the ``postgres``
user (``initdb`` refuses root).

A partition between a client and this server is made with ``netns_hosts.Relay``'s ``cut``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.testing import eventually

#: Generous: a loaded 2-core machine. A deadline only turns a hang into a failure.
START_DEADLINE = 120.0


def _bin_dir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=_version, reverse=True)
    if found:
        return found[0].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _version(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in path.parent.parent.name.split("."))
    except ValueError:
        return (0,)


def require_binaries() -> Path:
    """Where ``initdb`` and ``postgres`` are; a skip (a failure in CI) when they are not."""
    found = _bin_dir()
    problem = None
    if found is None or not (found / "initdb").exists() or not (found / "postgres").exists():
        problem = "no PostgreSQL binaries (initdb, postgres) under /usr/lib/postgresql or PATH"
    elif os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            problem = "running as root, and there is no postgres user to run the server as"
    if problem is not None:
        if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
            pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {problem}")
        pytest.skip(problem)
    assert found is not None
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateServer:
    """A PostgreSQL server in a folder of its own; ``kill()`` it, ``start()`` it again."""

    def __init__(self) -> None:
        self.bin = require_binaries()
        # Not under pytest's tmp_path: as root that is 0700 and the postgres user must enter.
        self.root = Path(tempfile.mkdtemp(prefix="jd-private-pg-"))
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.run_dir = self.root / "run"
        self.port = _free_port()
        self.password_file = self.root / "password"
        self.password_file.write_text(secrets.token_hex(16) + "\n")
        self.password_file.chmod(0o600)
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
        self.run_dir.mkdir()
        if self._as:
            entry = pwd.getpwnam("postgres")
            os.chown(self.run_dir, entry.pw_uid, entry.pw_gid)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        subprocess.run(
            [
                *self._as,
                str(self.bin / "initdb"),
                *("-D", str(self.data), "-U", "postgres", "-E", "UTF8", "--locale=C.UTF-8"),
                *("--auth-local=trust", "--auth-host=scram-sha-256"),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._role = False
        self.start()
        password = self.password_file.read_text().strip()
        with self._superuser() as conn:
            conn.execute(f"CREATE ROLE jobdispatch LOGIN PASSWORD '{password}'")
            conn.execute("CREATE DATABASE jobdispatch OWNER jobdispatch")
        self._role = True

    @property
    def dsn(self) -> str:
        return f"postgresql://jobdispatch@127.0.0.1:{self.port}/jobdispatch"

    def config(self, schema: str, **more: Any) -> dict[str, Any]:
        """A ``postgresql`` store configuration reaching this server."""
        return {"dsn": self.dsn, "password_file": str(self.password_file), "schema": schema, **more}

    def _superuser(self) -> Any:
        import psycopg

        return psycopg.connect(
            host=str(self.run_dir), port=self.port, user="postgres", dbname="postgres",
            autocommit=True,
        )  # fmt: skip

    def answers(self) -> bool:
        """Whether the role's login over TCP succeeds now (before the role exists: the
        superuser's, over the socket)."""
        import psycopg

        try:
            if self._role:
                password = self.password_file.read_text().strip()
                psycopg.connect(self.dsn, password=password, connect_timeout=2).close()
            else:
                self._superuser().close()
        except psycopg.Error:
            return False
        return True

    def start(self) -> None:
        """Start the postmaster and return once it answers (fsync off: outages are tested
        here, not durability). A server just SIGKILLed may still have backends on their way
        out holding its shared memory, so starting is tried again until it takes."""
        deadline = time.monotonic() + START_DEADLINE
        while True:
            log = (self.root / "postgres.log").open("ab")
            self._proc = subprocess.Popen(
                [
                    *self._as,
                    str(self.bin / "postgres"),
                    *("-D", str(self.data), "-c", "listen_addresses=127.0.0.1"),
                    *("-c", f"port={self.port}", "-c", f"unix_socket_directories={self.run_dir}"),
                    *("-c", "fsync=off", "-c", "max_connections=100"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            while time.monotonic() < deadline and self._proc.poll() is None:
                if self.answers():
                    return
                time.sleep(0.2)
            if time.monotonic() >= deadline:
                log_text = (self.root / "postgres.log").read_text(errors="replace")[-2000:]
                msg = f"the private PostgreSQL did not start: {log_text}"
                raise AssertionError(msg)
            time.sleep(0.5)  # it exited (shared memory still held): try again

    def kill(self) -> None:
        """SIGKILL every process of the server (postmaster and backends), as a crash would,
        and return once nothing answers."""
        assert self._proc is not None
        for pid in _tree(self._proc.pid):  # the backends run in sessions of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._proc.wait(timeout=60)
        eventually(
            self.answers,
            "the killed server to stop answering",
            holds=lambda answers: not answers,
            within=START_DEADLINE,
            every=0.1,
        )

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _tree(root: int) -> list[int]:
    """``root`` and every process descended from it, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
