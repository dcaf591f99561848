"""What ``./dev demo`` runs: the example job supervised to its end, preempted on the way.

It runs ``jobdispatch run --follow examples/train.toml`` and passes its output through. The job's
first submission stops at step 30, checkpointed, and waits to be preempted. The reader may do
that from a second terminal (``./dev jobdispatch local preempt JOB``, as the README shows); if
nobody has after ``--preempt-after`` seconds (30 by default), the demo preempts that submission
itself, exactly as the command would, so the demo always runs to its end on its own and shows the
recovery. Only the first submission's object is ever preempted, and only while it still runs,
so a reader who got there first is never raced into a second preemption.

    python examples/demo.py [--preempt-after SECONDS] [-- extra arguments for jobdispatch run]

Exits with ``jobdispatch run``'s own code (0 once the job succeeded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
JOB_FILE = HERE / "train.toml"
WAITING = "waiting to be preempted"


def jobdispatch() -> list[str]:
    """The ``jobdispatch`` console script beside this interpreter, or the module."""
    script = Path(sys.executable).parent / "jobdispatch"
    if script.exists():
        return [str(script)]
    found = shutil.which("jobdispatch")
    return [found] if found else [sys.executable, "-m", "jobdispatch_cli.main"]


def first_submission_object(job: str) -> str | None:
    """The running object of the job's first submission, if it still runs."""
    listed = subprocess.run(
        [*jobdispatch(), "local", "ps", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        return None
    for obj in json.loads(listed.stdout):
        name = str(obj.get("ref", {}).get("id", ""))
        if name.startswith(f"jd-{job}-1-") and obj.get("state") == "running":
            return name
    return None


def preempt_if_nobody_did(job: str, after: float, reader_preempted: threading.Event) -> None:
    """After ``after`` seconds, preempt the first submission unless the reader has."""
    if reader_preempted.wait(after):
        return
    target = first_submission_object(job)
    if target is None:
        return  # it ended already: the reader's preemption is on its way through
    print(
        f"demo: nobody preempted it in {after:g} s, so the demo does, as a scheduler would: "
        f"jobdispatch local preempt {target}",
        flush=True,
    )
    subprocess.run(
        [*jobdispatch(), "local", "preempt", target],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,  # the reader may have won the race: then there is nothing left to do
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preempt-after",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to leave the preemption to the reader before doing it (default 30)",
    )
    parser.add_argument("run_args", nargs="*", help="more arguments for `jobdispatch run`")
    args = parser.parse_args(argv)
    if args.preempt_after < 0:
        parser.error(f"--preempt-after must be 0 or more seconds, got {args.preempt_after:g}")

    command = [*jobdispatch(), "run", "--follow", str(JOB_FILE), *args.run_args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    run = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
    assert run.stdout is not None
    job: str | None = None
    reader_preempted = threading.Event()
    helper: threading.Thread | None = None
    try:
        for line in run.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if job is None and line.startswith("job "):
                job = line.split()[1]
            elif "ended: preempted" in line:
                reader_preempted.set()
            elif WAITING in line and job is not None and helper is None:
                print(
                    f"demo: preempt it from a second terminal (./dev jobdispatch local preempt "
                    f"{job}), or the demo will in {args.preempt_after:g} s",
                    flush=True,
                )
                helper = threading.Thread(
                    target=preempt_if_nobody_did,
                    args=(job, args.preempt_after, reader_preempted),
                    daemon=True,
                )
                helper.start()
        return run.wait()
    except KeyboardInterrupt:
        # The terminal's Ctrl-C reached `run` too: it stops supervising, the job goes on.
        return run.wait()


if __name__ == "__main__":
    sys.exit(main())
