"""Hosts as network namespaces, for the tests of supervisors on several hosts (spec 0013 D7).

Shared by ``test_supervisors_on_several_hosts.py`` (the memory adapter behind a manager) and
``test_cli_supervisors_on_several_hosts.py`` (``jobdispatch supervise`` on the local adapter):

* :class:`Host`: a network namespace joined to the test's by a veth pair, whose link the test
  takes down to cut the host off, as a network partition would;
* :class:`Relay`: TCP from the test's side of every link to the PostgreSQL of
  ``tools/postgres/up``, which listens on loopback only (and which a test may ``cut`` without
  closing anything, as tests/test_supervise_postgres_outage.py does);
* :func:`make_hosts`, :func:`require`: the hosts, or a skip (a failure under
  ``JOBDISPATCH_REQUIRE_SERVICES=1``) when root, iproute2 or the server is missing;
* :func:`holders`, :func:`spread`: who holds which live lease, read from the store's table
  (leases are the store's own; no command prints them);
* :func:`wait`: poll a condition against a generous deadline, since the machine is loaded.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
#: Generous: the CI machine has 2 cores and a load of 10. A deadline only turns a hang into a
#: failure; nothing measures time against it.
DEADLINE = 180.0


def require(problem: str | None) -> None:
    """Skip the test for ``problem``, or fail it when CI requires the services."""
    if problem is None:
        return
    if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Host:
    """A network namespace joined to this one by a veth pair (``gateway`` is this side)."""

    def __init__(self, tag: str, index: int, subnet: int) -> None:
        self.index = index
        self.name = f"jd-{tag}-{index}"
        self.outer = f"jd{tag}{index}o"
        self.inner = f"jd{tag}{index}i"
        self.gateway = f"10.231.{subnet}.1"
        self.address = f"10.231.{subnet}.2"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
            _ip("link", "set", self.inner, "netns", self.name)
            _ip("addr", "add", f"{self.gateway}/30", "dev", self.outer)
            _ip("link", "set", self.outer, "up")
            _ip("-n", self.name, "addr", "add", f"{self.address}/30", "dev", self.inner)
            _ip("-n", self.name, "link", "set", self.inner, "up")
            _ip("-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise

    def link(self, up: bool) -> None:
        _ip("link", "set", self.outer, "up" if up else "down")

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self.outer)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", self.name)


def make_hosts(n: int, *tools: str) -> list[Host]:
    """``n`` hosts named by a random tag, on subnets no other run's hosts use now; skips
    (fails under JOBDISPATCH_REQUIRE_SERVICES=1) without root, ``ip`` or one of ``tools``."""
    missing = [tool for tool in ("ip", *tools) if shutil.which(tool) is None]
    if os.geteuid() != 0 or missing:
        require(f"network namespaces need root and these tools: {', '.join(('ip', *tools))}")
    tag = secrets.token_hex(2)
    taken = _subnets_in_use()
    free = [k for k in range(16, 216) if k not in taken]
    start = int(tag, 16) % len(free)
    hosts: list[Host] = []
    try:
        for i in range(n):
            hosts.append(Host(tag, i, free[(start + i) % len(free)]))
    except (subprocess.CalledProcessError, OSError) as exc:
        for host in hosts:
            host.remove()
        require(f"cannot make network namespaces: {exc}")
    return hosts


def _subnets_in_use() -> set[int]:
    """The third bytes of the 10.231.X.0/30 links that exist now (another run's hosts), so
    that two runs at once never put one address on two links."""
    shown = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    return {int(m) for m in re.findall(r"inet 10\.231\.(\d+)\.", shown)}


class Relay:
    """TCP from any local address's ``port`` to ``target``, one pump thread per direction.

    ``cut()`` stops forwarding both ways without closing anything (bytes sent are taken and
    wait in buffers; no answer comes, nothing is reset: a partition as a client sees one, where
    its own host's link stays up), and ``mend()`` forwards again, what waited included; a
    connection made while cut waits too, as a lost SYN would."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("0.0.0.0", 0))
        self.port = self.listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._forwarding = threading.Event()
        self._forwarding.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self._forwarding.clear()

    def mend(self) -> None:
        self._forwarding.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._forwarding.wait()
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                self._forwarding.wait()
                data = src.recv(65536)
                self._forwarding.wait()
                if not data:
                    break
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        for s in self._open:
            with contextlib.suppress(OSError):
                s.close()


def holders(settings: Any) -> dict[str, tuple[str | None, int | None]]:
    """Every job's live lease holder and token, read from the store's table on the database's
    clock (``settings``: the store's ``Settings``)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(**settings.connect_kwargs(), autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT job, holder, lease_token FROM {}.jobs "
                "WHERE lease_expires > clock_timestamp()"
            ).format(sql.Identifier(settings.schema))
        ).fetchall()
    return {job: (holder, token) for job, holder, token in rows}


def host_of(holder: str) -> str:
    """The host part of a holder: all of a test script's ``h0``, or the host name that
    starts the ``jobdispatch supervise`` default ``HOSTNAME:PID:NONCE``."""
    return holder.split(":", 1)[0]


def spread(settings: Any, jobs: Iterable[str]) -> dict[str, int]:
    """How many of ``jobs`` each host holds a live lease on."""
    wanted = set(jobs)
    counts: dict[str, int] = {}
    for job, (holder, _) in holders(settings).items():
        if job in wanted and holder is not None:
            counts[host_of(holder)] = counts.get(host_of(holder), 0) + 1
    return counts


def owned_by(
    settings: Any, host: str, jobs: Iterable[str]
) -> dict[str, tuple[str | None, int | None]] | None:
    """The live leases when ``host`` holds every one of ``jobs``, else None."""
    held = holders(settings)
    ok = all(host_of(held.get(job, (None, None))[0] or "") == host for job in jobs)
    return held if ok else None
