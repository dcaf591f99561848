"""The adapter against the real cluster, beyond the conformance suite: exact bytes through
sbatch (locally and over SSH), requeue of an ended job refused, host keys, probing and the cost
of one poll."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jobdispatch.errors import Rejected, Unauthorized
from jobdispatch.spi import ObjectRef, StartRequest, find_all
from jobdispatch.testing import eventually
from jobdispatch.types import (
    Actor,
    CallMeta,
    CauseKind,
    JobSpec,
    ObjectState,
    Provenance,
    Source,
)
from jobdispatch_slurm import (
    CountingTransport,
    LocalTransport,
    Settings,
    SlurmBackend,
)
from jobdispatch_slurm import testing as slurm_testing
from jobdispatch_slurm.config import SshSettings
from jobdispatch_slurm.testing import ssh_transport, stop_quietly

pytestmark = pytest.mark.slurm

NASTY = [
    "it's",
    'say "hi"',
    "$(touch /tmp/jobdispatch-pwned)",
    "`id`",
    "a;b|c&d > /tmp/x",
    "line1\nline2",
    "ünïcødé ✓ 日本 🙂",
    "$HOME ${PATH} %j %N",
    "\\back\\slash\\",
    "-n",
    "'; exit 1; '",
    " spaced ",
    "",
]
DUMP = (
    "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('FUZZ_')}}))"
)


@pytest.fixture
def over_ssh(ssh_server: Any) -> Iterator[SlurmBackend]:
    transport = ssh_transport(ssh_server)
    backend = SlurmBackend(Settings(), transport=transport)
    backend.started = []  # type: ignore[attr-defined]
    yield backend
    stop_quietly(backend, backend.started)  # type: ignore[attr-defined]
    backend.close()


def run_to_end(backend: SlurmBackend, spec: JobSpec) -> tuple[ObjectRef, Any]:
    """One object of ``spec`` run to its end on ``backend`` (a fixture's: stopped afterwards);
    the observation as ``Any``, since the tests read its latest run's cause, which they know
    is there."""
    return slurm_testing.run_to_end(backend, spec, backend.started)  # type: ignore[attr-defined]


def exact_bytes(backend: SlurmBackend, args: list[str], env: dict[str, str], name: str) -> None:
    spec = JobSpec(command=("python3", "-c", DUMP, *args), env=env, name=name)
    ref, obs = run_to_end(backend, spec)
    assert obs.latest.cause.kind is CauseKind.NONE, obs
    out = backend.output(ref).read()
    assert json.loads(out) == {"argv": args, "env": env}
    comment = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", ref.id, "-O", "Comment:|"],
        capture_output=True,
        text=True,
        env={"TZ": "UTC", "PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout
    # an empty name sets no --comment, which squeue prints as (null)
    assert comment == (name if name else "(null)") + "|\n"


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_shell_metacharacters_reach_the_job_as_given(
    request: pytest.FixtureRequest, where: str
) -> None:
    backend = request.getfixturevalue("local" if where == "local" else "over_ssh")
    env = {f"FUZZ_{i}": v for i, v in enumerate(NASTY)}
    exact_bytes(backend, NASTY, env, "name with 'quotes' $(and) `ticks`;|& ✓")


TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x00"), max_size=12
)


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: every example is a real job
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(args=st.lists(TEXT, max_size=4), values=st.lists(TEXT, max_size=3), name=TEXT)
def test_fuzzed_commands_and_env_reach_the_job(
    local: SlurmBackend, args: list[str], values: list[str], name: str
) -> None:
    exact_bytes(local, args, {f"FUZZ_{i}": v for i, v in enumerate(values)}, name)


def test_requeue_of_an_ended_job_is_refused_and_its_history_kept(local: SlurmBackend) -> None:
    """0007 §5: Slurm would requeue it and rewrite FAILED to REQUEUED. The adapter refuses."""
    ref, obs = run_to_end(local, JobSpec(command=("bash", "-c", "exit 3")))
    assert (obs.latest.cause.kind, obs.latest.cause.exit_code) == (CauseKind.NON_ZERO_EXIT, 3)
    meta = CallMeta(deadline=local.now().replace(year=2100), by=Actor.supervisor("t"))
    with pytest.raises(Rejected, match="ended"):
        local.requeue(ref, meta)
    again = local.inspect(ref)
    assert again.state is ObjectState.ENDED
    assert [(e.index, e.cause) for e in again.executions] == [(0, obs.latest.cause)]


@pytest.mark.parametrize(("where", "nodes"), [("local", 1), ("local", 2)])
def test_a_program_that_cannot_start_is_launch_failed(
    request: pytest.FixtureRequest, where: str, nodes: int
) -> None:
    """Issue 14.6: a missing program ended non-zero-exit 127, bash's status for it. Its failed
    exec now leaves the launch mark, on the batch node or (under srun) on every rank's, and the
    adapter finds it with grep through its transport (a parameter: "ssh" runs the same search
    over the loopback sshd, left out while that shared service does not answer)."""
    backend = request.getfixturevalue("local" if where == "local" else "over_ssh")
    program = "/nonexistent/jobdispatch-test/train"
    _, obs = run_to_end(backend, JobSpec(command=(program, "--epochs", "1"), nodes=nodes))
    cause = obs.latest.cause
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)
    assert f"cannot start {program} (exit 127)" in cause.detail


@pytest.mark.parametrize("where", ["local", "ssh"])
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_working_directory_that_does_not_exist_is_launch_failed(
    request: pytest.FixtureRequest, where: str, nodes: int
) -> None:
    """Issue 34.6: slurmstepd ran such a job in /tmp ("couldn't chdir … going to /tmp
    instead") and it ended succeeded; the local adapter fails it launch-failed, and so does
    this one now, through either transport. The program never runs: it would leave a file."""
    backend = request.getfixturevalue("local" if where == "local" else "over_ssh")
    missing = f"/nonexistent/jobdispatch-test-{uuid.uuid4().hex[:8]}/work"
    witness = f"/tmp/jobdispatch-wd-ran-{uuid.uuid4().hex[:8]}"
    spec = JobSpec(command=("touch", witness), nodes=nodes, working_dir=missing)
    _, obs = run_to_end(backend, spec)
    cause = obs.latest.cause
    assert (cause.kind, cause.provenance) == (CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER)
    assert f"cannot enter the working directory {missing} (exit 127)" in cause.detail
    assert not os.path.exists(witness), "the program ran although its folder is missing"


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_a_working_directory_that_exists_is_where_the_job_runs(
    request: pytest.FixtureRequest, where: str, tmp_path: Path
) -> None:
    backend = request.getfixturevalue("local" if where == "local" else "over_ssh")
    tmp_path.chmod(0o755)
    ref, obs = run_to_end(backend, JobSpec(command=("pwd",), working_dir=str(tmp_path)))
    assert obs.latest.cause.kind is CauseKind.NONE, obs
    assert backend.output(ref).read() == f"{tmp_path}\n".encode()


@pytest.mark.parametrize(("nodes", "status"), [(1, 127), (2, 127), (1, 126)])
def test_a_program_that_exits_126_or_127_itself_is_a_non_zero_exit(
    local: SlurmBackend, nodes: int, status: int
) -> None:
    _, obs = run_to_end(local, JobSpec(command=("bash", "-c", f"exit {status}"), nodes=nodes))
    cause = obs.latest.cause
    assert (cause.kind, cause.exit_code) == (CauseKind.NON_ZERO_EXIT, status), cause


def test_capabilities_are_probed_once_per_cluster(local: SlurmBackend) -> None:
    caps = local.capabilities()
    assert caps[next(iter(caps))].source in (Source.PROBED, Source.CATALOGUE, Source.DECLARED)
    from jobdispatch.types import Capability

    assert caps[Capability.NATIVE_REQUEUE].source is Source.PROBED
    assert caps[Capability.ACCOUNTING_HISTORY].source is Source.PROBED
    counter = CountingTransport(LocalTransport())
    other = SlurmBackend(Settings(), transport=counter)
    other.capabilities()
    other.capabilities()
    # one show config to learn which cluster it is; the rest comes from the shared cache
    assert counter.counts == {"scontrol": 1}
    declared = SlurmBackend(Settings.from_config({"capabilities": {"native-requeue": "no"}}))
    assert declared.capabilities()[Capability.NATIVE_REQUEUE].source is Source.DECLARED


def test_one_poll_of_many_jobs_is_two_commands(local: SlurmBackend) -> None:
    counter = CountingTransport(LocalTransport())
    backend = SlurmBackend(Settings(), transport=counter)
    jobs = ["rq" + uuid.uuid4().hex[:10] for _ in range(12)]
    for job in jobs:
        ref = backend.start(
            StartRequest(job=job, submission=1, attempt=1, spec=JobSpec(command=("true",)))
        )
        local.started.append(ref)  # type: ignore[attr-defined]
    backend.user()  # who the queries are for: asked once per backend, not per poll
    counter.reset()
    found = find_all(backend, jobs)
    assert counter.counts == {"squeue": 1, "sacct": 1}
    assert all(
        len(d.objects) == 1 and d.objects[0].state is ObjectState.GATED for d in found.values()
    )


@pytest.mark.ssh
def test_an_unknown_host_is_refused_unless_the_site_accepts_it(
    ssh_server: SshSettings, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    strict = ssh_transport(ssh_server, str(empty))
    with pytest.raises(Unauthorized, match="known_hosts"):
        strict.run(["true"], timeout=10)
    lenient = ssh_transport(ssh_server, str(empty), accept_unknown_hosts=True)
    try:
        assert lenient.run(["true"], timeout=10).ok
    finally:
        lenient.close()
    assert empty.read_text() == "", "an accepted host key must never be saved"


@pytest.mark.ssh
@pytest.mark.parametrize("accept_unknown_hosts", [False, True])
def test_a_changed_host_key_is_named_as_changed(
    ssh_server: SshSettings, tmp_path: Path, accept_unknown_hosts: bool
) -> None:
    """Issue 34.12: known_hosts holding another key for the host was reported as an unknown
    host, with the advice to set accept_unknown_hosts, which cannot help. The refusal now says
    the key changed, which fingerprint the host offers and which known_hosts line holds the old
    one, whatever accept_unknown_hosts says."""
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    assert ssh_server.known_hosts is not None, "tools/ssh/up names its known_hosts"
    real = [
        line
        for line in Path(ssh_server.known_hosts).read_text().splitlines()
        if line.startswith(f"[{ssh_server.host}]:{ssh_server.port} ")
    ]
    assert real, "the sshd's own key is in its known_hosts"
    pattern, _, _ = real[0].partition(" ")
    kind, key = (tmp_path / "other.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"# a comment line\n{pattern} {kind} {key}\n")
    (tmp_path / "real").write_text(real[0] + "\n")
    offered = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "real")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[1]
    transport = ssh_transport(ssh_server, str(known), accept_unknown_hosts=accept_unknown_hosts)
    try:
        with pytest.raises(Unauthorized) as refused:
            transport.run(["true"], timeout=10)
    finally:
        transport.close()
    said = refused.value.message
    assert "the host key has CHANGED" in said, said
    assert offered in said and f"{known} line 2" in said, said
    assert "is unknown" not in said and "or set accept_unknown_hosts" not in said, said
    assert known.read_text().endswith(f"{pattern} {kind} {key}\n"), "the file is left alone"


@pytest.mark.ssh
def test_output_is_followed_over_ssh(over_ssh: SlurmBackend) -> None:
    spec = JobSpec(command=("bash", "-c", "echo first; sleep 3; echo second"))
    job = "rf" + uuid.uuid4().hex[:10]
    ref = over_ssh.start(StartRequest(job=job, submission=1, attempt=1, spec=spec))
    over_ssh.started.append(ref)  # type: ignore[attr-defined]
    over_ssh.open(ref)
    eventually(
        lambda: over_ssh.inspect(ref),
        "the opened object past its gate",
        holds=lambda o: o.state is not ObjectState.GATED,
        every=0.5,
    )
    assert over_ssh.output(ref, follow=True).read() == b"first\nsecond\n"


def test_the_local_transport_never_uses_a_shell(local: SlurmBackend) -> None:
    out = LocalTransport().run(
        [sys.executable, "-c", "import sys; print(sys.argv[1])", "$(id)"], timeout=5
    )
    assert out.stdout == "$(id)\n"
