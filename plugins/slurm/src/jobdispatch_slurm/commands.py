"""Slurm's commands as methods: the argument lists the adapter runs and what their failures mean.

Each method builds one argument list, runs it through the transport with a timeout, and turns
the outcome into values or into dispatch's errors. Which failure is which was read off the
real cluster (0007): ``scancel`` of an unknown id exits 0; ``squeue -j`` of one unknown id
exits 1 with ``Invalid job id specified``; ``scontrol update`` explains itself on stderr.
A command that changes something and whose reply is lost raises OutcomeUnknown; a query that
fails raises Unreachable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime

from jobdispatch.errors import OutcomeUnknown, Rejected, Unauthorized, Unreachable

from jobdispatch_slurm.holds import slurm_time
from jobdispatch_slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    SacctRow,
    SqueueRow,
    parse_key_values,
    parse_sacct,
    parse_squeue,
)
from jobdispatch_slurm.transport import Interrupted, Result, Transport

__all__ = ["SACCT_END", "Slurm"]

#: sacct leaves out jobs whose begin time lies beyond ``-E``; gated jobs begin in 2099 (0007 §9).
SACCT_END = "3000-01-01T00:00:00"

#: stderr of a client that never reached slurmctld or slurmdbd: nothing was done.
_NOT_CONNECTED = re.compile(
    r"Unable to contact slurm controller|Connection refused|connect failure|"
    r"Unable to establish|slurmdbd: Connection|Problem talking to the database|"
    r"Communication connection failure|No route to host",
    re.IGNORECASE,
)
#: stderr of a client that sent its request and lost the reply: it may have been done.
_REPLY_LOST = re.compile(
    r"Socket timed out|Zero Bytes were transmitted|Connection timed out|"
    r"Transport endpoint is not connected",
    re.IGNORECASE,
)
_DENIED = re.compile(r"Access/permission denied|Invalid user|not authorized", re.IGNORECASE)
_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")


class Slurm:
    """The commands of one cluster, run through ``transport``.

    Args:
        transport: where commands run.
        bin_dir: where Slurm's programs are, when they are not on the PATH.
        timeout: seconds a command may take before its reply counts as lost.
    """

    def __init__(
        self, transport: Transport, *, bin_dir: str | None = None, timeout: float = 30.0
    ) -> None:
        self.transport = transport
        self.bin_dir = bin_dir
        self.timeout = timeout

    def _exe(self, name: str) -> str:
        return os.path.join(self.bin_dir, name) if self.bin_dir else name

    def run(
        self,
        argv: Sequence[str],
        *,
        mutating: bool,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> Result:
        """Run ``argv`` and map transport and connection failures to dispatch's errors; any
        other non-zero exit is returned for the caller to read."""
        what = " ".join(argv[:2])
        try:
            result = self.transport.run(argv, timeout=timeout or self.timeout, stdin=stdin)
        except Interrupted as exc:
            if mutating:
                msg = f"{what}: {exc}; it may have taken effect"
                raise OutcomeUnknown(msg) from exc
            raise Unreachable(f"{what}: {exc}") from exc
        if result.ok:
            return result
        err = result.stderr.strip()
        if _DENIED.search(err):
            raise Unauthorized(f"{what} on {self.transport.where}: {err}")
        if _REPLY_LOST.search(err):
            if mutating:
                msg = f"{what}: {err}; it may have taken effect"
                raise OutcomeUnknown(msg)
            raise Unreachable(f"{what} on {self.transport.where}: {err}")
        if _NOT_CONNECTED.search(err) or result.returncode in (126, 127):
            raise Unreachable(
                f"{what} on {self.transport.where}: {err or 'exit ' + str(result.returncode)}"
            )
        return result

    # ------------------------------------------------------------------ submit and control

    def sbatch(self, options: Sequence[str], script: str) -> str:
        """Submit; the job id. Rejected when sbatch refuses (a bad partition, too much memory);
        OutcomeUnknown when its reply was lost or unreadable."""
        result = self.run(
            [self._exe("sbatch"), *options], mutating=True, stdin=script.encode("utf-8")
        )
        if not result.ok:
            msg = f"sbatch refused the job: {result.stderr.strip() or result.returncode}"
            raise Rejected(msg)
        line = result.stdout.strip().splitlines()[-1:] or [""]
        m = _JOB_ID.match(line[0].strip())
        if m is None:
            msg = f"sbatch printed no job id ({result.stdout!r}); the job may exist"
            raise OutcomeUnknown(msg)
        return m[1]

    def update(self, job_id: str, **settings: str) -> Result:
        """``scontrol update JobId=N Key=value...``; the result is the caller's to read."""
        words = [f"{k}={v}" for k, v in settings.items()]
        return self.run([self._exe("scontrol"), "update", f"JobId={job_id}", *words], mutating=True)

    def requeue(self, job_id: str) -> Result:
        return self.run([self._exe("scontrol"), "requeue", job_id], mutating=True)

    def cancel(self, job_id: str) -> None:
        """``scancel N``. Its exit status says nothing (0 even for unknown ids, 0007 §9): callers
        verify by looking."""
        self.run([self._exe("scancel"), job_id], mutating=True)

    # ------------------------------------------------------------------ queries

    def squeue(
        self,
        *,
        user: str | None = None,
        job_id: str | None = None,
        keep: Callable[[str], bool] | None = None,
    ) -> list[SqueueRow]:
        """Jobs slurmctld still knows (live, and ended within MinJobAge), of ``user`` or the one
        ``job_id``. An unknown single id is an empty list, not an error."""
        fmt = ",".join(f"{f}:|" for f in SQUEUE_FIELDS)
        argv = [self._exe("squeue"), "-h", "-t", "all", "-O", fmt]
        if user:
            argv += ["-u", user]
        if job_id:
            argv += ["-j", job_id]
        result = self.run(argv, mutating=False)
        if not result.ok:
            if "Invalid job id" in result.stderr:
                return []
            raise Unreachable(f"squeue on {self.transport.where}: {result.stderr.strip()}")
        return parse_squeue(result.stdout, keep=keep)

    def sacct(
        self,
        *,
        user: str | None = None,
        since: datetime | None = None,
        job_id: str | None = None,
        allocations_only: bool = True,
        keep: Callable[[str], bool] | None = None,
    ) -> list[SacctRow]:
        """Accounting records, every requeued run included (``-D``). By ``user`` over
        ``since``..3000-01-01, or of one ``job_id`` (any time). Unreachable when sacct fails."""
        argv = [self._exe("sacct"), "-n", "-P", "-D", "-o", ",".join(SACCT_FIELDS)]
        if allocations_only:
            argv.append("-X")
        if job_id:
            argv += ["-j", job_id]
        else:
            if user:
                argv += ["-u", user]
            else:
                argv.append("-a")
            if since is not None:
                argv += ["-S", slurm_time(since)]
            argv += ["-E", SACCT_END]
        result = self.run(argv, mutating=False)
        if not result.ok:
            raise Unreachable(f"sacct on {self.transport.where}: {result.stderr.strip()}")
        return parse_sacct(result.stdout, keep=keep)

    def show(self, what: str, name: str | None = None) -> dict[str, str] | None:
        """``scontrol show config`` / ``-o show partition NAME`` / ``-o show job N`` as a dict;
        None when the named thing does not exist."""
        argv = [self._exe("scontrol")]
        argv += ["show", what] if what == "config" else ["-o", "show", what]
        if name:
            argv.append(name)
        result = self.run(argv, mutating=False)
        if not result.ok:
            if re.search(r"Invalid (job id|partition)|not found", result.stderr):
                return None
            raise Unreachable(f"scontrol show {what} on {self.transport.where}: {result.stderr}")
        return parse_key_values(result.stdout)

    def partitions(self) -> list[dict[str, str]]:
        """Every partition, one dict each (``scontrol -o show partition``)."""
        result = self.run([self._exe("scontrol"), "-o", "show", "partition"], mutating=False)
        if not result.ok:
            raise Unreachable(f"scontrol show partition: {result.stderr.strip()}")
        return [parse_key_values(line) for line in result.stdout.splitlines() if line.strip()]

    def nodes(self) -> list[dict[str, str]]:
        """Every node, one dict each (``scontrol -o show node``): CPUs, memory, Gres, features,
        partitions, for the cluster's inventory."""
        result = self.run([self._exe("scontrol"), "-o", "show", "node"], mutating=False)
        if not result.ok:
            raise Unreachable(f"scontrol show node: {result.stderr.strip()}")
        return [parse_key_values(line) for line in result.stdout.splitlines() if line.strip()]

    def batch_script(self, job_id: str) -> str | None:
        """The batch script slurmctld stored for a job (``scontrol write batch_script N -``);
        None once the job is gone from slurmctld."""
        argv = [self._exe("scontrol"), "write", "batch_script", job_id, "-"]
        result = self.run(argv, mutating=False)
        return result.stdout if result.ok else None

    def sacct_answers(self) -> tuple[bool, str]:
        """Whether sacct answers at all (slurmdbd up), and what it said when it did not."""
        argv = [self._exe("sacct"), "-n", "-P", "-X", "-S", "now", "-E", "now", "-o", "JobID"]
        try:
            result = self.run(argv, mutating=False)
        except Unreachable as exc:
            return False, str(exc)
        return result.ok, result.stderr.strip()

    def whoami(self) -> str:
        """The login the transport runs commands as."""
        result = self.run(["id", "-un"], mutating=False)
        if not result.ok:
            raise Unreachable(f"id -un on {self.transport.where}: {result.stderr.strip()}")
        return result.stdout.strip()

    def home(self) -> str:
        result = self.run(["printenv", "HOME"], mutating=False)
        return result.stdout.strip() if result.ok else ""

    def mkdir(self, path: str) -> None:
        result = self.run(["mkdir", "-p", "--", path], mutating=True)
        if not result.ok:
            msg = f"cannot create the output directory {path}: {result.stderr.strip()}"
            raise Rejected(msg)

    def output_paths(self, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The stdout and stderr paths of each job of ``job_ids`` slurmctld still knows, in one
        ``squeue`` (a job it has forgotten is left out)."""
        if not job_ids:
            return {}
        argv = [self._exe("squeue"), "-h", "-t", "all", "-j", ",".join(job_ids)]
        result = self.run([*argv, "-O", "JobID:|,STDOUT:|,STDERR:|"], mutating=False)
        if not result.ok:
            if "Invalid job id" in result.stderr:
                return {}
            raise Unreachable(f"squeue on {self.transport.where}: {result.stderr.strip()}")
        out: dict[str, tuple[str, str]] = {}
        for line in result.stdout.splitlines():
            cols = line.split("|")
            if len(cols) >= 3 and cols[0].strip():
                out[cols[0].strip()] = (cols[1].strip(), cols[2].strip())
        return out

    def stat_files(self, paths: Sequence[str]) -> dict[str, tuple[int, float]]:
        """Each file of ``paths`` that exists: its size in bytes and modification time (POSIX
        seconds), in one ``stat`` where the files are (their bytes never travel)."""
        if not paths:
            return {}
        result = self.run(["stat", "-c", "%s %.9Y %n", "--", *paths], mutating=False)
        out: dict[str, tuple[int, float]] = {}
        for line in result.stdout.splitlines():
            size, mtime, name = [*line.split(" ", 2), "", ""][:3]
            if size.isdigit() and name:
                out[name] = (int(size), float(mtime))
        if not result.ok:
            other = [e for e in result.stderr.splitlines() if e.strip() and "No such file" not in e]
            if other:
                raise Unreachable(f"stat on {self.transport.where}: {other[0].strip()}")
        return out

    def find_line(self, path: str, text: str) -> str | None:
        """The first line of ``path`` that contains ``text``; None when none does or there is
        no such file. The search runs where the file is, so only that line travels."""
        result = self.run(["grep", "-a", "-F", "-m", "1", "-e", text, "--", path], mutating=False)
        if result.ok:
            return result.stdout.splitlines()[0] if result.stdout else None
        if result.returncode == 1 or "No such file" in result.stderr:
            return None
        raise Unreachable(f"grep {path} on {self.transport.where}: {result.stderr.strip()}")

    def read(self, path: str, offset: int = 0) -> bytes | None:
        """The bytes of ``path`` from ``offset``; None when the file does not exist (yet)."""
        result = self.run(["tail", "-c", f"+{offset + 1}", "--", path], mutating=False)
        if not result.ok:
            if "No such file" in result.stderr:
                return None
            raise Unreachable(f"tail {path} on {self.transport.where}: {result.stderr.strip()}")
        return result.out
