"""The local adapter's SPI face: jobs as real processes on this machine.

Start writes the object's directory (gate closed) and returns only once it is durable, so an
object whose reply was lost is still found by its discovery name. Open records the gate lifted
and spawns the object's runner (:mod:`jobdispatch_local.runner`), which starts the ranks and
records every ending on disk whether or not anybody is watching. Every other call reads or
changes the object's files under its lock; nothing lives in this process, so any number of
supervisors and CLIs on the machine see the same scheduler.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from jobdispatch import codec
from jobdispatch.clock import Clock, system_clock
from jobdispatch.errors import (
    Invalid,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Unavailable,
    Unsupported,
)
from jobdispatch.spi import (
    CessationEvidence,
    Discovery,
    ObjectObs,
    ObjectRef,
    StartRequest,
    parse_discovery_name,
)
from jobdispatch.types import (
    Action,
    Actor,
    CallMeta,
    Capability,
    CauseKind,
    HoldMeta,
    JobID,
    JobSpec,
    ObjectState,
    RecoveryPolicy,
    RuleSupport,
    Source,
    Support,
    Tristate,
)

from jobdispatch_local import cgroups, files, output, procs
from jobdispatch_local.config import CONFIG_SCHEMA, Settings, parse_config
from jobdispatch_local.layout import FORMAT, VERSION, ObjectDir, empty_control, now_iso, scan
from jobdispatch_local.observe import Snapshot, observe, reconcile, snapshot

__all__ = ["CONFIG_SCHEMA", "LocalBackend"]

#: How long open, release and requeue wait for a spawned runner to take the object.
RUNNER_ACK_TIMEOUT = 10.0
#: How long stop waits, past the grace period, for the runner to record the end.
STOP_SLACK = 5.0

_Y, _N = Tristate.YES, Tristate.NO
_WHY = "local adapter"

_CAPABILITIES: Mapping[Capability, tuple[Tristate, str]] = {
    Capability.CONTAINER_IMAGE: (_N, "ranks run as plain processes; there is no container runtime"),
    Capability.NATIVE_REQUEUE: (_N, "the local scheduler reruns nothing by itself"),
    Capability.NATIVE_RESTART: (_N, "the local scheduler restarts nothing by itself"),
    Capability.HOLD: (_Y, "a held object's runner waits before starting its ranks"),
    Capability.PRE_TERMINATION_SIGNAL: (_Y, "SIGTERM, then SIGKILL after the grace period"),
    Capability.ACCOUNTING_HISTORY: (_Y, "execution records stay in the state directory"),
    Capability.ATTEMPT_INJECTION: (_Y, "JOBDISPATCH_SUBMISSION and JOBDISPATCH_EXECUTION"),
    Capability.READMISSION_GATE: (_N, "a preempted object ends; it is never readmitted"),
    Capability.WORKING_DIRECTORY: (_Y, "the ranks' working directory"),
    Capability.PROCS_PER_NODE: (_Y, "N x P processes on this machine"),
    Capability.OUTPUT_PATH: (_Y, "rank files under <output>/<object>/"),
    Capability.OUTPUT_READ: (_Y, "rank-<r>.out and rank-<r>.err files"),
    Capability.OUTPUT_FOLLOW: (_Y, "the files are followed until the object ends"),
    Capability.OUTPUT_RETAINED: (_Y, "kept until the state directory is cleaned"),
}

_PERFORM: Mapping[Action, tuple[Tristate, str]] = {
    Action.RESUBMIT: (_Y, "a new object for the new submission"),
    Action.HOLD: (_Y, "a hold for a person, recorded"),
    Action.ESCALATE: (_Y, "recorded and delivered by the supervisor"),
    Action.REQUEUE: (_Y, "the runner reruns the object as its next execution"),
    Action.RESTART: (_N, "there is no restart in place; resubmit or requeue instead"),
}


class LocalBackend:
    """Real processes on this machine, one runner per opened object.

    Args:
        settings: the checked configuration (state directory, grace, memory limit, cgroups).
        clock: what call deadlines are judged by.
    """

    name = "local"

    def __init__(self, settings: Settings, *, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.clock = clock
        self.state_dir = settings.state_dir
        self.root = self.state_dir / "objects"
        self._memory: cgroups.MemoryControl | None = None
        self._lose_reply = False
        self.memory_detail = "no memory_limit is configured"
        if settings.memory_limit is not None:
            self._memory, self.memory_detail = cgroups.probe(settings.cgroups)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, clock: Clock = system_clock) -> LocalBackend:
        """Build from a configuration checked against :data:`CONFIG_SCHEMA`."""
        return cls(parse_config(config), clock=clock)

    def __repr__(self) -> str:
        return f"LocalBackend(state_dir={str(self.state_dir)!r})"

    # ------------------------------------------------------------------ answers

    def memory_support(self) -> Support:
        """Whether an execution over its memory limit is killed and reported out-of-memory.

        The contract has no capability of that name, so the CLI shows this beside the others
        and every rule naming out-of-memory carries it in its answer.
        """
        if self.settings.memory_limit is None:
            return Support.no(Source.PROBED, self.memory_detail)
        if self._memory is None:
            return Support.no(
                Source.PROBED, f"memory_limit cannot be enforced: {self.memory_detail}"
            )
        mib = self.settings.memory_limit // (1 << 20)
        return Support.yes(Source.PROBED, f"{mib} MiB per node through {self.memory_detail}")

    def capabilities(self, spec: JobSpec | None = None) -> Mapping[Capability, Support]:
        """The same answers for every spec: what a process on this machine can be given."""
        return {
            cap: Support(answer, Source.DECLARED, f"{_WHY}: {why}")
            for cap, (answer, why) in _CAPABILITIES.items()
        }

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> Sequence[RuleSupport]:
        """Nothing is enforced natively; the supervisor can have resubmit, requeue, hold and
        escalate performed. A rule naming out-of-memory says whether an OOM can be seen here."""
        out = []
        memory = self.memory_support()
        for rule in policy.rules:
            native = Support.no(Source.DECLARED, "the local scheduler reruns nothing by itself")
            answer, why = _PERFORM[rule.action]
            if CauseKind.OUT_OF_MEMORY in rule.on and memory.answer is not _Y:
                why = f"{why}; but out-of-memory is never reported here ({memory.detail})"
            out.append(RuleSupport(native=native, perform=Support(answer, Source.DECLARED, why)))
        return out

    # ------------------------------------------------------------------ plumbing

    def _dir(self, ref: ObjectRef) -> ObjectDir:
        """The object's directory; NotFound for a ref this machine never made."""
        name = ref.id
        if "/" in name or name.startswith(".") or parse_discovery_name(name) is None:
            msg = f"no object {ref} on the local scheduler ({self.state_dir})"
            raise NotFound(msg)
        obj = ObjectDir(self.root / name)
        if not obj.exists():
            msg = f"no object {ref} on the local scheduler ({self.state_dir})"
            raise NotFound(msg)
        return obj

    def _check_deadline(self, deadline: Any, what: str) -> None:
        now = self.clock()
        if now > deadline:
            msg = f"{what}: its deadline {deadline.isoformat()} passed (now {now.isoformat()})"
            raise Rejected(msg)

    def _resolve(self, path: str | None) -> str | None:
        """A spec path made absolute against the caller's directory, as sbatch does."""
        if path is None:
            return None
        return str(Path(path).expanduser().absolute())

    # ------------------------------------------------------------------ Backend

    def start(self, request: StartRequest) -> ObjectRef:
        """Create the object's directory, gate closed, durably; nothing runs until open.

        Raises:
            Unsupported: the spec asks for a container image.
            Rejected: an object of this name exists already.
            Unavailable: the state directory cannot be written.
        """
        spec = request.spec
        if spec.image is not None:
            msg = f"cannot start {request.name}: image: the local adapter runs no containers"
            raise Unsupported(msg)
        name = request.name
        final = self.root / name
        if final.exists():
            msg = f"an object named {name} exists already in {self.root}"
            raise Rejected(msg)
        working_dir = self._resolve(spec.working_dir)
        out_base = self._resolve(spec.output)
        record = {
            "format": FORMAT,
            "version": VERSION,
            "name": name,
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
                "working_dir": working_dir,
                "time_limit": spec.time_limit.total_seconds() if spec.time_limit else None,
            },
            "output_dir": str(Path(out_base) / name) if out_base else None,
            "grace": self.settings.grace,
            "poll": self.settings.poll,
            "memory_limit": self.settings.memory_limit,
            "cgroup": (
                {"version": self._memory.version, "parent": self._memory.parent}
                if self._memory is not None
                else None
            ),
        }
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".new-{name}-{os.getpid()}-{secrets.token_hex(3)}"
            tmp.mkdir()
            try:
                files.write_json(tmp / "control.json", empty_control(), sync_dir=False)
                files.write_json(tmp / "object.json", record, sync_dir=False)
                (tmp / "lock").touch()
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
        return ObjectRef(name)

    def open(self, ref: ObjectRef, meta: CallMeta | None = None) -> None:
        """Lift the gate: record it, then have a runner take the object. Idempotent; an object
        that ended (or was stopped) stays as it is. Rejected past ``meta.deadline``, judged
        once the object's lock is held: a wait for the lock is time the deadline counts."""
        obj = self._dir(ref)
        with obj.lock():
            if meta is not None:
                self._check_deadline(meta.deadline, f"open of {ref}")
            snap = Snapshot(obj, held=True)
            if snap.state is ObjectState.ENDED:
                return
            control = snap.control
            if not control.get("opened"):
                control["opened"] = True
                control["opened_at"] = now_iso()
                control["runs"] = max(int(control.get("runs") or 0), 1)
                obj.write_control(control)
        self._ensure_runner(obj)

    def find(self, job: JobID) -> Discovery:
        """Every object of the job, by discovery name, from one scan of the state directory."""
        objects = tuple(
            self._observe(obj) for obj in scan(self.state_dir, f"jd-{job}-") if _owner(obj) == job
        )
        return Discovery(job=job, objects=objects, at=self.clock())

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object now. NotFound for a ref this machine never made."""
        return self._observe(self._dir(ref))

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """Stop this object only. A running execution's ranks get SIGTERM, then SIGKILL after
        the grace period, and it ends ``cancelled``; a gated, pending or held object ends
        without running. Already ended, or unknown, is success. Returns once the end is
        recorded (or the grace period and some slack have passed)."""
        try:
            obj = self._dir(ref)
        except NotFound:
            return
        with obj.lock():
            snap = Snapshot(obj, held=True)
            if snap.state is ObjectState.ENDED:
                return
            control = snap.control
            if not control.get("stop"):
                control["stop"] = {"reason": reason, "at": now_iso()}
                obj.write_control(control)
        self._wait_ended(obj, self.settings.grace + STOP_SLACK)

    def close(self) -> None:
        """Nothing is held open between calls."""

    # ------------------------------------------------------------------ runners

    def _observe(self, obj: ObjectDir) -> ObjectObs:
        return observe(snapshot(obj))

    def _wait_ended(self, obj: ObjectDir, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            snap = snapshot(obj)
            if snap.state is not ObjectState.RUNNING:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(min(0.05, self.settings.poll))

    def _ensure_runner(self, obj: ObjectDir) -> None:
        """Have a live runner serve the object when it has runs left to make; spawn one when
        none is alive, and wait until it has taken the object."""
        with obj.lock():
            snap = Snapshot(obj, held=True)
            if snap.runner_alive or snap.control.get("stop"):
                return
            if len(snap.executions) >= int(snap.control.get("runs") or 0):
                return
            before = snap.runner
            _spawn(obj)
        deadline = time.monotonic() + RUNNER_ACK_TIMEOUT
        while time.monotonic() < deadline:
            now = obj.read_runner()
            if now is not None and now != before:
                return  # a new runner took the object (and may be done with it already)
            time.sleep(0.01)
        # Left gated or pending: a later open, release or requeue tries again.

    # ------------------------------------------------------------------ Holder

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Place hold ``meta.instance`` on a gated, pending or held object (replacing the
        instance standing). Rejected when it runs or has ended, or past ``meta.deadline``."""
        self._check_deadline(meta.deadline, f"hold {meta.instance} of {ref}")
        obj = self._dir(ref)
        with obj.lock():
            snap = Snapshot(obj, held=True)
            if snap.state not in (ObjectState.GATED, ObjectState.PENDING, ObjectState.HELD):
                msg = f"cannot hold object {ref}: it is {snap.state}"
                raise Rejected(msg)
            control = snap.control
            if control.get("hold") == meta.instance:
                return
            control["hold"] = meta.instance
            control["hold_by"] = str(meta.by) if meta.by else None
            obj.write_control(control)

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Lift the hold only if ``meta.instance`` is the one standing; another instance is a
        success with no effect. Rejected past ``meta.deadline``."""
        self._check_deadline(meta.deadline, f"release {meta.instance} of {ref}")
        obj = self._dir(ref)
        with obj.lock():
            control = obj.read_control()
            if control.get("hold") != meta.instance:
                return
            control["hold"] = None
            control["hold_by"] = None
            obj.write_control(control)
            opened = bool(control.get("opened"))
        if opened:
            self._ensure_runner(obj)

    # ------------------------------------------------------------------ Requeuer

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Rerun the object as its next execution: a running execution ends ``requeued``
        (provenance actor) first; an ended object goes back to pending. A gated, pending or
        held object has nothing to requeue: success with no effect."""
        self._check_deadline(meta.deadline, f"requeue of {ref}")
        obj = self._dir(ref)
        with obj.lock():
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
            elif snap.state is ObjectState.ENDED and not snap.orphaned:
                control["runs"] = len(snap.executions) + 1
                control["stop"] = None
            else:
                return
            obj.write_control(control)
        self._ensure_runner(obj)

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """The local scheduler has no requeue bit (it never requeues by itself): nothing to
        restore. NotFound for an unknown ref, Rejected past the deadline, like every call."""
        self._check_deadline(meta.deadline, f"restore of the requeue bit of {ref}")
        self._dir(ref)

    # ------------------------------------------------------------------ MultiFinder

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> Mapping[JobID, Discovery]:
        """One scan of the state directory for many jobs; with ``states``, only those."""
        wanted = set(jobs)
        keep = set(states)
        found: dict[JobID, list[ObjectObs]] = {job: [] for job in jobs}
        for obj in scan(self.state_dir):
            job = _owner(obj)
            if job not in wanted:
                continue
            obs = self._observe(obj)
            if keep and obs.state not in keep:
                continue
            found[job].append(obs)
        at = self.clock()
        return {job: Discovery(job=job, objects=tuple(objs), at=at) for job, objs in found.items()}

    # ------------------------------------------------------------------ CessationSignal

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        """Yes when neither the runner nor any rank the records name is alive."""
        snap = snapshot(self._dir(ref))
        alive = [
            r["rank"]
            for e in snap.executions
            for r in e.get("ranks", [])
            if procs.alive(r.get("process"))
        ]
        if snap.runner_alive or alive:
            what = f"ranks {alive}" if alive else "its runner"
            return CessationEvidence(ceased=Tristate.NO, detail=f"{what} alive", at=self.clock())
        return CessationEvidence(
            ceased=Tristate.YES, detail="no recorded process is alive", at=self.clock()
        )

    # ------------------------------------------------------------------ IdentityWeakener

    def identity_weakened(self, spec: JobSpec) -> str:
        """Never: the runner never reruns a rank in place; a rerun is a new execution."""
        return ""

    # ------------------------------------------------------------------ OutputReader

    def output(
        self, ref: ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
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
        return output.follow(path, lambda: snapshot(obj).state is ObjectState.ENDED)

    # ------------------------------------------------------------------ the environment

    def preempt(self, ref: ObjectRef, *, by: Actor | None = None, wait: bool = True) -> None:
        """Preempt the running execution as a scheduler does: SIGTERM, SIGKILL after the grace
        period, cause ``preempted`` (provenance scheduler). ``jobdispatch local preempt``.

        Raises:
            NotFound: no such object.
            Invalid: it is not running.
        """
        obj = self._dir(ref)
        with obj.lock():
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

    def set_time_limit(self, ref: ObjectRef, seconds: float) -> None:
        """Change the object's time limit, counted from the start of each execution (as
        ``scontrol update TimeLimit=``): an execution already past it ends ``time-limit``."""
        if seconds <= 0:
            msg = f"a time limit must be positive, got {seconds}"
            raise Invalid(msg)
        obj = self._dir(ref)
        with obj.lock():
            control = obj.read_control()
            control["time_limit"] = float(seconds)
            obj.write_control(control)

    def lose_next_start_reply(self) -> None:
        """Make this backend's next Start create its object, then raise OutcomeUnknown, as a
        reply lost on the way would (for tests of what callers do then)."""
        self._lose_reply = True

    def objects(self) -> list[ObjectObs]:
        """Every object on this machine, of every job (for ``jobdispatch local ps``)."""
        return [self._observe(obj) for obj in scan(self.state_dir)]

    def object_dir(self, ref: ObjectRef) -> Path:
        """Where the object's records and output live."""
        return self._dir(ref).path

    def kill_runner(self, ref: ObjectRef) -> bool:
        """SIGKILL the object's runner (tests: a runner that dies loses nothing recorded)."""
        runner = self._dir(ref).read_runner()
        if not procs.alive(runner):
            return False
        assert runner is not None
        os.kill(int(runner["pid"]), signal.SIGKILL)
        return True

    def reconcile(self, ref: ObjectRef) -> None:
        """Record any end a dead runner left unrecorded."""
        reconcile(self._dir(ref))


def _owner(obj: ObjectDir) -> JobID | None:
    identity = parse_discovery_name(obj.name)
    return identity[0] if identity else None


def _spawn(obj: ObjectDir) -> None:
    """Start a runner for ``obj`` in a new session; it detaches at once (see the runner)."""
    with obj.log_file.open("ab") as log:
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
