"""The HTTP endpoint: ``/metrics`` in Prometheus's text format, from a registry of its own.

prometheus_client's own server (a threading ``http.server`` in a daemon thread) answers every
path with the exposition, so nothing else is served; the registry holds the record collector
alone, not the process's default collectors, so what a scrape shows is the store's.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
from jobdispatch.listen import parse_listen as parse_host_port
from prometheus_client import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

__all__ = ["DEFAULT_LISTEN", "Endpoint", "parse_listen", "serve"]

#: Where the endpoint listens unless told: loopback, on the port the issue reserved for it.
DEFAULT_LISTEN = "127.0.0.1:9464"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as a host and a port (:func:`jobdispatch.listen.parse_listen`)."""
    return parse_host_port(text, example=DEFAULT_LISTEN)


@attrs.define
class Endpoint:
    """A running endpoint: where it listens, and how to stop it."""

    host: str
    port: int
    _server: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def serve(collector: Collector, listen: str = DEFAULT_LISTEN) -> Endpoint:
    """Serve ``collector`` on ``listen`` (HOST:PORT) from a background thread until
    :meth:`Endpoint.stop`. Invalid for a bad address; OSError when it cannot bind."""
    host, port = parse_listen(listen)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, addr=host, registry=registry)
    bound = server.server_address[1]
    return Endpoint(host, int(bound), server, thread)
