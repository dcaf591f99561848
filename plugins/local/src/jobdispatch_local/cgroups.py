"""Memory limits through cgroups, where this machine lets us write one, and OOM detection.

A memory limit is only worth promising where the kernel enforces it and says when it killed for
it. :func:`probe` looks for a memory controller this process may create children in: cgroup v2
first (the ``memory`` controller listed in our cgroup's ``cgroup.controllers``, and a child we
can enable it for), then cgroup v1 (a ``memory`` hierarchy in which we can make a directory).
When neither works it says why, and the adapter answers that out-of-memory cannot be told apart
from any other SIGKILL here, instead of guessing.

Each node of an execution gets its own cgroup under ``<our cgroup>/jobdispatch-local/``; its
ranks join it before they exec, and the runner reads the kernel's ``oom_kill`` counter when a
rank dies of SIGKILL.

Standard library only: the runner imports it.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MemoryControl", "NodeGroup", "probe"]

_PARENT = "jobdispatch-local"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, options) of every cgroup mount."""
    out = []
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                    out.append((parts[1], parts[2], set(parts[3].split(","))))
    except OSError:
        pass
    return out


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per hierarchy: '' for v2, else the controller list."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _id, controllers, path = line.rstrip("\n").split(":", 2)
                paths[controllers] = path
    except (OSError, ValueError):
        pass
    return paths


@dataclass(frozen=True)
class MemoryControl:
    """A memory controller we can make cgroups in: its version and the parent directory."""

    version: str  # "v1" or "v2"
    parent: str

    def node(self, name: str) -> NodeGroup:
        return NodeGroup(self.version, str(Path(self.parent) / name))


@dataclass(frozen=True)
class NodeGroup:
    """One node's cgroup: created with a limit, joined by its ranks, read for OOM kills."""

    version: str
    path: str

    def create(self, limit: int) -> None:
        p = Path(self.path)
        p.mkdir(exist_ok=True)
        if self.version == "v2":
            (p / "memory.max").write_text(str(limit))
            with contextlib.suppress(OSError):
                (p / "memory.swap.max").write_text("0")
        else:
            (p / "memory.limit_in_bytes").write_text(str(limit))
            with contextlib.suppress(OSError):
                # Without it a node over its limit may swap instead of being killed.
                (p / "memory.memsw.limit_in_bytes").write_text(str(limit))

    def join(self, pid: int) -> None:
        """Move ``pid`` into the group (a rank does this for itself before it execs)."""
        with open(Path(self.path) / "cgroup.procs", "w") as f:
            f.write(str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for want of memory."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            text = (Path(self.path) / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self, timeout: float = 2.0) -> None:
        """Remove the group once its processes are gone; a group still busy is left behind."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)


def _try(version: str, mount: str, own: str) -> tuple[MemoryControl | None, str]:
    base = Path(mount) / own.lstrip("/")
    parent = base / _PARENT
    try:
        if version == "v2":
            controllers = (base / "cgroup.controllers").read_text().split()
            if "memory" not in controllers:
                return None, f"cgroup v2 at {base} has no memory controller"
            # Children get the controller only when every ancestor passes it down; a cgroup
            # that holds processes itself cannot (v2's no-internal-process rule), so this
            # fails unless the hierarchy was delegated to us (systemd-run --user --scope...).
            (base / "cgroup.subtree_control").write_text("+memory")
        parent.mkdir(exist_ok=True)
        if version == "v2":
            (parent / "cgroup.subtree_control").write_text("+memory")
        probe_dir = parent / f"probe-{os.getpid()}"
        probe_dir.mkdir(exist_ok=True)
        os.rmdir(probe_dir)
    except OSError as exc:
        return None, f"cgroup {version} at {base} is not writable ({exc.strerror or exc})"
    return MemoryControl(version, str(parent)), f"cgroup {version} at {parent}"


def probe(mode: str = "auto") -> tuple[MemoryControl | None, str]:
    """A memory controller we can use, and a sentence saying which (or why none)."""
    if mode == "off":
        return None, "cgroups are turned off in the configuration"
    own = _own_paths()
    reasons = []
    if mode in ("auto", "v2"):
        for mount, fstype, _opts in _mounts():
            if fstype == "cgroup2" and "" in own:
                found, why = _try("v2", mount, own[""])
                if found:
                    return found, why
                reasons.append(why)
                break
        else:
            reasons.append("no cgroup v2 mount")
    if mode in ("auto", "v1"):
        path = next((p for c, p in own.items() if "memory" in c.split(",")), None)
        for mount, fstype, opts in _mounts():
            if fstype == "cgroup" and "memory" in opts and path is not None:
                found, why = _try("v1", mount, path)
                if found:
                    return found, why
                reasons.append(why)
                break
        else:
            reasons.append("no cgroup v1 memory hierarchy")
    return None, "; ".join(reasons)
