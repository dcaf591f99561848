"""Where an object lives on disk, and the plain records kept there.

One directory per object, named by its discovery name, under ``<state dir>/objects/``::

    jd-<job>-<n>-<k>/
        object.json        what Start created (immutable): the spec, the launch, the limits
        control.json       the scheduler's decisions: gate, hold instance, runs wanted,
                           stop, preemption and requeue requests (changed under ``lock``)
        runner.json        the runner serving the object (pid, start time, boot id)
        execution-<i>.json one per execution: ranks, then how each ended and the cause
        lock               the flock that orders changes of control.json and executions
        runner.log         the runner's own messages
        rank-<r>.out/.err  each rank's output (unless the spec names an output directory)

Every record is a small JSON document written atomically (see :mod:`jobdispatch_local.files`),
so a reader in any process sees a consistent state without asking anyone. The runner imports
this module, so it uses the standard library only.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobdispatch_local import files, ranks

__all__ = ["FORMAT", "ObjectDir", "now_iso", "objects_root"]

#: The marker and layout version of ``object.json``; a newer layout is refused, not guessed at.
FORMAT = "jobdispatch-local-object"
VERSION = 1

_EXECUTION = re.compile(r"^execution-([0-9]+)\.json$")


def now_iso() -> str:
    """The time now, as the records keep it (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


def objects_root(state_dir: Path) -> Path:
    return state_dir / "objects"


def empty_control() -> dict[str, Any]:
    """The control state of an object Start just made: gate closed, nothing wanted."""
    return {
        "opened": False,
        "opened_at": None,
        "runs": 0,
        "hold": None,
        "hold_by": None,
        "stop": None,
        "preempt": None,
        "requeue": None,
    }


class ObjectDir:
    """One object's directory and the records in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def lock_file(self) -> Path:
        return self.path / "lock"

    @property
    def log_file(self) -> Path:
        return self.path / "runner.log"

    def lock(
        self, *, shared: bool = False, wait: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """The object's lock (see :func:`jobdispatch_local.files.locked`); with ``wait``,
        :class:`~jobdispatch_local.files.LockBusy` once that many seconds have passed."""
        return files.locked(self.lock_file, shared=shared, wait=wait)

    def exists(self) -> bool:
        return (self.path / "object.json").is_file()

    def read_object(self) -> dict[str, Any]:
        data = files.read_json(self.path / "object.json")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            msg = f"{self.path} holds no local object"
            raise FileNotFoundError(msg)
        if int(data.get("version", 0)) > VERSION:
            msg = f"{self.path} was written by a newer jobdispatch-local (layout {data['version']})"
            raise ValueError(msg)
        return data

    def read_control(self) -> dict[str, Any]:
        data = files.read_json(self.path / "control.json")
        control = empty_control()
        if isinstance(data, dict):
            control.update(data)
        return control

    def write_control(self, control: dict[str, Any]) -> None:
        files.write_json(self.path / "control.json", control)

    def read_runner(self) -> dict[str, Any] | None:
        data = files.read_json(self.path / "runner.json")
        return data if isinstance(data, dict) else None

    def write_runner(self, ident: dict[str, Any]) -> None:
        files.write_json(self.path / "runner.json", ident)

    def execution_file(self, index: int) -> Path:
        return self.path / f"execution-{index}.json"

    def executions(self) -> list[dict[str, Any]]:
        """Every execution record, by index."""
        found = []
        with contextlib.suppress(FileNotFoundError):
            for entry in self.path.iterdir():
                m = _EXECUTION.fullmatch(entry.name)
                if m is None:
                    continue
                data = files.read_json(entry)
                if isinstance(data, dict):
                    found.append(data)
        return sorted(found, key=lambda e: int(e["index"]))

    def write_execution(self, record: dict[str, Any]) -> None:
        files.write_json(self.execution_file(int(record["index"])), record)

    def output_dir(self, obj: dict[str, Any] | None = None) -> Path:
        obj = obj if obj is not None else self.read_object()
        return Path(obj.get("output_dir") or self.path)

    def output_file(self, rank: int, stream: str, obj: dict[str, Any] | None = None) -> Path:
        suffix = "err" if stream == "stderr" else "out"
        return self.output_dir(obj) / f"rank-{rank}.{suffix}"


def scan(state_dir: Path, prefix: str = "jd-") -> Iterator[ObjectDir]:
    """Every object directory whose name starts with ``prefix``, in name order."""
    root = objects_root(state_dir)
    try:
        names = sorted(e.name for e in root.iterdir() if e.name.startswith(prefix))
    except FileNotFoundError:
        return
    for name in names:
        d = ObjectDir(root / name)
        if d.exists():
            yield d


def describe_launch(record: Mapping[str, Any], path: Path) -> str:
    """What an object's record makes the runner do, as the dry run prints it.

    One line for the runner, one for its limits, then one per rank: the environment dispatch and
    the spec give it (the rest is the runner's own environment) and its command line. The
    rendezvous port and the execution number are chosen when an execution starts, so they are
    shown by name.
    """
    launch = record["launch"]
    limit = record.get("memory_limit")
    cgroup = record.get("cgroup")
    memory = "not limited"
    if limit:
        memory = f"{limit >> 20} MiB per node"
        memory += f" (cgroup {cgroup['version']})" if cgroup else " (not enforced: no cgroup)"
    time_limit = launch.get("time_limit")
    lines = [
        f"runner: {shlex.join([sys.executable, '-m', 'jobdispatch_local.runner', str(path)])}",
        f"memory: {memory}",
        f"time limit: {f'{time_limit:g} s' if time_limit else 'none'}",
        f"working directory: {launch.get('working_dir') or '(the runner’s)'}",
    ]
    nodes, per_node = int(launch["nodes"]), int(launch["procs_per_node"])
    for node in range(nodes):
        for local in range(per_node):
            env = ranks.rank_env(
                {},
                launch,
                object_name=str(record["name"]),
                execution=0,
                node=node,
                local=local,
                port=0,
            )
            env["MASTER_PORT"] = "$MASTER_PORT"
            env["JOBDISPATCH_EXECUTION"] = "$JOBDISPATCH_EXECUTION"
            words = [f"{k}={v}" for k, v in sorted(env.items())]
            lines.append(
                f"rank {node * per_node + local} on {ranks.node_name(node)}: "
                + shlex.join(["env", *words, "--", *launch["command"]])
            )
    return "\n".join(lines) + "\n"
