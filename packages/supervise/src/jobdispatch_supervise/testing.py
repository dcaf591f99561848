"""A notice receiver for tests and for trying a configuration: a real HTTP server on loopback
that records every request it is sent, and answers as it is told (a status, a delay).

    with Receiver() as hook:
        ...  # configure a webhook sink at hook.url
        hook.wait_for(lambda arrivals: len(arrivals) >= 3, timeout=60)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

__all__ = ["Arrival", "Receiver"]


@attrs.frozen
class Arrival:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """A threaded HTTP server on 127.0.0.1 (a free port) that records each POST."""

    def __init__(self, *, status: int = 200, delay: float = 0.0) -> None:
        self.status = status
        self.delay = delay
        self._lock = threading.Condition()
        self._arrivals: list[Arrival] = []
        self._handling = 0
        self._closing = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                arrival = Arrival(self.path, dict(self.headers.items()), body)
                with receiver._lock:
                    status, delay = receiver.status, receiver.delay
                    receiver._handling += 1
                # Held on an event, not a sleep, so closing the receiver ends a held request
                # at once rather than leaving a thread to answer a test that is long over.
                cut_short = receiver._closing.wait(delay)
                with receiver._lock:
                    # Recorded only when answered 2xx: what a receiver that failed never took.
                    if 200 <= status < 300 and not cut_short:
                        receiver._arrivals.append(arrival)
                    receiver._handling -= 1
                    receiver._lock.notify_all()
                if cut_short:
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except ConnectionError:
                    # The sender gave up waiting (its timeout is shorter than the delay): what a
                    # real receiver sees too, and nothing to print.
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Handler threads are joined on close (they end at once then, see above), so none
        # outlives the receiver and writes into a later test's captured output.
        self._server.daemon_threads = False
        self._server.block_on_close = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def answer(self, *, status: int | None = None, delay: float | None = None) -> None:
        """Answer later requests with ``status`` and after ``delay`` seconds."""
        with self._lock:
            if status is not None:
                self.status = status
            if delay is not None:
                self.delay = delay

    def in_flight(self) -> int:
        """Requests received and not yet answered."""
        with self._lock:
            return self._handling

    @property
    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def wait_for(self, done: Callable[[list[Arrival]], bool], timeout: float) -> list[Arrival]:
        """The arrivals once ``done`` holds of them; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not done(self._arrivals):
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = (
                        f"the receiver did not get what was awaited: {len(self._arrivals)} arrivals"
                    )
                    raise AssertionError(msg)
                self._lock.wait(min(left, 0.5))
            return list(self._arrivals)

    def close(self) -> None:
        """Stop serving, end every held request, and wait for their threads."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
