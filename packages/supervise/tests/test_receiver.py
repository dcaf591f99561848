"""The test receiver itself: closing it ends a request it is holding, so no thread of it outlives
the test that made it and prints into a later test's captured output (a CI run once failed a CLI
test on the broken-pipe traceback of a slow receiver closed 30 s earlier)."""

from __future__ import annotations

import socket
import threading

import pytest
from jobdispatch.testing import eventually
from jobdispatch_supervise.testing import Receiver


def _post_and_leave(port: int) -> None:
    """Send a whole POST, then hang up without reading the answer: a sender that timed out."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")


def test_closing_ends_a_held_request_and_its_thread(capfd: pytest.CaptureFixture[str]) -> None:
    before = set(threading.enumerate())
    receiver = Receiver(delay=600)
    _post_and_leave(receiver.port)
    eventually(lambda: receiver.in_flight() == 1, "the receiver to hold the request")
    receiver.close()
    # Joined, not abandoned: nothing is held, no thread of the receiver is left, and the request
    # it never answered is not recorded as taken.
    assert receiver.in_flight() == 0
    assert set(threading.enumerate()) <= before
    assert receiver.arrivals == []
    assert "Traceback" not in capfd.readouterr().err


def test_a_sender_that_left_before_the_answer_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with Receiver() as receiver:
        for _ in range(20):
            _post_and_leave(receiver.port)
        eventually(
            lambda: len(receiver.arrivals) == 20 and receiver.in_flight() == 0,
            "every request taken and answered",
        )
    assert "Traceback" not in capfd.readouterr().err
