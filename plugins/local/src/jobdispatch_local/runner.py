"""The runner: one small process per opened object, the local scheduler's node daemon.

``open`` starts it as ``python -m jobdispatch_local.runner OBJECT_DIR`` in a session of its own;
it forks once more and the first process exits, so the runner belongs to no caller: it outlives
the CLI and the supervisor that opened the object, and nobody has to reap it.

What it does, in a loop, until the object has ended:

1. under the object's lock, adopt an execution a dead runner left unfinished (its ranks died
   with that runner: ``PR_SET_PDEATHSIG``), recording it as node-lost;
2. if the object was stopped, or every run wanted has run, exit: the object has ended;
3. while a hold instance stands, wait; else record the next execution as started (from then on
   a concurrent hold is refused and a stop, preemption or requeue is aimed at it), let the lock
   go, start its ranks, then take the lock again to record them (or the launch's failure);
   nothing slow happens under the lock, so a runner paused while it spawns freezes nothing;
4. watch the ranks: a rank that fails ends the execution (the others get SIGTERM, then SIGKILL
   after the grace period, as torchrun and ``srun --kill-on-bad-exit`` do); so do a stop, a
   preemption or a requeue asked through ``control.json``, and the spec's time limit;
5. record how every rank ended and the execution's cause, atomically and durably, before
   anything else happens: an ending is never lost, whether or not anybody is watching.

Ranks are observed with ``waitid(WNOWAIT)`` and only reaped once the execution is over, so their
pids (and process groups) cannot be reused while the runner may still signal them.

Standard library only, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobdispatch_local import files, procs, ranks
from jobdispatch_local.cgroups import MemoryControl, NodeGroup
from jobdispatch_local.layout import ObjectDir, now_iso

__all__ = ["dead_runner_cause", "main", "serving"]

OOM_SIGNAL = signal.SIGKILL


def cause(
    kind: str,
    provenance: str,
    detail: str = "",
    *,
    exit_code: int | None = None,
    signo: int | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    """A cause as the execution records keep it (the backend turns it into a ``Cause``)."""
    return {
        "kind": kind,
        "provenance": provenance,
        "detail": detail,
        "exit_code": exit_code,
        "signal": signo,
        "actor": actor,
    }


def dead_runner_cause(runner: dict[str, Any] | None) -> dict[str, Any]:
    """The cause of an execution whose runner died before recording its end: the node went
    away under it, as far as the scheduler can tell."""
    pid = (runner or {}).get("pid", "?")
    return cause(
        "node-lost",
        "scheduler",
        f"the runner (pid {pid}) died before recording the end; its ranks died with it",
    )


def serving(runner: dict[str, Any] | None) -> bool:
    """Whether the recorded runner is alive and has not said it is done with the object."""
    return runner is not None and not runner.get("done") and procs.alive(runner)


def _signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def _duration(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))


class Runner:
    """Serves one object until it has ended."""

    def __init__(self, obj: ObjectDir) -> None:
        self.obj = obj
        self.record = obj.read_object()
        self.launch: dict[str, Any] = self.record["launch"]
        self.grace = float(self.record.get("grace", 10.0))
        self.poll = float(self.record.get("poll", 0.05))
        limit = self.record.get("memory_limit")
        self.memory_limit = int(limit) if limit else None
        control = self.record.get("cgroup")
        self.memory = MemoryControl(control["version"], control["parent"]) if control else None
        self.terminated = False  # the runner itself was told to stop (SIGTERM, SIGINT)

    # ---------------------------------------------------------------- the loop

    def run(self) -> int:
        me = procs.identity(os.getpid())
        with self.obj.lock():
            other = self.obj.read_runner()
            if other and other.get("pid") != os.getpid() and serving(other):
                return 0  # another runner serves this object already
            self.obj.write_runner(me)
        previous = other
        while True:
            with self.obj.lock():
                control = self.obj.read_control()
                executions = self.obj.executions()
                for e in executions:
                    if e.get("ended_at") is None:
                        self._adopt(e, previous)
                if (
                    control.get("stop")
                    or self.terminated
                    or len(executions) >= int(control.get("runs") or 0)
                ):
                    # Say so under the lock: from here on a requeue or release must start a
                    # new runner, since this one will not look again.
                    self.obj.write_runner({**me, "done": True})
                    return 0
                record = None
                if control.get("hold") is None:
                    record = self._begin(len(executions))
            if record is None:
                time.sleep(self.poll)
                continue
            # The lock is let go while the ranks start (a spawn may take long, or the runner
            # may be paused in it); whatever was asked meanwhile is acted on by ``_watch``.
            launched, groups, failure = self._launch(record)
            with self.obj.lock():
                watched = self._started(record, launched, failure)
            self._watch(record, watched, groups)

    def _adopt(self, record: dict[str, Any], previous: dict[str, Any] | None) -> None:
        """End an execution a dead runner left open (its ranks died with it)."""
        for r in record.get("ranks", []):
            procs.kill_group(r.get("process") or {}, signal.SIGKILL)
        record["ended_at"] = now_iso()
        record["cause"] = dead_runner_cause(previous)
        self.obj.write_execution(record)

    # ---------------------------------------------------------------- starting

    def _cwd(self) -> Path:
        return Path(self.launch.get("working_dir") or self.obj.path)

    def _begin(self, index: int) -> dict[str, Any]:
        """Record execution ``index`` as started, with no ranks yet (called under the lock).

        Durable before the lock is let go: from here on observers see the object running, a
        hold is refused, a stop, preemption or requeue names this execution, and a reader that
        finds this runner dead adopts the execution as node-lost (the ranks it may have started
        die with it: ``PR_SET_PDEATHSIG``)."""
        record: dict[str, Any] = {
            "index": index,
            "started_at": now_iso(),
            "ended_at": None,
            "nodes": [ranks.node_name(n) for n in range(int(self.launch["nodes"]))],
            "port": ranks.free_port(),
            "ranks": [],
            "cause": None,
            "memory_limit": self.memory_limit if self.memory else None,
        }
        self.obj.write_execution(record)
        return record

    def _launch(
        self, record: dict[str, Any]
    ) -> tuple[list[ranks.Rank], list[NodeGroup], str | None]:
        """Start the execution's ranks (called with the lock let go): the ranks started, their
        node groups, and why the launch failed (None when every rank started; else the ranks
        that did start are dead and reaped already, their groups removed)."""
        index, port = int(record["index"]), int(record["port"])
        nodes, per_node = int(self.launch["nodes"]), int(self.launch["procs_per_node"])
        started: list[ranks.Rank] = []
        groups: list[NodeGroup] = []
        out_dir = self.obj.output_dir(self.record)
        try:
            files.private_dir(out_dir)
            cwd = self._cwd()
            if not cwd.is_dir():
                msg = f"working directory {cwd} does not exist"
                raise FileNotFoundError(msg)
            for node in range(nodes):
                group = None
                if self.memory is not None and self.memory_limit:
                    group = self.memory.node(f"{self.obj.name}-e{index}-n{node}")
                    group.create(self.memory_limit)
                    groups.append(group)
                for local in range(per_node):
                    rank = node * per_node + local
                    env = ranks.rank_env(
                        os.environ,
                        self.launch,
                        object_name=self.obj.name,
                        execution=index,
                        node=node,
                        local=local,
                        port=port,
                    )
                    proc = ranks.spawn(
                        self.launch,
                        env=env,
                        cwd=cwd,
                        out=out_dir / f"rank-{rank}.out",
                        err=out_dir / f"rank-{rank}.err",
                        group=group,
                    )
                    started.append(ranks.Rank(rank, node, local, proc, group.path if group else ""))
        except Exception as exc:
            # SubprocessError from a failed preexec_fn is reported as an OSError subclass too.
            # Whatever did start is killed and reaped here, before the lock is taken again.
            self._stop_ranks(started, at_once=True)
            self._reap(started)
            for g in groups:
                g.remove()
            return started, [], f"{type(exc).__name__}: {exc}"
        return started, groups, None

    def _started(
        self, record: dict[str, Any], started: list[ranks.Rank], failure: str | None
    ) -> list[ranks.Rank]:
        """Record the ranks the launch started, or its failure (called under the lock again);
        the ranks left to watch. A stop, preemption or requeue asked while they started is
        found by :meth:`_watch` on its first look, as one asked just after. (Nobody else
        writes an open execution while its runner serves the object: a reader adopts it only
        once this runner is dead.)"""
        record["ranks"] = [r.record() for r in started]
        if failure is not None:
            record["ended_at"] = now_iso()
            record["cause"] = cause("launch-failed", "scheduler", failure)
        self.obj.write_execution(record)
        return started if failure is None else []

    # ---------------------------------------------------------------- watching

    def _exited(self, rank: ranks.Rank) -> bool:
        """Whether the rank has exited, noting how, without reaping it."""
        if rank.done:
            return True
        try:
            info = os.waitid(os.P_PID, rank.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None
            rank.exit_code = rank.proc.returncode if rank.proc.returncode is not None else 255
            return True
        if info is None:
            return False
        if info.si_code == os.CLD_EXITED:
            rank.exit_code = info.si_status
        else:
            rank.signal = info.si_status
        return True

    def _requested(self, index: int, started: datetime) -> dict[str, Any] | None:
        """The ending asked of execution ``index`` now, if any (checked in order)."""
        if self.terminated:
            return cause("node-lost", "scheduler", "the runner was terminated")
        control = self.obj.read_control()
        stop = control.get("stop")
        if stop:
            return cause("cancelled", "actor", stop.get("reason") or "stopped")
        preempt = control.get("preempt")
        if preempt and int(preempt.get("index", -1)) == index:
            by = preempt.get("by")
            detail = "preempted by jobdispatch local preempt" + (f" ({by})" if by else "")
            return cause("preempted", "scheduler", detail)
        requeue = control.get("requeue")
        if requeue and int(requeue.get("index", -1)) == index:
            return cause(
                "requeued", "actor", requeue.get("reason") or "requeued", actor=requeue.get("by")
            )
        # The spec's limit, unless someone changed it since (``jobdispatch local time-limit``),
        # as ``scontrol update TimeLimit=`` does.
        limit = control.get("time_limit", self.launch.get("time_limit"))
        if limit is not None:
            elapsed = (datetime.now(UTC) - started).total_seconds()
            if elapsed >= float(limit):
                return cause("time-limit", "scheduler", f"time limit {_duration(limit)} reached")
        return None

    def _failure(self, rank: ranks.Rank) -> dict[str, Any] | None:
        if rank.exit_code == 0:
            return None
        if rank.signal is not None:
            name = _signal_name(rank.signal)
            return cause(
                "non-zero-exit",
                "application",
                f"rank {rank.rank} killed by {name}",
                exit_code=128 + rank.signal,
                signo=rank.signal,
            )
        return cause(
            "non-zero-exit",
            "application",
            f"rank {rank.rank} exited {rank.exit_code}",
            exit_code=rank.exit_code,
        )

    def _watch(
        self, record: dict[str, Any], started: list[ranks.Rank], groups: list[NodeGroup]
    ) -> None:
        if record.get("ended_at") is not None:
            return  # the launch failed; recorded already
        index = int(record["index"])
        began = datetime.fromisoformat(record["started_at"])
        ending: dict[str, Any] | None = None
        first_failure: dict[str, Any] | None = None
        kill_at: float | None = None
        while True:
            live = [r for r in started if not self._exited(r)]
            if not live:
                break
            if ending is None:
                for r in started:
                    failed = self._failure(r) if r.done else None
                    if failed is not None:
                        first_failure = first_failure or failed
                if first_failure is not None:
                    ending = first_failure
                else:
                    ending = self._requested(index, began)
                if ending is not None:
                    self._stop_ranks(live, at_once=self.grace <= 0)
                    kill_at = time.monotonic() + self.grace
            elif kill_at is not None and time.monotonic() >= kill_at:
                self._stop_ranks(live, at_once=True)
                kill_at = None
            time.sleep(self.poll)
        # Every rank has exited; take what they forked with them before reaping the leaders.
        for r in started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(r.proc.pid, signal.SIGKILL)
        self._reap(started)
        if ending is None:
            failures = [f for r in started if (f := self._failure(r)) is not None]
            ending = failures[0] if failures else cause("none", "none", exit_code=0)
        oom = self._oom(started, groups)
        if oom is not None and ending["kind"] in ("non-zero-exit", "none"):
            ending = oom
        record["ranks"] = [r.record() for r in started]
        record["cause"] = ending
        record["ended_at"] = now_iso()
        with self.obj.lock():
            self.obj.write_execution(record)
        for g in groups:
            g.remove()

    def _oom(self, started: list[ranks.Rank], groups: list[NodeGroup]) -> dict[str, Any] | None:
        """An OOM cause when the kernel killed a rank of a node that went over its limit."""
        for g in groups:
            if g.oom_kills() <= 0:
                continue
            victims = [r for r in started if r.group == g.path and r.signal == OOM_SIGNAL]
            who = f"rank {victims[0].rank}" if victims else "a process"
            limit = self.memory_limit or 0
            return cause(
                "out-of-memory",
                "application",
                f"{who} killed by the kernel's OOM killer "
                f"(memory limit {limit // (1 << 20)} MiB per node)",
                exit_code=128 + OOM_SIGNAL,
                signo=OOM_SIGNAL,
            )
        return None

    @staticmethod
    def _stop_ranks(live: list[ranks.Rank], *, at_once: bool) -> None:
        signo = signal.SIGKILL if at_once else signal.SIGTERM
        for r in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(r.proc.pid, signo)

    @staticmethod
    def _reap(started: list[ranks.Rank]) -> None:
        for r in started:
            with contextlib.suppress(ChildProcessError):
                code = r.proc.wait()
                if not r.done:
                    if code < 0:
                        r.signal = -code
                    else:
                        r.exit_code = code


def _detach() -> None:
    """Fork once more: the parent exits at once (its caller waits for that), the child is
    nobody's child and keeps serving."""
    if os.fork() != 0:
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m jobdispatch_local.runner OBJECT_DIR", file=sys.stderr)
        return 2
    obj = ObjectDir(Path(args[0]))
    _detach()
    runner = Runner(obj)

    def terminate(signo: int, _frame: object) -> None:
        runner.terminated = True

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print(f"{now_iso()} runner {os.getpid()} serves {obj.name}", flush=True)
    code = runner.run()
    print(f"{now_iso()} runner {os.getpid()} done", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
