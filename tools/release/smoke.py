"""Smoke-test one adapter from its installed wheels, inside the virtual environment running this.

The nox ``build`` session makes a fresh environment per adapter, installs only what a user of
that adapter installs (from dist/ and the package index), and runs this there: the ``jobdispatch``
command must exist, list the adapter with the adapter SPI this core speaks, and plan a job on a
cluster of that adapter. It imports nothing from the checkout, so it proves the wheels carry
everything they need (entry points, schemas, data files).

The distributions that are no adapter (the PostgreSQL store, publish, conformance) are each
installed the same way and must answer one command.

Usage: python tools/release/smoke.py NAME   (JOBDISPATCH_SMOKE_JOB names the job file)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: A cluster of each adapter that can be planned on here with nothing running: the Slurm and
#: Kubeflow ones with ``probe = false``, so the plan comes from the adapter's catalogue and
#: asks no controller or API server (a release runner has neither). Nothing else is needed from
#: the machine, so the same smoke test runs in CI, on a release runner and on a laptop.
CLUSTERS = {
    "local": 'adapter = "local"\n',
    "slurm": 'adapter = "slurm"\ntransport = "local"\nprobe = false\n',
    "kubeflow": 'adapter = "kubeflow"\nprobe = false\nruntime = { name = "dispatch-torch-test" }\n',
}


#: Where the shared example job cannot run: a TrainJob has no working directory, so the Kubeflow
#: smoke test plans a job of its own, with the same kind of recovery rule.
JOBS = {
    "kubeflow": (
        'name = "smoke"\ncommand = ["python", "train.py"]\nnodes = 2\n'
        '[[recovery.rules]]\non = ["preempted"]\naction = "resubmit"\nbudget = 2\n'
    ),
}


def fail(message: str) -> None:
    print(f"smoke: {message}", file=sys.stderr)
    sys.exit(1)


def main(adapter: str) -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    command = scripts / "jobdispatch"
    if not command.exists():
        fail(f"the wheels installed no jobdispatch command into {scripts}")
    import jobdispatch  # the installed one: this runs from outside the checkout's sources
    from jobdispatch.plugins import ADAPTER_SPI

    site = Path(sysconfig.get_path("purelib"))
    if site not in Path(jobdispatch.__file__).resolve().parents:
        fail(f"jobdispatch was imported from {jobdispatch.__file__}, not from {site}")

    with tempfile.TemporaryDirectory(prefix="jobdispatch-smoke-") as scratch:
        home = Path(scratch)
        config = home / "config" / "jobdispatch" / "config.toml"
        config.parent.mkdir(parents=True)
        state = home / "state"
        config.write_text(f"[clusters.smoke]\n{CLUSTERS[adapter]}")
        if adapter == "local":
            config.write_text(config.read_text() + f'state_dir = "{state}/local"\n')
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(state),
            "JOBDISPATCH_CLUSTER": "smoke",
        }

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run(
                [str(command), *args], env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                fail(f"jobdispatch {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
            return done

        listed = json.loads(run("plugins", "--json").stdout)
        adapters = {e["name"]: e for e in listed["registries"]["adapter"]}
        if adapter not in adapters:
            fail(f"jobdispatch plugins does not list {adapter!r}: {sorted(adapters)}")
        if listed["failures"]:
            fail(f"plugins failed to load: {listed['failures']}")
        if adapters[adapter]["spi"] != ADAPTER_SPI:
            fail(f"{adapter} declares SPI {adapters[adapter]['spi']}, core {ADAPTER_SPI}")
        print(f"smoke: {adapter} listed, from {adapters[adapter]['provider']}, SPI {ADAPTER_SPI}")

        from importlib import resources

        unit = resources.files("jobdispatch_cli") / "systemd" / "jobdispatch-supervise.service"
        if not unit.is_file():
            fail("the jobdispatch-cli wheel does not carry its systemd unit")

        job = os.environ.get("JOBDISPATCH_SMOKE_JOB")
        if adapter in JOBS:
            job = str(home / "smoke.toml")
            Path(job).write_text(JOBS[adapter])
        if not job:
            fail("JOBDISPATCH_SMOKE_JOB names no job file")
        plan = json.loads(run("plan", str(job), "--json").stdout)
        enforcers = [rule["enforcer"] for rule in plan["rules"]]
        if not enforcers:
            fail(f"the plan on {adapter} has no rules: {plan}")
        print(f"smoke: planned {Path(job).name} on {adapter}: rules enforced by {enforcers}")


#: The distributions that are no adapter, each with a command that must work once installed
#: alone (with the extras a user would name): the store plugin must be listed, the tools must
#: start.
OTHERS = {
    "postgresql": ("jobdispatch", "plugins", "--json"),
    "publish": ("jobdispatch-publish", "--help"),
    "conformance": ("jobdispatch-conformance", "--help"),
    # Installs the command with it: the dashboard must start far enough to check its options.
    "dashboard": ("jobdispatch", "dashboard", "--help"),
}


def other(name: str) -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    command, *args = OTHERS[name]
    done = subprocess.run(
        [str(scripts / command), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        fail(f"{command} {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    if name == "postgresql":
        listed = json.loads(done.stdout)
        stores = [e["name"] for e in listed["registries"]["record-store"]]
        if "postgresql" not in stores or listed["failures"]:
            fail(f"the postgresql store is not listed: {stores}, {listed['failures']}")
    print(f"smoke: {name}: {command} {' '.join(args)} works")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in {*CLUSTERS, *OTHERS}:
        fail(f"usage: smoke.py NAME (one of {', '.join([*CLUSTERS, *OTHERS])})")
    if sys.argv[1] in OTHERS:
        other(sys.argv[1])
    else:
        main(sys.argv[1])
