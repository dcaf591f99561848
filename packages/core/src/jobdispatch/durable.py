"""Durable folder entries, for every package that writes files it must not lose.

A rename or a new file is durable only once the folder holding it is fsynced: after a crash or a
power cut, a rename that returned may otherwise be gone. The checkpoint store on a POSIX file
system (``jobdispatch_publish.posix``) and the local scheduler's state files
(``jobdispatch_local.files``) both follow that recipe, with this one function. Standard library
only: the local scheduler's runner imports it and must start fast.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_dir"]


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (creations, renames, removals) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
