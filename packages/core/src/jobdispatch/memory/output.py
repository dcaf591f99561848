"""Reading an object's output: a snapshot, or a stream that follows it until the object ends.

Following behaves like a pipe: ``read1`` returns what is there, waiting only while there is
nothing yet and the object is still live; end of file comes once the object has ended and every
byte was read. The wait is on the cluster's condition, so a writer in another thread (the
environment, a test) wakes the reader; the backend itself never starts a thread.
"""

from __future__ import annotations

import io
from typing import IO

from jobdispatch.memory.cluster import Cluster
from jobdispatch.memory.objects import MemObject

__all__ = ["follow", "snapshot"]


def snapshot(obj: MemObject, stream: str, rank: int) -> IO[bytes]:
    """The bytes written so far."""
    return io.BytesIO(bytes(obj.output.get((stream, rank), b"")))


class _Follow(io.RawIOBase):
    def __init__(self, cluster: Cluster, obj: MemObject, stream: str, rank: int) -> None:
        super().__init__()
        self._cluster = cluster
        self._obj = obj
        self._key = (stream, rank)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        with self._cluster.changed:
            while True:
                data = self._obj.output.get(self._key, b"")
                if self._pos < len(data):
                    chunk = data[self._pos : self._pos + len(buffer)]
                    buffer[: len(chunk)] = chunk
                    self._pos += len(chunk)
                    return len(chunk)
                if self._obj.ended:
                    return 0
                # sim: allowed (following output waits for the cluster's other thread by design;
                # neither the executor nor the simulator ever follows output)
                self._cluster.changed.wait()


def follow(cluster: Cluster, obj: MemObject, stream: str, rank: int) -> IO[bytes]:
    """A buffered stream over the output that waits for more until the object ends."""
    return io.BufferedReader(_Follow(cluster, obj, stream, rank))
