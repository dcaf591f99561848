"""Process identity and signalling, safe against pid reuse.

A pid alone does not name a process for long: once it exits, the kernel may hand the number to
another. The local scheduler records every process as (boot id, pid, start time in clock ticks
since boot), and only signals or trusts a pid whose start time and boot still match, so a stale
record can never kill an unrelated process.

Standard library only: the runner imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from typing import Any

__all__ = [
    "Identity",
    "alive",
    "boot_id",
    "identity",
    "kill_group",
    "set_parent_death_signal",
    "start_ticks",
]

Identity = dict[str, Any]

_PR_SET_PDEATHSIG = 1


def boot_id() -> str:
    """This boot's id: a pid recorded before a reboot names nothing after it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        if fields[0] == b"Z":
            return None  # a zombie has exited; only its parent's wait is missing
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def identity(pid: int) -> Identity:
    """The record that names ``pid`` for as long as that process lives."""
    return {"pid": pid, "start": start_ticks(pid), "boot": boot_id()}


def alive(ident: Identity | None) -> bool:
    """Whether the process the record names still runs (same boot, same start time)."""
    if not ident or not ident.get("pid"):
        return False
    if ident.get("boot") and ident["boot"] != boot_id():
        return False
    now = start_ticks(int(ident["pid"]))
    return now is not None and now == ident.get("start")


def kill_group(ident: Identity, signo: int) -> bool:
    """Signal the process group led by the named process, if that process is still the one
    recorded. Returns whether a signal was sent."""
    if not alive(ident):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(int(ident["pid"]), signo)
        return True
    return False


def set_parent_death_signal(signo: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signo`` to this process when its parent dies (``PR_SET_PDEATHSIG``).

    Ranks set it, so a runner killed outright takes its ranks with it instead of leaving an
    execution that nobody records. A no-op where the call does not exist.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signo, 0, 0, 0)
    except (OSError, AttributeError):
        return
