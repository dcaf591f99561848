"""Reading a rank's output file: a snapshot, or a stream that follows it until the object ends.

Following behaves like ``tail -f`` that knows when to stop: ``read`` returns what the file has,
waits while there is nothing new and the object has not ended, and gives end of file once the
object has ended and every byte was read.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from jobdispatch.kit import followed
from jobdispatch.spi import Growth

__all__ = ["follow", "growth", "snapshot"]

#: The rank files of an object's output directory (which may be the object's own directory).
_RANK_FILE = re.compile(r"rank-[0-9]+\.(out|err)")

#: How often a follower looks for new bytes.
FOLLOW_POLL = 0.1


def snapshot(path: Path) -> IO[bytes]:
    """The bytes in the file now (nothing when it does not exist yet)."""
    try:
        return io.BytesIO(path.read_bytes())
    except FileNotFoundError:
        return io.BytesIO(b"")


def follow(path: Path, ended: Callable[[], bool], poll: float = FOLLOW_POLL) -> IO[bytes]:
    """A buffered stream over the file that waits for more until ``ended()`` is true
    (:func:`jobdispatch.kit.followed.follow`, looking again every ``poll`` seconds)."""

    def read_from(offset: int) -> bytes:
        try:
            with path.open("rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return b""

    return followed.follow(read_from, ended, lambda _offset: time.sleep(poll))


def growth(directory: Path) -> Growth | None:
    """The rank files of ``directory``: their total size and newest modification time, one
    stat each (their bytes are never read); None when there are none yet."""
    size, newest = 0, None
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return None
    for entry in entries:
        if not _RANK_FILE.fullmatch(entry.name):
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        size += st.st_size
        newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
    if newest is None:
        return None
    return Growth(size=size, at=datetime.fromtimestamp(newest, UTC))
