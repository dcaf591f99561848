"""The local adapter's SPI face: jobs as real processes on this machine.

Start writes the object's directory (gate closed) and returns only once it is durable, so an
object whose reply was lost is still found by its discovery name. Open records the gate lifted
and spawns the object's runner (:mod:`jobdispatch_local.runner`), which starts the ranks and
records every ending on disk whether or not anybody is watching. Every other call reads or
changes the object's files under its lock; nothing lives in this process, so any number of
supervisors and CLIs on the machine see the same scheduler.

No call holds an object's lock across anything that can take long: the runner is spawned, and
waited for, after the lock is let go. Nor does any call wait long on a lock another process
holds (that process may be paused: SIGSTOP, a GC pause, a frozen VM): an observation reports
such an object as unobservable (an incomplete Discovery, ``Unavailable`` from inspect), never
as absent, and a change raises ``Unavailable`` without having changed anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import attrs
from jobdispatch import codec, spi
from jobdispatch import types as t
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import (
    Invalid,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Unavailable,
)
from jobdispatch.kit.deadline import refuse_past_deadline
from jobdispatch.kit.refusal import refuses_unsupported

from jobdispatch_local import cgroups, files, output, procs
from jobdispatch_local.config import CONFIG_SCHEMA, Settings
from jobdispatch_local.layout import (
    FORMAT,
    VERSION,
    ObjectDir,
    describe_launch,
    empty_control,
    now_iso,
    scan,
)
from jobdispatch_local.observe import LockBusy, Snapshot, observe, reconcile, snapshot

__all__ = ["CONFIG_SCHEMA", "LocalBackend", "Survey"]

#: How long open, release and requeue wait for a spawned runner to take the object.
RUNNER_ACK_TIMEOUT = 10.0
#: How long stop waits, past the grace period, for the runner to record the end.
STOP_SLACK = 5.0
#: How long one scan (find, find_many, ps) waits in all for objects whose lock another process
#: holds, before it reports them unobservable. Every holder's critical section is a few small
#: file operations (milliseconds); this only smooths over a busy machine.
SCAN_PATIENCE = 0.25
#: The same for inspect, ceased and the other calls about one object.
INSPECT_PATIENCE = 1.0
#: How long a change (open, stop, hold, ...) waits for the lock before raising Unavailable.
CHANGE_PATIENCE = 2.0

_Y, _N = t.Tristate.YES, t.Tristate.NO
_WHY = "local adapter"

_CAPABILITIES: Mapping[t.Capability, tuple[t.Tristate, str]] = {
    t.Capability.CONTAINER_IMAGE: (
        _N,
        "ranks run as plain processes; there is no container runtime",
    ),
    t.Capability.NATIVE_REQUEUE: (_N, "the local scheduler reruns nothing by itself"),
    t.Capability.NATIVE_RESTART: (_N, "the local scheduler restarts nothing by itself"),
    t.Capability.HOLD: (_Y, "a held object's runner waits before starting its ranks"),
    t.Capability.PRE_TERMINATION_SIGNAL: (_Y, "SIGTERM, then SIGKILL after the grace period"),
    t.Capability.ACCOUNTING_HISTORY: (_Y, "execution records stay in the state directory"),
    t.Capability.ATTEMPT_INJECTION: (_Y, "JOBDISPATCH_SUBMISSION and JOBDISPATCH_EXECUTION"),
    t.Capability.READMISSION_GATE: (_N, "a preempted object ends; it is never readmitted"),
    t.Capability.WORKING_DIRECTORY: (_Y, "the ranks' working directory"),
    t.Capability.PROCS_PER_NODE: (_Y, "N x P processes on this machine"),
    t.Capability.OUTPUT_PATH: (_Y, "rank files under <output>/<object>/"),
    t.Capability.OUTPUT_READ: (_Y, "rank-<r>.out and rank-<r>.err files"),
    t.Capability.OUTPUT_FOLLOW: (_Y, "the files are followed until the object ends"),
    t.Capability.OUTPUT_RETAINED: (_Y, "kept until the state directory is cleaned"),
    t.Capability.OUTPUT_GROWTH: (_Y, "the sizes and times of the rank files, one stat each"),
    t.Capability.CPUS_PER_PROC: (_N, "ranks are not pinned to CPUs; they share this machine's"),
    t.Capability.QUEUES: (_N, "there is one machine and no queue"),
    t.Capability.ACCOUNTS: (_N, "nothing is charged to an account"),
    t.Capability.NODE_CONSTRAINTS: (
        _N,
        "every node is this machine (suspect nodes to exclude are named in the log and ignored)",
    ),
    t.Capability.EXCLUSIVE_NODES: (_N, "every job shares this machine"),
}

_log = logging.getLogger(__name__)

_PERFORM: Mapping[t.Action, tuple[t.Tristate, str]] = {
    t.Action.RESUBMIT: (_Y, "a new object for the new submission"),
    t.Action.HOLD: (_Y, "a hold for a person, recorded"),
    t.Action.ESCALATE: (_Y, "recorded and delivered by the supervisor"),
    t.Action.REQUEUE: (_Y, "the runner reruns the object as its next execution"),
    t.Action.RESTART: (_N, "there is no restart in place; resubmit or requeue instead"),
}


@attrs.frozen
class Survey:
    """What one scan of the state directory saw: the objects it could read, and by name the
    ones it could not read now because another process held their lock (paused or stuck)."""

    objects: tuple[spi.ObjectObs, ...] = ()
    unobservable: tuple[str, ...] = ()


class LocalBackend(
    spi.Backend,
    spi.CessationSignal,
    spi.Holder,
    spi.IdentityWeakener,
    spi.MultiFinder,
    spi.OutputReader,
    spi.Paced,
    spi.Requeuer,
    spi.SubmissionPreview,
):
    """Real processes on this machine, one runner per opened object.

    Args:
        settings: the checked configuration (state directory, grace, memory limit, cgroups).
        clock: what call deadlines are judged by.
    """

    name = "local"
    #: A poll reads this machine's state directory: cheap, so as often as twice a second.
    pacing = spi.Pacing(interval=0.5, floor=0.01)

    def __init__(self, settings: Settings, *, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.clock = clock
        self.state_dir = settings.state_dir
        self.root = self.state_dir / "objects"
        self._memory: cgroups.MemoryControl | None = None
        self._probed = False
        self._lose_reply = False
        self.memory_detail = "no memory_limit is configured"
        if settings.memory_limit is not None:
            self._memory_control()

    def _memory_control(self) -> cgroups.MemoryControl | None:
        """The cgroup that enforces memory limits, probed once, when a limit is first needed
        (the site's, or a spec's ``resources.memory_per_node``)."""
        if not self._probed:
            self._memory, detail = cgroups.probe(self.settings.cgroups)
            self._probed = True
            if self.settings.memory_limit is not None or self._memory is None:
                self.memory_detail = detail
        return self._memory

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, clock: Clock = system_clock) -> LocalBackend:
        """Build from a configuration checked against :data:`CONFIG_SCHEMA`."""
        return cls(Settings.from_config(config), clock=clock)

    def __repr__(self) -> str:
        return f"LocalBackend(state_dir={str(self.state_dir)!r})"

    # ------------------------------------------------------------------ answers

    def memory_support(self) -> t.Support:
        """Whether an execution over its memory limit is killed and reported out-of-memory.

        The contract has no capability of that name, so the CLI shows this beside the others
        and every rule naming out-of-memory carries it in its answer.
        """
        if self.settings.memory_limit is None:
            return t.Support.no(t.Source.PROBED, self.memory_detail)
        if self._memory is None:
            return t.Support.no(
                t.Source.PROBED, f"memory_limit cannot be enforced: {self.memory_detail}"
            )
        mib = self.settings.memory_limit // (1 << 20)
        return t.Support.yes(t.Source.PROBED, f"{mib} MiB per node through {self.memory_detail}")

    def capabilities(self, spec: t.JobSpec | None = None) -> Mapping[t.Capability, t.Support]:
        """What a process on this machine can be given; GPUs as many as the site declared,
        split between the spec's nodes, and memory limits where a cgroup can enforce them."""
        answers = {
            cap: t.Support(answer, t.Source.DECLARED, f"{_WHY}: {why}")
            for cap, (answer, why) in _CAPABILITIES.items()
        }
        answers[t.Capability.GPUS] = self._gpu_support(spec)
        control = self._memory_control()
        answers[t.Capability.MEMORY_LIMIT] = (
            t.Support.yes(t.Source.PROBED, f"{_WHY}: per node through {control.version}")
            if control is not None
            else t.Support.no(
                t.Source.PROBED, f"{_WHY}: no cgroup can enforce it ({self.memory_detail})"
            )
        )
        return answers

    def _gpu_support(self, spec: t.JobSpec | None) -> t.Support:
        declared = self.settings.gpus
        listed = ", ".join(str(g) for g in declared)
        if not declared:
            return t.Support.no(
                t.Source.DECLARED, f"{_WHY}: the site declared no GPUs (gpus = [...])"
            )
        if spec is not None and spec.resources.gpus_per_node:
            res = spec.resources
            wanted = spec.nodes * res.gpus_per_node
            if wanted > len(declared):
                return t.Support.no(
                    t.Source.DECLARED,
                    f"{_WHY}: {spec.nodes} nodes x {res.gpus_per_node} GPUs is {wanted}, but the "
                    f"site declared {len(declared)} ({listed})",
                )
            if res.gpu_type is not None and res.gpu_type != self.settings.gpu_type:
                return t.Support.no(
                    t.Source.DECLARED,
                    f"{_WHY}: the declared GPUs are of type {self.settings.gpu_type or 'unnamed'}, "
                    f"not {res.gpu_type}",
                )
        kind = f" of type {self.settings.gpu_type}" if self.settings.gpu_type else ""
        return t.Support.yes(
            t.Source.DECLARED, f"{_WHY}: devices {listed}{kind}, split between nodes"
        )

    def rules(self, spec: t.JobSpec, policy: t.RecoveryPolicy) -> Sequence[t.RuleSupport]:
        """Nothing is enforced natively; the supervisor can have resubmit, requeue, hold and
        escalate performed. A rule naming out-of-memory says whether an OOM can be seen here."""
        out = []
        memory = self.memory_support()
        for rule in policy.rules:
            native = t.Support.no(t.Source.DECLARED, "the local scheduler reruns nothing by itself")
            answer, why = _PERFORM[rule.action]
            if t.CauseKind.OUT_OF_MEMORY in rule.on and memory.answer is not _Y:
                why = f"{why}; but out-of-memory is never reported here ({memory.detail})"
            out.append(
                t.RuleSupport(native=native, perform=t.Support(answer, t.Source.DECLARED, why))
            )
        return out

    # ------------------------------------------------------------------ plumbing

    def _dir(self, ref: spi.ObjectRef) -> ObjectDir:
        """The object's directory; NotFound for a ref this machine never made."""
        name = ref.id
        if "/" in name or name.startswith(".") or spi.parse_discovery_name(name) is None:
            msg = f"no object {ref} on the local scheduler ({self.state_dir})"
            raise NotFound(msg)
        obj = ObjectDir(self.root / name)
        if not obj.exists():
            msg = f"no object {ref} on the local scheduler ({self.state_dir})"
            raise NotFound(msg)
        return obj

    def _check_deadline(self, deadline: datetime, what: str) -> None:
        refuse_past_deadline(deadline, self.clock(), what)

    def _resolve(self, path: str | None) -> str | None:
        """A spec path made absolute against the caller's directory, as sbatch does."""
        if path is None:
            return None
        return str(Path(path).expanduser().absolute())

    # ------------------------------------------------------------------ Backend

    def _record(self, request: spi.StartRequest) -> dict[str, Any]:
        """The object's record as start writes it: the spec, and the launch the runner reads.
        What this machine cannot give (an image, GPUs beyond those declared, a queue...) was
        refused before, by the core (``refuses_unsupported``)."""
        spec = request.spec
        res = spec.resources
        gpus = None
        if res.gpus_per_node:
            per = res.gpus_per_node
            devices = self.settings.gpus
            gpus = [list(devices[n * per : (n + 1) * per]) for n in range(spec.nodes)]
        memory_limit = self.settings.memory_limit
        if res.memory_per_node_mib is not None:
            memory_limit = res.memory_per_node_mib << 20
        control = self._memory_control() if memory_limit is not None else None
        out_base = self._resolve(spec.output)
        return {
            "format": FORMAT,
            "version": VERSION,
            "name": request.name,
            "job": request.job,
            "submission": request.submission,
            "attempt": request.attempt,
            "created_at": now_iso(),
            "spec": codec.converter.unstructure(spec),
            "launch": {
                "command": list(spec.command),
                "nodes": spec.nodes,
                "procs_per_node": spec.procs_per_node,
                "env": dict(spec.env),
                "request_env": dict(request.env),
                "working_dir": self._resolve(spec.working_dir),
                "time_limit": spec.time_limit.total_seconds() if spec.time_limit else None,
                **({"gpus": gpus} if gpus else {}),
            },
            "output_dir": str(Path(out_base) / request.name) if out_base else None,
            "grace": self.settings.grace,
            "poll": self.settings.poll,
            "memory_limit": memory_limit,
            "cgroup": (
                {"version": control.version, "parent": control.parent}
                if control is not None
                else None
            ),
        }

    @refuses_unsupported
    def preview(self, request: spi.StartRequest) -> str:
        """What ``start`` would create, without creating it: the runner's command line and
        each rank's, with the environment dispatch gives it (``SubmissionPreview``)."""
        return describe_launch(self._record(request), self.root / request.name)

    @refuses_unsupported
    def start(self, request: spi.StartRequest) -> spi.ObjectRef:
        """Create the object's directory, gate closed, durably; nothing runs until open.

        Raises:
            Unsupported: the spec asks for a container image.
            Rejected: an object of this name exists already.
            Unavailable: the state directory cannot be written.
        """
        name = request.name
        if request.exclude:
            # Every rank runs here: there is no other node to go to (capability
            # node-constraints says so), so the suspects are named and the object starts anyway.
            _log.warning(
                "object %s: suspect nodes %s cannot be excluded on one machine; ignored",
                name,
                ", ".join(request.exclude),
            )
        record = self._record(request)
        final = self.root / name
        if final.exists():
            msg = f"an object named {name} exists already in {self.root}"
            raise Rejected(msg)
        try:
            files.private_dir(self.root)
            tmp = self.root / f".new-{name}-{os.getpid()}-{secrets.token_hex(3)}"
            tmp.mkdir(mode=files.PRIVATE_DIR)
            os.chmod(tmp, files.PRIVATE_DIR)  # whatever the umask: object.json holds the env
            try:
                files.write_json(tmp / "control.json", empty_control(), sync_dir=False)
                files.write_json(tmp / "object.json", record, sync_dir=False)
                (tmp / "lock").touch(mode=files.PRIVATE_FILE)
                files.fsync_dir(tmp)
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            files.fsync_dir(self.root)
        except FileExistsError:
            msg = f"an object named {name} exists already in {self.root}"
            raise Rejected(msg) from None
        except OSError as exc:
            if final.exists() and (final / "object.json").exists():
                msg = f"an object named {name} exists already in {self.root}"
                raise Rejected(msg) from None
            msg = f"cannot create {name} in {self.root}: {exc}"
            raise Unavailable(msg) from exc
        if self._lose_reply:
            self._lose_reply = False
            msg = f"start of {name}: the reply was lost (lose_next_start_reply)"
            raise OutcomeUnknown(msg)
        return spi.ObjectRef(name)

    def open(self, ref: spi.ObjectRef, meta: t.CallMeta | None = None) -> None:
        """Lift the gate: record it, then have a runner take the object. Idempotent; an object
        that ended (or was stopped) stays as it is. Rejected past ``meta.deadline``, judged
        once the object's lock is held: a wait for the lock is time the deadline counts."""
        obj = self._dir(ref)
        with _changing(obj, f"open {ref}"):
            if meta is not None:
                self._check_deadline(meta.deadline, f"open of {ref}")
            snap = Snapshot(obj, held=True)
            if snap.state is t.ObjectState.ENDED:
                return
            control = snap.control
            if not control.get("opened"):
                control["opened"] = True
                control["opened_at"] = now_iso()
                control["runs"] = max(int(control.get("runs") or 0), 1)
                obj.write_control(control)
            need = _runner_needed(obj)
        self._ensure_runner(obj, need)

    def find(self, job: t.JobID) -> spi.Discovery:
        """Every object of the job, by discovery name, from one scan of the state directory;
        incomplete when one of them could not be read now (its lock held by another process)."""
        seen = _survey(o for o in scan(self.state_dir, f"jd-{job}-") if _owner(o) == job)
        return spi.Discovery(
            job=job, objects=seen.objects, at=self.clock(), complete=not seen.unobservable
        )

    def inspect(self, ref: spi.ObjectRef) -> spi.ObjectObs:
        """One object now. NotFound for a ref this machine never made; Unavailable when it
        cannot be read now (another process has held its lock all along)."""
        obj = self._dir(ref)
        return observe(_read(obj, f"inspect {ref}"))

    def stop(self, ref: spi.ObjectRef, reason: str) -> None:
        """Stop this object only. A running execution's ranks get SIGTERM, then SIGKILL after
        the grace period, and it ends ``cancelled``; a gated, pending or held object ends
        without running. Already ended, or unknown, is success. Returns once the end is
        recorded (or the grace period and some slack have passed)."""
        try:
            obj = self._dir(ref)
        except NotFound:
            return
        with _changing(obj, f"stop {ref}"):
            snap = Snapshot(obj, held=True)
            if snap.state is t.ObjectState.ENDED:
                return
            control = snap.control
            if not control.get("stop"):
                control["stop"] = {"reason": reason, "at": now_iso()}
                obj.write_control(control)
        self._wait_ended(obj, self.settings.grace + STOP_SLACK)

    def close(self) -> None:
        """Nothing is held open between calls."""

    # ------------------------------------------------------------------ runners

    def _wait_ended(self, obj: ObjectDir, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if _ended_or_idle(obj):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(min(0.05, self.settings.poll))

    def _ensure_runner(self, obj: ObjectDir, need: tuple[bool, dict[str, Any] | None]) -> None:
        """Spawn a runner when ``need`` (decided under the lock by :func:`_runner_needed`) says
        one is wanted, and wait until it has taken the object.

        Called with the lock let go: spawning and waiting can take long (a loaded machine, a
        paused caller), and nobody else may wait on that. Nothing the lock ordered depends on
        it: the runner itself registers under the lock and leaves when a live runner serves
        the object already (at most one runner), and it starts an execution only under the
        lock, only while runs are wanted, no stop is recorded and no hold stands (so a runner
        spawned late, after a stop, an end, or beside another caller's runner, starts
        nothing: it does only what the object's control state wants when it looks)."""
        wanted, before = need
        if not wanted:
            return
        _spawn(obj)
        deadline = time.monotonic() + RUNNER_ACK_TIMEOUT
        while time.monotonic() < deadline:
            now = obj.read_runner()
            if now is not None and now != before:
                return  # a new runner took the object (and may be done with it already)
            time.sleep(0.01)
        # Left gated or pending: a later open, release or requeue tries again.

    # ------------------------------------------------------------------ Holder

    def hold(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Place hold ``meta.instance`` on a gated, pending or held object (replacing the
        instance standing). Rejected when it runs or has ended, or past ``meta.deadline``."""
        self._check_deadline(meta.deadline, f"hold {meta.instance} of {ref}")
        obj = self._dir(ref)
        with _changing(obj, f"hold {meta.instance} of {ref}"):
            snap = Snapshot(obj, held=True)
            if not snap.state.waiting:
                msg = f"cannot hold object {ref}: it is {snap.state}"
                raise Rejected(msg)
            control = snap.control
            if control.get("hold") == meta.instance:
                return
            control["hold"] = meta.instance
            control["hold_by"] = str(meta.by) if meta.by else None
            obj.write_control(control)

    def release(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Lift the hold only if ``meta.instance`` is the one standing; another instance is a
        success with no effect. Rejected past ``meta.deadline``."""
        self._check_deadline(meta.deadline, f"release {meta.instance} of {ref}")
        obj = self._dir(ref)
        with _changing(obj, f"release {meta.instance} of {ref}"):
            control = obj.read_control()
            if control.get("hold") != meta.instance:
                return
            control["hold"] = None
            control["hold_by"] = None
            obj.write_control(control)
            need = _runner_needed(obj) if control.get("opened") else (False, None)
        self._ensure_runner(obj, need)

    # ------------------------------------------------------------------ Requeuer

    def requeue(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """Rerun the object as its next execution: a running execution ends ``requeued``
        (provenance actor) first; an ended object goes back to pending. A gated, pending or
        held object, or one stopped before it was opened, has nothing to requeue: success with
        no effect."""
        self._check_deadline(meta.deadline, f"requeue of {ref}")
        obj = self._dir(ref)
        with _changing(obj, f"requeue of {ref}"):
            snap = Snapshot(obj, held=True)
            control = snap.control
            running = snap.running
            if running is not None:
                index = int(running["index"])
                control["requeue"] = {
                    "index": index,
                    "by": str(meta.by) if meta.by else None,
                    "reason": meta.reason,
                }
                control["runs"] = index + 2
            elif snap.state is t.ObjectState.ENDED and not snap.orphaned and control.get("opened"):
                # (An object stopped before it was ever opened has nothing to rerun: a rerun
                # here would start it without its gate ever being lifted.)
                control["runs"] = len(snap.executions) + 1
                control["stop"] = None
            else:
                return
            obj.write_control(control)
            need = _runner_needed(obj)
        self._ensure_runner(obj, need)

    def restore_requeue_bit(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """The local scheduler has no requeue bit (it never requeues by itself): nothing to
        restore. NotFound for an unknown ref, Rejected past the deadline, like every call."""
        self._check_deadline(meta.deadline, f"restore of the requeue bit of {ref}")
        self._dir(ref)

    # ------------------------------------------------------------------ MultiFinder

    def find_many(
        self, jobs: Sequence[t.JobID], states: Sequence[t.ObjectState] = ()
    ) -> Mapping[t.JobID, spi.Discovery]:
        """One scan of the state directory for many jobs; with ``states``, only those. A job
        with an object that could not be read now gets an incomplete Discovery."""
        wanted = set(jobs)
        keep = set(states)
        found: dict[t.JobID, list[spi.ObjectObs]] = {job: [] for job in jobs}
        seen = _survey(obj for obj in scan(self.state_dir) if _owner(obj) in wanted)
        for obs in seen.objects:
            if keep and obs.state not in keep:
                continue
            job = obs.identity[0] if obs.identity else None
            if job in found:
                found[job].append(obs)
        blind = {
            ident[0] for name in seen.unobservable if (ident := spi.parse_discovery_name(name))
        }
        at = self.clock()
        return {
            job: spi.Discovery(job=job, objects=tuple(objs), at=at, complete=job not in blind)
            for job, objs in found.items()
        }

    # ------------------------------------------------------------------ CessationSignal

    def ceased(self, ref: spi.ObjectRef) -> spi.CessationEvidence:
        """Yes when neither the runner nor any rank the records name is alive; Unavailable
        when the object cannot be read now."""
        snap = _read(self._dir(ref), f"ceased {ref}")
        alive = [
            r["rank"]
            for e in snap.executions
            for r in e.get("ranks", [])
            if procs.alive(r.get("process"))
        ]
        if snap.runner_alive or alive:
            what = f"ranks {alive}" if alive else "its runner"
            return spi.CessationEvidence(
                ceased=t.Tristate.NO, detail=f"{what} alive", at=self.clock()
            )
        return spi.CessationEvidence(
            ceased=t.Tristate.YES, detail="no recorded process is alive", at=self.clock()
        )

    # ------------------------------------------------------------------ IdentityWeakener

    def identity_weakened(self, spec: t.JobSpec) -> str:
        """Never: the runner never reruns a rank in place; a rerun is a new execution."""
        return ""

    # ------------------------------------------------------------------ OutputReader

    def output(
        self, ref: spi.ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
    ) -> IO[bytes]:
        """Rank ``rank``'s ``stream`` (stdout or stderr) so far, or with ``follow`` a stream
        that waits for more until the object ends. Every execution appends to the same file."""
        if stream not in ("stdout", "stderr"):
            msg = f"stream must be stdout or stderr, got {stream!r}"
            raise Invalid(msg)
        obj = self._dir(ref)
        record = obj.read_object()
        launch = record["launch"]
        world = int(launch["nodes"]) * int(launch["procs_per_node"])
        if not 0 <= rank < world:
            msg = f"object {ref} has ranks 0 to {world - 1}, not {rank}"
            raise NotFound(msg)
        path = obj.output_file(rank, stream, record)
        if not follow:
            return output.snapshot(path)
        return output.follow(path, lambda: _ended(obj))

    # ------------------------------------------------------------------ OutputGrowthReader

    def output_growth(self, refs: Sequence[spi.ObjectRef]) -> Mapping[spi.ObjectRef, spi.Growth]:
        """Each object's output so far: the rank files' total size and newest modification
        time, from one stat per file (never their bytes). An object with no output yet, or
        one this machine no longer holds, is left out."""
        out: dict[spi.ObjectRef, spi.Growth] = {}
        for ref in refs:
            try:
                obj = self._dir(ref)
                record = obj.read_object()
            except (NotFound, FileNotFoundError):
                continue
            growth = output.growth(obj.output_dir(record))
            if growth is not None:
                out[ref] = growth
        return out

    # ------------------------------------------------------------------ the environment

    def preempt(self, ref: spi.ObjectRef, *, by: t.Actor | None = None, wait: bool = True) -> None:
        """Preempt the running execution as a scheduler does: SIGTERM, SIGKILL after the grace
        period, cause ``preempted`` (provenance scheduler). ``jobdispatch local preempt``.

        Raises:
            NotFound: no such object.
            Invalid: it is not running.
        """
        obj = self._dir(ref)
        with _changing(obj, f"preempt {ref}"):
            snap = Snapshot(obj, held=True)
            running = snap.running
            if running is None:
                msg = f"cannot preempt object {ref}: it is {snap.state}, not running"
                raise Invalid(msg)
            control = snap.control
            control["preempt"] = {
                "index": int(running["index"]),
                "at": now_iso(),
                "by": str(by) if by else None,
            }
            obj.write_control(control)
        if wait:
            self._wait_ended(obj, self.settings.grace + STOP_SLACK)

    def set_time_limit(self, ref: spi.ObjectRef, seconds: float) -> None:
        """Change the object's time limit, counted from the start of each execution (as
        ``scontrol update TimeLimit=``): an execution already past it ends ``time-limit``."""
        if seconds <= 0:
            msg = f"a time limit must be positive, got {seconds}"
            raise Invalid(msg)
        obj = self._dir(ref)
        with _changing(obj, f"time limit of {ref}"):
            control = obj.read_control()
            control["time_limit"] = float(seconds)
            obj.write_control(control)

    def lose_next_start_reply(self) -> None:
        """Make this backend's next Start create its object, then raise OutcomeUnknown, as a
        reply lost on the way would (for tests of what callers do then)."""
        self._lose_reply = True

    def survey(self) -> Survey:
        """Every object on this machine, of every job (for ``jobdispatch local ps``), and the
        names of those that could not be read now."""
        return _survey(scan(self.state_dir))

    def objects(self) -> list[spi.ObjectObs]:
        """Every object on this machine that could be read now (see :meth:`survey`)."""
        return list(self.survey().objects)

    def object_dir(self, ref: spi.ObjectRef) -> Path:
        """Where the object's records and output live."""
        return self._dir(ref).path

    def kill_runner(self, ref: spi.ObjectRef) -> bool:
        """SIGKILL the object's runner (tests: a runner that dies loses nothing recorded)."""
        runner = self._dir(ref).read_runner()
        if not procs.alive(runner):
            return False
        assert runner is not None
        os.kill(int(runner["pid"]), signal.SIGKILL)
        return True

    def reconcile(self, ref: spi.ObjectRef) -> None:
        """Record any end a dead runner left unrecorded (Unavailable when the object's lock
        stays held by another process)."""
        obj = self._dir(ref)
        try:
            reconcile(obj, wait=CHANGE_PATIENCE)
        except LockBusy:
            raise _busy(obj, f"reconcile {ref}", CHANGE_PATIENCE) from None


def _owner(obj: ObjectDir) -> t.JobID | None:
    identity = spi.parse_discovery_name(obj.name)
    return identity[0] if identity else None


def _busy(obj: ObjectDir, what: str, waited: float) -> Unavailable:
    return Unavailable(
        f"{what}: another process has held the lock of {obj.name} for more than {waited:g}s "
        "(paused or stuck); nothing was changed, try again"
    )


@contextlib.contextmanager
def _changing(obj: ObjectDir, what: str) -> Iterator[None]:
    """The object's exclusive lock for a change, or Unavailable (nothing changed) when another
    process keeps it past :data:`CHANGE_PATIENCE`."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(obj.lock(wait=CHANGE_PATIENCE))
        except LockBusy:
            raise _busy(obj, what, CHANGE_PATIENCE) from None
        yield


def _read(obj: ObjectDir, what: str) -> Snapshot:
    """A snapshot of one object, or Unavailable when it cannot be read now."""
    try:
        return snapshot(obj, wait=INSPECT_PATIENCE)
    except LockBusy:
        raise Unavailable(
            f"{what}: {obj.name} cannot be read now: another process has held its lock for "
            f"more than {INSPECT_PATIENCE:g}s (paused or stuck); try again"
        ) from None


def _ended(obj: ObjectDir) -> bool:
    """Whether the object has ended, as far as can be read now (unreadable: not yet)."""
    try:
        return snapshot(obj).state is t.ObjectState.ENDED
    except LockBusy:
        return False


def _ended_or_idle(obj: ObjectDir) -> bool:
    """Whether the object is not running, as far as can be read now (unreadable: running)."""
    try:
        return snapshot(obj).state is not t.ObjectState.RUNNING
    except LockBusy:
        return False


def _survey(objs: Iterable[ObjectDir]) -> Survey:
    """Observe every object, trying again those whose lock another process holds until
    :data:`SCAN_PATIENCE` (one budget for the whole scan) has passed; those still locked then
    are unobservable for this scan. Nobody waits on one paused process for longer."""
    deadline = time.monotonic() + SCAN_PATIENCE
    todo = list(objs)
    order = [obj.name for obj in todo]
    seen: dict[str, spi.ObjectObs] = {}
    while True:
        busy = []
        for obj in todo:
            try:
                seen[obj.name] = observe(snapshot(obj))
            except LockBusy:
                busy.append(obj)
        if not busy or time.monotonic() >= deadline:
            break
        time.sleep(0.005)
        todo = busy
    return Survey(
        objects=tuple(seen[name] for name in order if name in seen),
        unobservable=tuple(obj.name for obj in busy),
    )


def _runner_needed(obj: ObjectDir) -> tuple[bool, dict[str, Any] | None]:
    """Called under the object's lock: whether a runner must be spawned (none is alive, no stop
    is recorded and runs are wanted), and the runner record seen (to tell a new one by)."""
    snap = Snapshot(obj, held=True)
    wanted = (
        not snap.runner_alive
        and not snap.control.get("stop")
        and len(snap.executions) < int(snap.control.get("runs") or 0)
    )
    return wanted, snap.runner


def _spawn(obj: ObjectDir) -> None:
    """Start a runner for ``obj`` in a new session; it detaches at once (see the runner).

    Never called under the object's lock (see :meth:`LocalBackend._ensure_runner`). The
    cross-process tests replace this function in a supervisor they start, to stop that
    supervisor exactly here; nothing in this package looks for such a replacement."""
    with open(files.append_private(obj.log_file), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobdispatch_local.runner", str(obj.path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=obj.path,
            start_new_session=True,
            close_fds=True,
        )
    proc.wait()
