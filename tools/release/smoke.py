"""Smoke-test one adapter from its installed wheels, inside the virtual environment running this.

The nox ``build`` session makes a fresh environment per adapter, installs only what a user of
that adapter installs (from dist/ and the package index), and runs this there: the ``jobdispatch``
command must exist, list the adapter with the adapter SPI this core speaks, and plan a job on a
cluster of that adapter. It imports nothing from the checkout, so it proves the wheels carry
everything they need (entry points, schemas, data files).

Usage: python tools/release/smoke.py ADAPTER   (JOBDISPATCH_SMOKE_JOB names the job file)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

#: A cluster of each adapter that can be planned on here. The Slurm one talks to the local
#: controller through the local shell (tools/slurm/up starts one in CI); the Kubeflow one to the
#: control plane tools/kube/up starts, with the adapter's own token (its exports name them).
CLUSTERS = {
    "local": 'adapter = "local"\n',
    "slurm": 'adapter = "slurm"\ntransport = "local"\n',
    "kubeflow": (
        'adapter = "kubeflow"\n'
        'kubeconfig = "{JOBDISPATCH_KUBE_ADAPTER_KUBECONFIG}"\n'
        'token_file = "{JOBDISPATCH_KUBE_TOKEN_FILE}"\n'
        'namespace = "{JOBDISPATCH_KUBE_NAMESPACE}"\n'
        "allow_rank_restart = true\n"
        'runtime = {{ name = "dispatch-torch-test" }}\n'
    ),
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
        try:
            section = CLUSTERS[adapter].format(**os.environ)
        except KeyError as missing:
            fail(f"{adapter} needs {missing} (tools/kube/up prints it)")
        config.write_text(f"[clusters.smoke]\n{section}")
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


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CLUSTERS:
        fail(f"usage: smoke.py ADAPTER (one of {', '.join(CLUSTERS)})")
    main(sys.argv[1])
