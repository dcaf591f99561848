"""Reading an object's output: a snapshot, or a stream that follows it until the object ends.

Following behaves like a pipe: ``read1`` returns what is there, waiting only while there is
nothing yet and the object is still live; end of file comes once the object has ended and every
byte was read. The wait is on the cluster's condition, so a writer in another thread (the
environment, a test) wakes the reader; the backend itself never starts a thread.
"""

from __future__ import annotations

import io
from typing import IO

from jobdispatch.kit import followed
from jobdispatch.memory.cluster import Cluster
from jobdispatch.memory.objects import MemObject

__all__ = ["follow", "snapshot"]


def snapshot(obj: MemObject, stream: str, rank: int) -> IO[bytes]:
    """The bytes written so far."""
    return io.BytesIO(bytes(obj.output.get((stream, rank), b"")))


def follow(cluster: Cluster, obj: MemObject, stream: str, rank: int) -> IO[bytes]:
    """A buffered stream over the output that waits for more until the object ends
    (:func:`jobdispatch.kit.followed.follow`, waiting on the cluster's condition)."""
    key = (stream, rank)

    def read_from(offset: int) -> bytes:
        with cluster.changed:
            return bytes(obj.output.get(key, b"")[offset:])

    def ended() -> bool:
        with cluster.changed:
            return obj.ended

    def wait(offset: int) -> None:
        with cluster.changed:
            # sim: allowed (following output waits for the cluster's other thread by design;
            # neither the executor nor the simulator ever follows output)
            cluster.changed.wait_for(lambda: len(obj.output.get(key, b"")) > offset or obj.ended)

    return followed.follow(read_from, ended, wait)
