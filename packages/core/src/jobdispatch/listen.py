"""``HOST:PORT`` as the servers of this project take it (``--listen``, ``--metrics-listen``).

One parser for every endpoint (the metrics, the dashboard), so each reads addresses alike and
names the value it refuses the same way.
"""

from __future__ import annotations

import ipaddress

from jobdispatch.errors import Invalid

__all__ = ["parse_listen"]


def parse_listen(text: str, *, example: str, option: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) as a host and a port; Invalid,
    quoting ``option`` and the value and showing ``example``, for anything else. Port 0
    takes a free one."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            host = ""
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        _, _, example_port = example.rpartition(":")
        msg = (
            f"{option} {text!r}: give HOST:PORT, such as {example} ([::1]:{example_port} for IPv6)"
        )
        raise Invalid(msg)
    return host, int(port)
