"""Starting one execution's ranks: their environment, output files and process groups.

A job of N nodes and P processes per node runs N x P processes on this machine, each in a process
group of its own (so everything it forks can be signalled with it), with the variables torchrun
users expect (``RANK``, ``LOCAL_RANK``, ``GROUP_RANK``, ``LOCAL_WORLD_SIZE``, ``WORLD_SIZE``,
``NODE_RANK``, ``NNODES``, ``MASTER_ADDR``, ``MASTER_PORT``) and dispatch's own
(``JOBDISPATCH_JOB``, ``JOBDISPATCH_SUBMISSION``, ``JOBDISPATCH_EXECUTION``, ``JOBDISPATCH_OBJECT``,
``JOBDISPATCH_NODE``). ``SLURM_*`` names are deliberately not set: libraries that see them assume
a real Slurm step and call ``srun`` or ``scontrol``.

Standard library only: the runner imports it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jobdispatch_local import files, procs
from jobdispatch_local.cgroups import NodeGroup

__all__ = ["Rank", "free_port", "node_name", "rank_env", "spawn"]


def free_port() -> int:
    """A TCP port nobody listens on now, for the execution's rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_name(node: int) -> str:
    return f"local-{node}"


def rank_env(
    base: Mapping[str, str],
    launch: Mapping[str, Any],
    *,
    object_name: str,
    execution: int,
    node: int,
    local: int,
    port: int,
) -> dict[str, str]:
    """The environment of one rank: ``base`` (the runner's), then the spec's, then dispatch's."""
    nodes, per_node = int(launch["nodes"]), int(launch["procs_per_node"])
    env = dict(base)
    env.update(launch.get("env") or {})
    env.update(
        {
            "RANK": str(node * per_node + local),
            "LOCAL_RANK": str(local),
            "GROUP_RANK": str(node),
            "NODE_RANK": str(node),
            "NNODES": str(nodes),
            "LOCAL_WORLD_SIZE": str(per_node),
            "WORLD_SIZE": str(nodes * per_node),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "JOBDISPATCH_EXECUTION": str(execution),
            "JOBDISPATCH_OBJECT": object_name,
            "JOBDISPATCH_NODE": node_name(node),
        }
    )
    gpus = launch.get("gpus")
    if gpus:
        # The devices the site declared, split between the job's nodes in order.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus[node])
    env.update(launch.get("request_env") or {})
    return env


class Rank:
    """One started rank: its numbers, its process and the record that names it."""

    def __init__(
        self, rank: int, node: int, local: int, proc: subprocess.Popen[bytes], group: str
    ) -> None:
        self.rank = rank
        self.node = node
        self.local = local
        self.proc = proc
        self.group = group
        self.ident = procs.identity(proc.pid)
        self.exit_code: int | None = None
        self.signal: int | None = None

    @property
    def done(self) -> bool:
        return self.exit_code is not None or self.signal is not None

    def record(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node": self.node,
            "local_rank": self.local,
            "process": self.ident,
            "exit_code": self.exit_code,
            "signal": self.signal,
        }


def _prepare(runner_pid: int, group: NodeGroup | None) -> Callable[[], None]:
    def prepare() -> None:
        # Runs in the child between fork and exec: die with the runner, join the node's cgroup.
        procs.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != runner_pid:
            os._exit(126)  # the runner died before we could be tied to it
        if group is not None:
            group.join(os.getpid())

    return prepare


def spawn(
    launch: Mapping[str, Any],
    *,
    env: dict[str, str],
    cwd: Path,
    out: Path,
    err: Path,
    group: NodeGroup | None,
) -> subprocess.Popen[bytes]:
    """Start one rank's command in a new session (its own process group), its output appended
    to ``out`` and ``err`` (each created private: output may print the job's secrets). Raises
    OSError when the program cannot be started."""
    with (
        open(files.append_private(out), "ab") as stdout,
        open(files.append_private(err), "ab") as stderr,
    ):
        return subprocess.Popen(
            list(launch["command"]),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_prepare(os.getpid(), group),  # noqa: PLW1509 - the runner has one thread
        )
