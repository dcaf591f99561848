"""Helpers for tests against a real Slurm cluster: is it up, a transport that loses replies,
and the conformance suite's environment driver, which makes the cluster do real things
(preempt through the ``high`` partition, set a node DOWN and back, shorten a time limit).

Importing this module imports ``jobdispatch_conformance`` (and its helpers call pytest), so it
needs the ``testing`` extra: ``pip install jobdispatch-slurm[testing]``; nothing in the adapter
itself imports it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import DispatchError
from jobdispatch.records.store import Records
from jobdispatch.spi import Backend, ObjectObs, ObjectRef, StartRequest
from jobdispatch.testing import eventually
from jobdispatch.types import JobSpec, ObjectState, Resources
from jobdispatch_conformance.adapter.driver import CannotDrive, Driver
from jobdispatch_conformance.services import require_service as require

from jobdispatch_slurm.backend import SlurmBackend
from jobdispatch_slurm.config import Settings, SshSettings
from jobdispatch_slurm.transport import Interrupted, Result, SshTransport, Transport

__all__ = [
    "CONTROL_DIR",
    "SCHEDULER_COMMANDS",
    "CliPolls",
    "CountingShims",
    "LossyTransport",
    "SchedulerCall",
    "SlurmDriver",
    "cluster_problem",
    "count_cli_polls",
    "require",
    "resume_nodes",
    "run_to_end",
    "ssh_problem",
    "ssh_settings",
    "ssh_transport",
]

#: Where the driver leaves commands for the jobs it controls (all nodes share this host's /tmp).
CONTROL_DIR = Path(os.environ.get("JOBDISPATCH_SLURM_CONTROL", "/tmp/jobdispatch-slurm-control"))  # noqa: S108
#: The reason a downed node carries, so cleanup resumes only the nodes tests took down.
DOWN_REASON = "jobdispatch-test"
PREEMPTOR = "jdt-preemptor"
_ENV = {**os.environ, "TZ": "UTC"}


#: Every Slurm program the adapter runs: what a poll, a launch or a stop costs the scheduler.
SCHEDULER_COMMANDS = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo")


@attrs.frozen
class SchedulerCall:
    """One run of a Slurm program, as a counting shim logged it."""

    at: float
    command: str
    args: str


class CountingShims:
    """Wrapper scripts named like Slurm's programs, each logging its call (the time, the program
    and its arguments, one line appended to one log) and then running the real program, so
    any process with ``env()``'s PATH (the ``jobdispatch`` command included) is counted
    without a change to it: what an operator would see on the cluster's side.

    Raises RuntimeError when a program is not on this PATH.
    """

    def __init__(self, directory: Path, commands: Sequence[str] = SCHEDULER_COMMANDS) -> None:
        self.directory = directory
        self.log = directory / "calls.log"
        directory.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        for name in commands:
            real = shutil.which(name)
            if real is None:
                msg = f"{name} is not on the PATH: no shim can stand in front of it"
                raise RuntimeError(msg)
            shim = directory / name
            log = shlex.quote(str(self.log))
            shim.write_text(
                "#!/bin/sh\n"
                f'printf \'%s %s %s\\n\' "$(date +%s.%N)" {name} "$*" >> {log}\n'
                f'exec {shlex.quote(real)} "$@"\n'
            )
            shim.chmod(0o755)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (this process's environment by default) with the shims first on PATH."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.directory}{os.pathsep}{env.get('PATH', '')}"
        return env

    def calls(self) -> list[SchedulerCall]:
        """Every call logged so far, oldest first."""
        out = []
        for line in self.log.read_text().splitlines():
            at, _, rest = line.partition(" ")
            command, _, args = rest.partition(" ")
            out.append(SchedulerCall(float(at), command, args))
        return sorted(out, key=lambda c: c.at)

    @staticmethod
    def bursts(calls: Sequence[SchedulerCall], gap: float) -> list[list[SchedulerCall]]:
        """``calls`` cut wherever two follow each other more than ``gap`` seconds apart: with a
        poll floor above ``gap``, each burst of a quiet supervisor is one poll."""
        out: list[list[SchedulerCall]] = []
        for call in calls:
            if out and call.at - out[-1][-1].at <= gap:
                out[-1].append(call)
            else:
                out.append([call])
        return out


@attrs.frozen
class CliPolls:
    """What ``jobdispatch supervise`` cost the scheduler, serving ``jobs`` jobs.

    ``launch`` counts every call until every job was launched (submitted and its gate opened);
    ``steady`` holds every call after that, while nothing changed but time; ``bursts`` cuts
    them into polls where they are more than ``gap`` seconds apart (informative: the floor
    keeps polls further apart than that)."""

    jobs: tuple[str, ...]
    floor: float
    launch: dict[str, int]
    steady: tuple[SchedulerCall, ...]
    bursts: tuple[tuple[SchedulerCall, ...], ...]

    @property
    def window(self) -> float:
        """Seconds from the first steady call to the last."""
        return self.steady[-1].at - self.steady[0].at if self.steady else 0.0

    @property
    def most_allowed(self) -> int:
        """Two commands per poll, with polls at least ``floor`` apart: the most the window can
        hold from a supervisor that spares the scheduler, whatever the number of jobs (with
        one poll to spare: the shims' clocks are read by processes that may start late)."""
        return 2 * (int(self.window / self.floor) + 2)

    @property
    def per_minute(self) -> float:
        return 60.0 * (len(self.steady) - 1) / self.window if self.window else 0.0


def count_cli_polls(
    jobs: int,
    root: Path,
    open_store: Callable[[Path], Records],
    *,
    poll: float | None,
    polls: int = 6,
    timeout: float = 300.0,
    command: Sequence[str] = ("jobdispatch",),
) -> CliPolls:
    """Serve ``jobs`` gated-then-opened jobs (each ``sleep 600``) with ``jobdispatch
    supervise --poll POLL`` (None: the adapter's pacing), Slurm's programs behind
    :class:`CountingShims`, until ``polls`` quiet polls were seen (or ``timeout``), then
    cancel everything.

    The jobs are submitted from this process on the real cluster (uncounted: submitting is not
    supervising), into the command's store under ``root``, which ``open_store`` opens here (the
    LMDB store, ``jobdispatch_records_lmdb.LmdbRecords``, which this package does not depend
    on); so this needs jobdispatch-cli installed, and the cluster from tools/slurm/up.
    """
    import jobdispatch
    from jobdispatch.records import events as ev
    from jobdispatch.types import Actor, ObjectState

    shims = CountingShims(root / "shims")
    store_dir = root / "records"
    config = root / "config.toml"
    config.write_text('default_cluster = "hpc"\n[clusters.hpc]\nadapter = "slurm"\n')
    backend = SlurmBackend(Settings())
    store = open_store(store_dir)
    cluster = jobdispatch.compose(backend, store=store)
    by = Actor.human("poll-count")
    ids: list[str] = []
    for i in range(jobs):
        spec = JobSpec(name=f"polls-{i}", command=("sleep", "600"))
        plan = cluster.operator.submit(spec, by=by, supervised=True)
        assert plan.job is not None  # a supervised submit always records a job
        ids.append(plan.job)
    env = shims.env({k: v for k, v in os.environ.items() if not k.startswith("JOBDISPATCH_")})
    env.update(JOBDISPATCH_CONFIG=str(config), XDG_STATE_HOME=str(root / "state"))
    argv = [*command, "--store", str(store_dir), "supervise"]
    if poll is not None:
        argv += ["--poll", str(poll)]
    with (root / "supervise.log").open("ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    started = (ObjectState.PENDING, ObjectState.RUNNING)

    def launched(job: str) -> bool:
        return any(
            isinstance(e, ev.Observed) and e.obs.state in started for e in store.read(job).events
        )

    try:
        deadline = time.monotonic() + timeout
        waiting = list(ids)
        while waiting:
            if proc.poll() is not None or time.monotonic() > deadline:
                msg = f"{len(waiting)} of {jobs} jobs never launched; see {root}/supervise.log"
                raise AssertionError(msg)
            waiting = [j for j in waiting if not launched(j)]
            time.sleep(0.2)
        steady_from = time.time()
        launch = len(shims.calls())
        while True:
            steady = [c for c in shims.calls() if c.at > steady_from]
            if sum(c.command == "sacct" for c in steady) >= polls:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                msg = f"only {len(steady)} calls after launching; see {root}/supervise.log"
                raise AssertionError(msg)
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        for job in ids:
            with contextlib.suppress(DispatchError):
                cluster.operator.cancel(job, by=by, reason="poll count done")
        cluster.close()
        store.close()
    counts: dict[str, int] = {}
    for c in shims.calls()[:launch]:
        counts[c.command] = counts.get(c.command, 0) + 1
    floor = max(poll or 0.0, backend.pacing.floor)
    return CliPolls(
        jobs=tuple(ids),
        floor=floor,
        launch=counts,
        steady=tuple(steady),
        bursts=tuple(tuple(b) for b in CountingShims.bursts(steady, gap=floor / 2)),
    )


def _run(argv: Sequence[str], timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, env=_ENV, check=False
    )


def cluster_problem() -> str | None:
    """Why the real cluster cannot be used, or None when it is up (both nodes answer and sacct
    answers)."""
    if shutil.which("sinfo") is None:
        return "Slurm's commands are not installed (tools/slurm/up installs them)"
    try:
        nodes = _run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        acct = _run(["sacct", "-n", "-X", "-S", "now", "-E", "now"], timeout=10)
    except subprocess.TimeoutExpired:
        return "the Slurm cluster does not answer within 10 s"
    if nodes.returncode != 0:
        return f"sinfo failed: {nodes.stderr.strip()} (start it with tools/slurm/up)"
    if acct.returncode != 0:
        return f"sacct failed: {acct.stderr.strip()}"
    states = dict(line.split() for line in nodes.stdout.splitlines() if line.strip())
    if len(states) < 2:
        return f"the test cluster needs 2 nodes; sinfo shows {states}"
    return None


def ssh_transport(ssh: SshSettings, known_hosts: str | None = None, **options: Any) -> SshTransport:
    """A transport to the sshd ``ssh`` describes (the loopback one: :func:`ssh_settings`),
    trusting its own known_hosts unless told otherwise; ``options`` go to the transport."""
    return SshTransport(
        host=ssh.host,
        port=ssh.port,
        user=ssh.user,
        key_filename=ssh.key_file,
        known_hosts=known_hosts or ssh.known_hosts,
        **options,
    )


def ssh_settings() -> SshSettings | None:
    """The loopback sshd's settings from ``tools/ssh/up``'s exports, or None."""
    host = os.environ.get("JOBDISPATCH_SSH_HOST")
    if not host:
        key = Path("/var/lib/jobdispatch-ssh/client_ed25519")
        if not key.exists():
            return None
        return SshSettings(
            host="127.0.0.1",
            port=2222,
            user="root",
            key_file=str(key),
            known_hosts=str(key.parent / "known_hosts"),
        )
    return SshSettings(
        host=host,
        port=int(os.environ.get("JOBDISPATCH_SSH_PORT", "22")),
        user=os.environ.get("JOBDISPATCH_SSH_USER", "root"),
        key_file=os.environ.get("JOBDISPATCH_SSH_KEY"),
        known_hosts=os.environ.get("JOBDISPATCH_SSH_KNOWN_HOSTS"),
    )


def ssh_problem() -> str | None:
    """Why the loopback sshd cannot be used, or None."""
    settings = ssh_settings()
    if settings is None:
        return "no sshd settings (run tools/ssh/up and export its lines)"
    import socket

    try:
        with socket.create_connection((settings.host, settings.port), timeout=3):
            return None
    except OSError as exc:
        return f"sshd at {settings.host}:{settings.port} does not answer: {exc}"


def resume_nodes() -> list[str]:
    """Resume every node a test set DOWN (by its reason); the nodes resumed."""
    out = _run(["sinfo", "-h", "-N", "-R", "-o", "%N|%E"])
    resumed = []
    for line in out.stdout.splitlines():
        node, _, reason = line.partition("|")
        if reason.strip() == DOWN_REASON:
            _run(["scontrol", "update", f"NodeName={node.strip()}", "State=RESUME"])
            resumed.append(node.strip())
    return resumed


def cancel_helpers() -> None:
    """Cancel the preemptor jobs the driver submitted."""
    _run(["scancel", "-n", PREEMPTOR])


class LossyTransport:
    """A transport that, when armed, runs the next sbatch and then loses its reply; and that
    remembers each sbatch it ran (its arguments and the script on its standard input), for the
    dry-run check."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.where = inner.where
        self.armed = 0
        self._lock = threading.Lock()
        #: job id → (the sbatch arguments after the program, the script sent on stdin)
        self.submitted: dict[str, tuple[tuple[str, ...], str]] = {}

    def arm(self) -> None:
        with self._lock:
            self.armed += 1

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        result = self.inner.run(argv, timeout=timeout, stdin=stdin)
        if os.path.basename(argv[0]) == "sbatch":
            job_id = result.stdout.strip().split(";")[0] if result.ok else ""
            with self._lock:
                if job_id:
                    self.submitted[job_id] = (tuple(argv[1:]), (stdin or b"").decode())
                if self.armed:
                    self.armed -= 1
                    msg = "sbatch ran, and the test dropped its reply"
                    raise Interrupted(msg)
        return result

    def close(self) -> None:
        self.inner.close()


#: The job every conformance check runs: it waits for the driver's commands (exit with a code,
#: run out of memory, print something) and otherwise sleeps.
CONTROL_SCRIPT = r"""
c="$1/$SLURM_JOB_ID"
while :; do
  if [ -e "$c.emit" ]; then cat -- "$c.emit"; rm -f -- "$c.emit"; fi
  if [ -e "$c.cmd" ]; then
    read -r what arg < "$c.cmd"; rm -f -- "$c.cmd"
    case "$what" in
      exit) exit "$arg" ;;
      oom) exec python3 -c 'b = []
while True: b.append(bytearray(64 << 20))' ;;
    esac
  fi
  sleep 0.2
done
"""


class SlurmDriver(Driver):
    """Makes the real cluster end executions the way it would by itself."""

    def __init__(self, backend: Backend, *, settle: float = 120.0) -> None:
        if not isinstance(backend, SlurmBackend):
            raise CannotDrive("anything", f"{backend!r} is not a Slurm backend")
        self.backend = backend
        self.settle = settle
        self.downed: list[str] = []
        CONTROL_DIR.mkdir(parents=True, exist_ok=True)
        CONTROL_DIR.chmod(0o777)

    def base_spec(self) -> JobSpec:
        from datetime import timedelta

        return JobSpec(
            command=("bash", "-c", CONTROL_SCRIPT, "control", str(CONTROL_DIR)),
            nodes=1,
            time_limit=timedelta(minutes=10),
        )

    def unknown_ref(self) -> ObjectRef:
        return ObjectRef("999999999")

    def missing_program(self) -> JobSpec:
        return self.spec_without_program()

    # ------------------------------------------------------------------ helpers

    def _nodes(self, ref: ObjectRef) -> tuple[str, ...]:
        obs = self.backend.inspect(ref)
        latest = obs.latest
        if latest is None or not latest.nodes:
            raise CannotDrive("this", f"{ref} is not running on a node ({obs.state})")
        return latest.nodes

    def _command(self, ref: ObjectRef, line: str) -> None:
        path = CONTROL_DIR / f"{ref.id}.cmd"
        tmp = CONTROL_DIR / f".{ref.id}.cmd.tmp"
        tmp.write_text(line + "\n")
        tmp.replace(path)

    def _state(self, ref: ObjectRef) -> tuple[str, str]:
        out = _run(["squeue", "-h", "-t", "all", "-j", ref.id, "-o", "%T|%N"])
        state, _, nodes = out.stdout.strip().partition("|")
        return state, nodes

    # ------------------------------------------------------------------ endings

    def preempt(self, ref: ObjectRef) -> None:
        """A job in the ``high`` partition that needs the victim's whole node."""
        node = self._nodes(ref)[0]
        out = _run(
            [
                "sbatch",
                "--parsable",
                "-p",
                "high",
                "-w",
                node,
                "--exclusive",
                "-J",
                PREEMPTOR,
                "-o",
                "/dev/null",
                "-t",
                "2",
                "--wrap",
                "sleep 2",
            ]
        )
        if out.returncode != 0:
            raise CannotDrive("preempt", out.stderr.strip())

    def lose_node(self, ref: ObjectRef) -> None:
        """Set the victim's node DOWN, wait until the job has left it, and resume it."""
        node = self._nodes(ref)[0]
        _run(["scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={DOWN_REASON}"])
        self.downed.append(node)
        deadline = time.monotonic() + self.settle
        try:
            while time.monotonic() < deadline:
                state, nodes = self._state(ref)
                if state != "RUNNING" or node not in nodes:
                    break
                time.sleep(0.3)
        finally:
            self.restore()

    def restore(self) -> None:
        for node in self.downed:
            _run(["scontrol", "update", f"NodeName={node}", "State=RESUME"])
        self.downed.clear()

    def time_out(self, ref: ObjectRef) -> None:
        """Shorten the limit to one minute: Slurm ends the job within its ~30 s check cycle
        after that (0007 §7), so this takes 60 to 100 s."""
        out = _run(["scontrol", "update", f"JobId={ref.id}", "TimeLimit=1"])
        if out.returncode != 0:
            raise CannotDrive("time_out", out.stderr.strip())

    def oom(self, ref: ObjectRef) -> None:
        self._command(ref, "oom")

    def fail(self, ref: ObjectRef, code: int) -> None:
        self._command(ref, f"exit {code}")

    def complete(self, ref: ObjectRef) -> None:
        self._command(ref, "exit 0")

    # ------------------------------------------------------------------ faults and settings

    def lose_next_start_reply(self) -> None:
        transport = self.backend.transport
        if not isinstance(transport, LossyTransport):
            raise CannotDrive("lose_next_start_reply", "the backend has no LossyTransport")
        transport.arm()

    def created(self, ref: ObjectRef) -> str:
        """The sbatch command line that Start ran, then the batch script slurmctld stored."""
        transport = self.backend.transport
        if not isinstance(transport, LossyTransport) or ref.id not in transport.submitted:
            raise CannotDrive("created", "the backend's transport did not record this sbatch")
        options, _sent = transport.submitted[ref.id]
        stored = self.backend.slurm.batch_script(ref.id)
        if stored is None:
            raise CannotDrive("created", f"slurmctld no longer has the script of {ref}")
        return "$ " + shlex.join(["sbatch", *options]) + "\n" + stored

    def resource_spec(self) -> JobSpec:
        """Both GPUs of a node, some memory, the nvme feature and the debug partition: what
        tools/slurm/up gives node1."""
        return attrs.evolve(
            self.base_spec(),
            resources=Resources(
                gpus_per_node=2,
                gpu_type="tesla",
                memory_per_node_mib=256,
                queue="debug",
                constraints=("nvme",),
                adapter={"slurm": {"nice": 10}},
            ),
        )

    def set_requeue_bit(self, ref: ObjectRef) -> None:
        out = _run(["scontrol", "update", f"JobId={ref.id}", "Requeue=1"])
        if out.returncode != 0:
            raise CannotDrive("set_requeue_bit", out.stderr.strip())

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        """Hand ``data`` to the job, which copies it to its standard output; wait until it
        has."""
        if stream != "stdout" or rank != 0:
            raise CannotDrive("emit_output", "the control job writes rank 0's stdout only")
        path = CONTROL_DIR / f"{ref.id}.emit"
        tmp = CONTROL_DIR / f".{ref.id}.emit.tmp"
        tmp.write_bytes(data)
        tmp.replace(path)
        deadline = time.monotonic() + self.settle
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)

    def unreachable_backend(self) -> Backend:
        """SSH to a port nothing listens on."""
        return SlurmBackend(
            Settings(
                transport="ssh",
                ssh=SshSettings(host="127.0.0.1", port=1, user="nobody", connect_timeout=3),
            )
        )

    def unauthorized_backend(self) -> Backend:
        """The loopback sshd with a key it has never seen."""
        settings = ssh_settings()
        if settings is None or ssh_problem() is not None:
            raise CannotDrive("unauthorized_backend", ssh_problem() or "no sshd")
        key_dir = tempfile.mkdtemp(prefix="jd-wrong-key-")
        key_file = os.path.join(key_dir, "id_ed25519")
        made = _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key_file])
        if made.returncode != 0:
            raise CannotDrive("unauthorized_backend", f"ssh-keygen failed: {made.stderr}")
        return SlurmBackend(
            Settings(
                transport="ssh",
                ssh=SshSettings(
                    host=settings.host,
                    port=settings.port,
                    user=settings.user,
                    key_file=key_file,
                    known_hosts=settings.known_hosts,
                ),
            )
        )

    def cleanup(self) -> None:
        self.restore()
        cancel_helpers()


def run_to_end(
    backend: SlurmBackend, spec: JobSpec, started: list[ObjectRef]
) -> tuple[ObjectRef, ObjectObs]:
    """Start and open one object of ``spec`` under a fresh job name, noting it in ``started``
    (for :func:`stop_quietly` at teardown); its observation once it has ended."""
    job = "jdt" + uuid.uuid4().hex[:10]
    ref = backend.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    started.append(ref)
    backend.open(ref)
    obs = eventually(
        lambda: backend.inspect(ref),
        f"{ref} ended",
        holds=lambda o: o.state is ObjectState.ENDED,
        every=0.5,
    )
    return ref, obs


def stop_quietly(backend: SlurmBackend, refs: Sequence[ObjectRef]) -> None:
    """Cancel ``refs``, ignoring errors: for test teardown."""
    for ref in refs:
        with contextlib.suppress(DispatchError):
            backend.stop(ref, "test teardown")
