"""What each command failure means, through a transport that answers as told: lost replies,
timeouts, refusals and an unreachable controller."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from jobdispatch.errors import OutcomeUnknown, Rejected, Unauthorized, Unreachable
from jobdispatch.testing import imported_with
from jobdispatch_slurm.commands import SACCT_END, Slurm
from jobdispatch_slurm.transport import CountingTransport, Interrupted, LocalTransport, Result


class Scripted:
    """Answers every command with the next scripted reply (a Result, or an exception)."""

    where = "scripted"

    def __init__(self, *replies: Result | Exception) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None) -> Result:
        self.seen.append(tuple(argv))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def close(self) -> None:
        pass


def res(code: int = 0, out: bytes = b"", err: bytes = b"") -> Result:
    return Result(("x",), code, out, err)


def test_sbatch_reads_the_job_id() -> None:
    assert Slurm(Scripted(res(out=b"42\n"))).sbatch(["--parsable"], "#!/bin/bash\n") == "42"
    assert Slurm(Scripted(res(out=b"43;cluster\n"))).sbatch([], "") == "43"


def test_a_lost_sbatch_reply_is_outcome_unknown() -> None:
    with pytest.raises(OutcomeUnknown):
        Slurm(Scripted(Interrupted("timed out"))).sbatch([], "")
    with pytest.raises(OutcomeUnknown):
        Slurm(
            Scripted(res(1, err=b"sbatch: error: Socket timed out on send/recv operation"))
        ).sbatch([], "")
    with pytest.raises(OutcomeUnknown):
        Slurm(Scripted(res(0, out=b"garbage"))).sbatch([], "")


def test_sbatch_refusals_and_an_unreachable_controller() -> None:
    with pytest.raises(Rejected, match="Invalid partition"):
        Slurm(Scripted(res(1, err=b"sbatch: error: Invalid partition name specified"))).sbatch(
            [], ""
        )
    err = (
        b"sbatch: error: Batch job submission failed: "
        b"Unable to contact slurm controller (connect failure)"
    )
    with pytest.raises(Unreachable):
        Slurm(Scripted(res(1, err=err))).sbatch([], "")
    with pytest.raises(Unauthorized):
        Slurm(Scripted(res(1, err=b"Access/permission denied"))).sbatch([], "")


def test_a_query_that_times_out_is_unreachable_not_unknown() -> None:
    with pytest.raises(Unreachable):
        Slurm(Scripted(Interrupted("timed out"))).squeue(user="u")


def test_squeue_of_an_unknown_id_is_empty() -> None:
    err = b"slurm_load_jobs error: Invalid job id specified"
    assert Slurm(Scripted(res(1, err=err))).squeue(job_id="99999") == []


def test_queries_carry_user_window_and_far_end() -> None:
    t = Scripted(res(out=b""), res(out=b""))
    s = Slurm(t)
    s.squeue(user="alice")
    from datetime import UTC, datetime

    s.sacct(user="alice", since=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    squeue, sacct = t.seen
    assert squeue[:4] == ("squeue", "-h", "-t", "all") and squeue[-2:] == ("-u", "alice")
    assert "-X" in sacct and "-D" in sacct and "-P" in sacct
    assert sacct[sacct.index("-u") + 1] == "alice"
    assert sacct[sacct.index("-S") + 1] == "2026-01-02T03:04:05"
    assert sacct[sacct.index("-E") + 1] == SACCT_END


def test_local_transport_sets_tz_and_never_uses_a_shell() -> None:
    t = LocalTransport()
    out = t.run(
        [sys.executable, "-c", "import os,sys; print(os.environ['TZ'], sys.argv[1])", "$(x);`y`"],
        timeout=10,
    )
    assert out.stdout == "UTC $(x);`y`\n"


def test_local_transport_timeout_and_missing_program() -> None:
    with pytest.raises(Interrupted):
        LocalTransport().run(["sleep", "5"], timeout=0.2)
    with pytest.raises(Unreachable):
        LocalTransport().run(["/nonexistent/sbatch"], timeout=5)


def test_counting_transport_counts_by_program() -> None:
    t = CountingTransport(Scripted(res(), res(), res()))
    for argv in (["/usr/bin/squeue"], ["sacct"], ["squeue"]):
        t.run(argv, timeout=1)
    assert t.counts == {"squeue": 2, "sacct": 1}
    assert t.total == 3


def test_hooks_module_is_cheap_to_import() -> None:
    assert imported_with("jobdispatch_slurm._hooks", ("fabric", "paramiko")) == []


def test_the_ssh_command_line_is_strict_and_keeps_every_word(tmp_path: Path) -> None:
    """No sshd needed: what the transport asks of the OpenSSH client."""
    from jobdispatch_slurm.transport import SshTransport

    t = SshTransport(host="login", user="alice", port=2200, key_filename="/k", jump="bastion")
    words = ["printf", "%s", "a b", "$(rm -rf /)", "it's", ""]
    argv = t.ssh_argv(words)
    assert argv[-3:-1] == ["--", "login"]
    import shlex

    assert shlex.split(argv[-1]) == ["env", "TZ=UTC", *words]
    opts = " ".join(argv[:-3])
    assert "StrictHostKeyChecking=yes" in opts and "BatchMode=yes" in opts
    assert "-i /k -o IdentitiesOnly=yes" in opts and "-J bastion" in opts
    assert "-l alice -p 2200" in opts and "ControlMaster=no" in opts


def test_accepting_unknown_hosts_never_touches_the_sites_file(tmp_path: Path) -> None:
    from jobdispatch_slurm.transport import SshTransport

    known = tmp_path / "known_hosts"
    known.write_text("[h]:22 ssh-ed25519 AAAA\n")
    t = SshTransport(host="h", known_hosts=str(known), accept_unknown_hosts=True)
    opts = t.ssh_argv(["true"])
    assert "StrictHostKeyChecking=accept-new" in opts
    (copy,) = [o.split("=", 1)[1] for o in opts if o.startswith("UserKnownHostsFile=")]
    assert copy != str(known)
    assert Path(copy).read_text() == known.read_text()
