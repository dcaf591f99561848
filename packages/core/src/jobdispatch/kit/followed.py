"""A followed output stream: ``output(follow=True)`` for every adapter, written once.

Following behaves like ``tail -f`` that knows when to stop: a read returns what has been written
since the last one, waits while there is nothing new and the object is live, and gives end of
file once the object has ended and every byte was read. Adapters differ only in three things,
which they pass in:

* ``read_from(offset)``: the bytes written from ``offset`` on (a file read through ssh, a pod
  log read whole and cut, a buffer in memory), empty when there are none yet;
* ``ended()``: whether the object has ended;
* ``wait(offset)``: how to wait before looking again, told how far the reader has got (a
  sleep, or a condition waited on until more than ``offset`` bytes are there).

``ended`` is asked *before* reading, so a byte written before the end is never lost: if the
object had ended, that read already saw everything it wrote.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO

__all__ = ["Followed", "follow"]


class Followed(io.RawIOBase):
    """The raw stream under :func:`follow`."""

    def __init__(
        self,
        read_from: Callable[[int], bytes],
        ended: Callable[[], bool],
        wait: Callable[[int], object],
    ) -> None:
        super().__init__()
        self._read_from = read_from
        self._ended = ended
        self._wait = wait
        self._offset = 0
        self._buffer = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        while not self._buffer and not self._done:
            ended = self._ended()
            data = self._read_from(self._offset)
            self._offset += len(data)
            self._buffer = data
            if not data:
                if ended:
                    self._done = True
                else:
                    self._wait(self._offset)
        n = min(len(buffer), len(self._buffer))
        buffer[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def follow(
    read_from: Callable[[int], bytes],
    ended: Callable[[], bool],
    wait: Callable[[int], object],
) -> IO[bytes]:
    """A buffered stream of an object's output that waits for more until the object ends."""
    return io.BufferedReader(Followed(read_from, ended, wait))
