"""The command's state is its owner's alone.

A job's record keeps its ``env`` verbatim (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``), and so does
the local adapter's ``object.json``; rank output may print them. On a login node whose homes are
0755, folders made with the umask's 0755 let every user read them. So every folder the command
makes for its state is 0700 whatever the umask (as the XDG base directory spec asks), with the
local adapter's :func:`~jobdispatch_local.files.private_dir`; the record store's files and the
local adapter's are 0600 (their packages see to it); and a state folder an earlier version left
open is closed, with a warning, the first time a command uses it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs
from jobdispatch_local.files import PRIVATE_DIR, private_dir

__all__ = ["Repaired", "private_dir", "repair"]

#: The bits that let someone other than the owner in.
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


@attrs.frozen
class Repaired:
    """What :func:`repair` changed: the folder, its mode before, how many entries under it
    were closed, and how many could not be (another user's)."""

    root: Path
    was: int
    closed: int
    failed: int

    def warning(self) -> str:
        text = (
            f"warning: the state folder {self.root} was open to other users (mode "
            f"{self.was:04o}), and it keeps jobs' env (tokens, keys) verbatim: it is now 0700, "
            f"and {self.closed} folders and files under it are private"
        )
        if self.failed:
            text += f"; {self.failed} could not be changed (not yours): check them"
        return text


def repair(root: Path) -> Repaired | None:
    """Close ``root`` (0700) and take every other user's access off everything under it, when
    ``root`` lets anyone else in; None when it does not (or does not exist), which is the
    only cost of a call after the first: one ``stat``. Symbolic links are not followed."""
    try:
        mode = root.lstat().st_mode
    except OSError:
        return None
    if not stat.S_ISDIR(mode) or not mode & _OTHERS:
        return None
    closed = failed = 0
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            try:
                entry = os.lstat(path).st_mode
                if stat.S_ISLNK(entry) or not entry & _OTHERS:
                    continue
                os.chmod(path, stat.S_IMODE(entry) & ~_OTHERS)
                closed += 1
            except OSError:
                failed += 1
    try:
        os.chmod(root, PRIVATE_DIR)
    except OSError:
        failed += 1
    return Repaired(root, stat.S_IMODE(mode), closed, failed)
