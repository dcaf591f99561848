"""Reading a rank's output file: a snapshot, or a stream that follows it until the object ends.

Following behaves like ``tail -f`` that knows when to stop: ``read`` returns what the file has,
waits while there is nothing new and the object has not ended, and gives end of file once the
object has ended and every byte was read.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["follow", "snapshot"]

#: How often a follower looks for new bytes.
FOLLOW_POLL = 0.1


def snapshot(path: Path) -> IO[bytes]:
    """The bytes in the file now (nothing when it does not exist yet)."""
    try:
        return io.BytesIO(path.read_bytes())
    except FileNotFoundError:
        return io.BytesIO(b"")


class _Follow(io.RawIOBase):
    def __init__(self, path: Path, ended: Callable[[], bool], poll: float) -> None:
        super().__init__()
        self._path = path
        self._ended = ended
        self._poll = poll
        self._file: IO[bytes] | None = None

    def readable(self) -> bool:
        return True

    def _read(self, size: int) -> bytes:
        if self._file is None:
            try:
                self._file = self._path.open("rb")
            except FileNotFoundError:
                return b""
        return self._file.read(size)

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        while True:
            # Ask whether it ended before reading, so no byte written before the end is missed.
            ended = self._ended()
            chunk = self._read(len(buffer))
            if chunk:
                buffer[: len(chunk)] = chunk
                return len(chunk)
            if ended:
                return 0
            time.sleep(self._poll)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        super().close()


def follow(path: Path, ended: Callable[[], bool], poll: float = FOLLOW_POLL) -> IO[bytes]:
    """A buffered stream over the file that waits for more until ``ended()`` is true."""
    return io.BufferedReader(_Follow(path, ended, poll))
