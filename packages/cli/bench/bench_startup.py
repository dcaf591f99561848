"""Benchmark: how long ``jobdispatch --help`` takes to start, beside ``torchx --help``.

A command's help, its version and every shell-completion Tab start a fresh interpreter, so
their cost is what a user feels as the command's weight. TorchX is the nearest peer (a Python
command that submits training jobs to Slurm and Kubernetes), and the target is to stay within
1.3 times its ``--help``. Absolute times say little on a loaded machine, so every command is
run in turns, in one loop, and the ratio is of medians taken side by side. ``python -c pass``
is the floor any Python command pays.

TorchX is not a dependency of this repository: install it in a throwaway environment outside
it (``python3 -m venv /tmp/torchx && /tmp/torchx/bin/pip install torchx``) and name its
command with ``--torchx /tmp/torchx/bin/torchx`` (or ``$JOBDISPATCH_BENCH_TORCHX``, or have it
on the PATH). Without it the benchmark says "torchx not installed" and prints the rest.

Run: ``python packages/cli/bench/bench_startup.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 1.3
#: jobdispatch's own script sits beside the interpreter running this benchmark.
JOBDISPATCH = Path(sys.executable).with_name("jobdispatch")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` (which must succeed)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        msg = f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}"
        raise SystemExit(msg)
    return wall, _children_cpu() - cpu


def torchx_command(given: str | None) -> str | None:
    named = given or os.environ.get("JOBDISPATCH_BENCH_TORCHX")
    if named:
        return named if Path(named).exists() else None
    return shutil.which("torchx")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 20")
    parser.add_argument("--torchx", help="the torchx command to compare with")
    args = parser.parse_args()
    rounds = 5 if args.quick else 20

    # Completion is what click runs on Tab: the subcommands that start with "s".
    complete = {"_JOBDISPATCH_COMPLETE": "bash_complete", "COMP_WORDS": "jobdispatch s"}
    complete["COMP_CWORD"] = "1"
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], {}),
        "jobdispatch --help": ([str(JOBDISPATCH), "--help"], {}),
        "jobdispatch --version": ([str(JOBDISPATCH), "--version"], {}),
        "jobdispatch completion": ([str(JOBDISPATCH)], complete),
    }
    torchx = torchx_command(args.torchx)
    if torchx is None:
        print("torchx not installed: comparing with python -c pass only (see --torchx)")
    else:
        commands["torchx --help"] = ([torchx, "--help"], {})

    # As installed: pip compiles every module when it installs (uv leaves it to the first run),
    # so the warm-up runs may write their .pyc files, whatever this shell says.
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("_JOBDISPATCH", "COMP_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    for argv, extra in commands.values():  # warm the disk cache and the .pyc files first
        run_once(argv, {**base, **extra})
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, (argv, extra) in commands.items():
            wall, cpu = run_once(argv, {**base, **extra})
            walls[name].append(wall)
            cpus[name].append(cpu)

    print(f"{rounds} rounds, commands in turns; medians (min-max) in seconds")
    print(f"{'command':<26}{'wall':>22}{'cpu':>22}")
    for name in commands:
        w, c = walls[name], cpus[name]
        print(
            f"{name:<26}{statistics.median(w):>8.3f} ({min(w):.3f}-{max(w):.3f})"
            f"{statistics.median(c):>8.3f} ({min(c):.3f}-{max(c):.3f})"
        )
    if torchx is not None:
        ours = statistics.median(walls["jobdispatch --help"])
        theirs = statistics.median(walls["torchx --help"])
        cpu_ratio = statistics.median(cpus["jobdispatch --help"]) / statistics.median(
            cpus["torchx --help"]
        )
        verdict = "within" if ours / theirs <= TARGET else "above"
        print(
            f"jobdispatch --help / torchx --help: {ours / theirs:.2f}x wall, {cpu_ratio:.2f}x cpu"
            f" ({verdict} the {TARGET}x target)"
        )


if __name__ == "__main__":
    main()
