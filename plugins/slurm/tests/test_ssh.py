"""The OpenSSH transport on the loopback sshd: settings only in an ssh_config file, a jump host
(the second sshd of tools/ssh/up), a key held only by an ssh-agent, and the shared connection.

Each test proves its path was the one taken: the alias is unknown without the file, the jump
host logs the login it carried, and the agent's key is the only key there is.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.errors import Unauthorized, Unreachable
from jobdispatch_slurm import Settings, SshTransport, build_transport, testing

pytestmark = pytest.mark.ssh

JUMP_PORT = int(os.environ.get("JOBDISPATCH_SSH_JUMP_PORT", "2223"))
WORDS = ["a b", "$(touch /tmp/never)", "it's", "tab\there", "*", ";|&", "naïve", ""]


@pytest.fixture
def jump_server(ssh_server: Any) -> Any:
    try:
        with socket.create_connection(("127.0.0.1", JUMP_PORT), timeout=3):
            pass
    except OSError as exc:
        testing.require(f"the jump sshd on 127.0.0.1:{JUMP_PORT} does not answer: {exc}")
    return ssh_server


def write_config(path: Path, ssh: Any, *, login: str = "", jump: str = "") -> Path:
    """An ssh_config with the login node as ``jd-login`` and the jump host as ``jd-jump``."""
    common = (
        f"  User {ssh.user}\n  UserKnownHostsFile {ssh.known_hosts}\n"
        f"  IdentityFile {ssh.key_file}\n  IdentitiesOnly yes\n"
    )
    path.write_text(
        f"Host jd-login\n  HostName 127.0.0.1\n  Port {ssh.port}\n{common}{login}"
        f"Host jd-jump\n  HostName 127.0.0.1\n  Port {JUMP_PORT}\n{common}{jump}"
        "Host jd-nowhere\n  HostName 127.0.0.1\n  Port 1\n"
    )
    return path


def echo_words(transport: SshTransport) -> None:
    """Every word arrives as given, through whatever path the transport takes."""
    try:
        done = transport.run(["printf", "%s\\n", *WORDS], timeout=30)
    finally:
        transport.close()
    assert done.ok, done.stderr
    assert done.out.decode().split("\n")[:-1] == WORDS


def jump_logins() -> int:
    text = Path("/var/lib/jobdispatch-ssh/jump_sshd.log").read_text(errors="replace")
    return len(re.findall(r"Accepted publickey", text))


def test_settings_only_in_an_ssh_config_file(ssh_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", ssh_server)
    echo_words(SshTransport(host="jd-login", config_file=str(config)))
    # The alias means nothing without the file: it was the file that said where to go.
    with pytest.raises(Unreachable, match="jd-login"):
        SshTransport(host="jd-login", config_file=str(tmp_path / "empty"), connect_timeout=3).run(
            ["true"], timeout=10
        )


def test_the_adapter_configuration_reaches_the_alias(ssh_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", ssh_server)
    settings = Settings.from_config(
        {"transport": "ssh", "ssh": {"host": "jd-login", "config_file": str(config)}}
    )
    transport = build_transport(settings)
    assert isinstance(transport, SshTransport)
    echo_words(transport)


def test_through_a_jump_host_named_in_the_file(jump_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", jump_server, login="  ProxyJump jd-jump\n")
    before = jump_logins()
    echo_words(SshTransport(host="jd-login", config_file=str(config)))
    assert jump_logins() > before, "the jump host carried no login"


def test_through_a_jump_host_from_the_settings(jump_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", jump_server)
    before = jump_logins()
    echo_words(SshTransport(host="jd-login", config_file=str(config), jump="jd-jump"))
    assert jump_logins() > before
    broken = SshTransport(
        host="jd-login", config_file=str(config), jump="jd-nowhere", connect_timeout=3
    )
    with pytest.raises(Unreachable, match="via jd-nowhere"):
        broken.run(["true"], timeout=10)


@pytest.fixture
def agent(tmp_path: Path, ssh_server: Any) -> Iterator[str]:
    """An ssh-agent holding the client key, whose only copy on disk is then deleted."""
    sock = str(tmp_path / "agent.sock")
    started = subprocess.run(
        ["ssh-agent", "-a", sock, "-s"], capture_output=True, text=True, check=True
    )
    pid = int(re.search(r"SSH_AGENT_PID=(\d+)", started.stdout).group(1))  # type: ignore[union-attr]
    try:
        copy = tmp_path / "only-in-the-agent"
        copy.write_bytes(Path(ssh_server.key_file).read_bytes())
        copy.chmod(0o600)
        subprocess.run(
            ["ssh-add", "-q", str(copy)],
            env={**os.environ, "SSH_AUTH_SOCK": sock},
            check=True,
            capture_output=True,
        )
        copy.unlink()
        yield sock
    finally:
        os.kill(pid, signal.SIGTERM)


def test_with_a_key_held_only_by_an_agent(ssh_server: Any, tmp_path: Path, agent: str) -> None:
    base = (
        f"Host jd-agent\n  HostName 127.0.0.1\n  Port {ssh_server.port}\n  User {ssh_server.user}\n"
        f"  UserKnownHostsFile {ssh_server.known_hosts}\n"
        f"  IdentityFile {tmp_path / 'no-such-key'}\n"
    )
    without = tmp_path / "without"
    without.write_text(base + "  IdentityAgent none\n")
    with pytest.raises(Unauthorized, match="refused"):
        SshTransport(host="jd-agent", config_file=str(without)).run(["true"], timeout=10)
    with_agent = tmp_path / "with"
    with_agent.write_text(base + f"  IdentityAgent {agent}\n")
    echo_words(SshTransport(host="jd-agent", config_file=str(with_agent)))


def test_commands_share_one_connection_until_close(ssh_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", ssh_server)
    transport = SshTransport(host="jd-login", config_file=str(config))
    try:
        first = transport.run(["sh", "-c", "echo $PPID"], timeout=30)
        assert first.ok
        master = transport.control_socket()
        assert master is not None
        assert transport.run(["true"], timeout=30).ok
        assert transport.control_socket() == master
    finally:
        transport.close()
    assert transport.control_socket() is None


def test_a_site_master_that_is_not_open_is_named(ssh_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", ssh_server)
    path = str(tmp_path / "site-master")
    transport = SshTransport(host="jd-login", config_file=str(config), control_path=path)
    with pytest.raises(Unreachable, match="open it first"):
        transport.run(["true"], timeout=10)


def test_a_site_master_is_used_and_left_open(ssh_server: Any, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", ssh_server)
    path = str(tmp_path / "site-master")
    base = ["ssh", "-F", str(config), "-o", f"ControlPath={path}"]
    subprocess.run(
        [*base, "-o", "ControlMaster=yes", "-o", "ControlPersist=60", "-fN", "jd-login"],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        echo_words(SshTransport(host="jd-login", config_file=str(config), control_path=path))
        check = subprocess.run([*base, "-O", "check", "jd-login"], capture_output=True, check=False)
        assert check.returncode == 0, "close() must not stop the site's own master"
    finally:
        subprocess.run([*base, "-O", "exit", "jd-login"], capture_output=True, check=False)
