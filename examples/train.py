"""A tiny training job that survives preemption: it fits y = 3x + 2 by gradient descent in plain
Python, saves a checkpoint after every step, and resumes from the newest one.

Run it under dispatch (``jobdispatch run examples/train.toml``) and preempt it from a second
terminal (``jobdispatch local preempt JOB``): the next submission picks up where the last
checkpoint left off instead of starting over.

Where checkpoints go: each execution writes its own directory,
``$CHECKPOINT_DIR/<job>/s<submission>-e<execution>/`` (from the ``JOBDISPATCH_*`` variables the
adapter sets), and resumes from the newest checkpoint an *earlier* execution of the same job
wrote. So every rank starts from the same step, two jobs never resume from each other, and an
execution that is still being killed cannot overwrite what the next one reads: dispatch's
"isolated" checkpoint mode. A checkpoint is written to a temporary file, fsynced and renamed
into place, so a kill at any instant leaves the previous one whole. Only rank 0 writes.
No GPU, no downloads, standard library only.

    python examples/train.py --steps 40 --step-seconds 0.25

``--wait-at STEP`` makes the first submission stop after that step and wait, checkpointed, until
it is preempted (SIGTERM): the demo's job waits for the reader (or examples/demo.py) to
preempt it, and the tests' jobs wait for the test, however slow the machine. Later submissions
run straight through.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TRUE_W, TRUE_B = 3.0, 2.0


def data(n: int = 64, seed: int = 0) -> list[tuple[float, float]]:
    """A fixed, noisy sample of the line, the same for every rank and every run."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = rng.uniform(-1.0, 1.0)
        out.append((x, TRUE_W * x + TRUE_B + rng.gauss(0.0, 0.05)))
    return out


def step(
    w: float, b: float, points: list[tuple[float, float]], lr: float
) -> tuple[float, float, float]:
    """One gradient-descent step on the mean squared error; returns (w, b, loss before)."""
    n = len(points)
    grad_w = grad_b = loss = 0.0
    for x, y in points:
        err = w * x + b - y
        loss += err * err / n
        grad_w += 2 * err * x / n
        grad_b += 2 * err / n
    return w - lr * grad_w, b - lr * grad_b, loss


def job_dir() -> Path:
    root = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    return root / os.environ.get("JOBDISPATCH_JOB", "standalone")


def execution_dir() -> Path:
    submission = os.environ.get("JOBDISPATCH_SUBMISSION", "1")
    execution = os.environ.get("JOBDISPATCH_EXECUTION", "0")
    return job_dir() / f"s{submission}-e{execution}"


def latest(job: Path, mine: Path) -> dict[str, float] | None:
    """The newest whole checkpoint earlier executions of the job wrote, if any."""
    best = None
    for path in job.glob("*/step-*.json"):
        if path.parent == mine:
            continue
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # never a torn file (rename is atomic), but be safe with strays
        if best is None or state["step"] > best["step"]:
            best = state
    return best


def save(folder: Path, state: dict[str, float], keep: int = 3) -> None:
    """Write the checkpoint atomically and durably, then prune all but the newest ``keep``."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"step-{int(state['step']):06d}.json"
    tmp = folder / f".{final.name}.tmp"
    with tmp.open("w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(final)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for old in sorted(folder.glob("step-*.json"))[:-keep]:
        old.unlink(missing_ok=True)


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of ranks: torchrun's ``RANK`` and ``WORLD_SIZE``,
    else srun's ``SLURM_PROCID`` and ``SLURM_NTASKS`` (a job of several nodes on Slurm runs one
    task a node under srun, which sets no ``RANK``), else one process alone. Reading only
    ``RANK`` made every task under srun rank 0: each saved and published the same steps into
    one root, and two publishing a step at once failed a run now and then."""
    env = os.environ
    if "RANK" in env:
        return int(env["RANK"]), int(env.get("WORLD_SIZE", "1"))
    if "SLURM_PROCID" in env:
        return int(env["SLURM_PROCID"]), int(env.get("SLURM_NTASKS", "1"))
    return 0, 1


def wait_for_preemption(tag: str, step: int, stopping: Callable[[], bool]) -> None:
    """Sit at ``step``, its checkpoint written, until SIGTERM arrives; the loop then stops.

    A job meant to be preempted must not end before whoever preempts it is ready, and how long
    that takes (a person reading the job id, a test's subprocess starting on a loaded machine)
    is nobody's guess; so the job waits for the preemption itself rather than for a while.
    """
    if rank_and_world()[0] == 0:
        print(f"{tag} step {step}: waiting to be preempted", flush=True)
    while not stopping():
        time.sleep(0.05)


class Helper:
    """Checkpoints through dispatch's checkpoint helper, used when the job file names a
    ``[progress] root`` (the adapters then set ``JOBDISPATCH_CHECKPOINT_ROOT``): every rank
    resolves the newest *published* checkpoint (rank 0 as its execution, so a "resumed" entry
    names it), rank 0 marks its step every step (the helper writes at most once per interval)
    and publishes a checkpoint every ``publish_every`` steps. The supervisor reads those marks
    and publications to tell a job that trains from one that hangs."""

    def __init__(self, rank: int, publish_every: int) -> None:
        self.rank = rank
        self.publish_every = publish_every
        self.scratch = Path(tempfile.mkdtemp(prefix=f"train-rank{rank}-"))

    def _helper(self, *args: str, as_execution: bool) -> str:
        env = dict(os.environ)
        if not as_execution:  # a reader only: no "resumed" entry of its own
            env.pop("JOBDISPATCH_SUBMISSION", None)
            env.pop("JOBDISPATCH_EXECUTION", None)
        done = subprocess.run(
            [sys.executable, "-m", "jobdispatch_publish", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"jobdispatch-publish {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def load(self) -> dict[str, float] | None:
        root = os.environ["JOBDISPATCH_CHECKPOINT_ROOT"]
        if "://" not in root:
            # The example's own root, made on first use; the helper itself refuses a missing
            # root rather than read it as "nothing published" and start over.
            Path(root).mkdir(parents=True, exist_ok=True)
        into = self.scratch / "resumed"
        into.mkdir()
        found = self._helper("resolve", "--into", str(into), as_execution=self.rank == 0)
        if not found.strip():
            return None
        state: dict[str, float] = json.loads((into / "state.json").read_text())
        return state

    def step_done(self, state: dict[str, float]) -> None:
        if self.rank != 0:
            return
        import jobdispatch_publish

        step = int(state["step"])
        jobdispatch_publish.progress(step)
        if step % self.publish_every == 0:
            save = self.scratch / f"save-{step:06d}"
            save.mkdir()
            (save / "state.json").write_text(json.dumps(state))
            self._helper("publish", "--step", str(step), str(save), as_execution=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-seconds", type=float, default=0.25)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument(
        "--wait-at",
        type=int,
        default=None,
        metavar="STEP",
        help="in the first submission, wait after this step until preempted (SIGTERM)",
    )
    parser.add_argument(
        "--hang-at",
        type=int,
        default=None,
        metavar="STEP",
        help="in the first submission, hang after this step (no progress) until stopped",
    )
    parser.add_argument(
        "--crash-at",
        type=int,
        default=None,
        metavar="STEP",
        help="in every submission, exit 3 right after reaching this step",
    )
    parser.add_argument(
        "--publish-every",
        type=int,
        default=5,
        metavar="STEPS",
        help="with a checkpoint root (JOBDISPATCH_CHECKPOINT_ROOT): publish every STEPS steps",
    )
    args = parser.parse_args(argv)

    rank, world = rank_and_world()
    execution = os.environ.get("JOBDISPATCH_EXECUTION", "0")
    submission = os.environ.get("JOBDISPATCH_SUBMISSION", "1")
    folder = execution_dir()
    # A preemption is SIGTERM first: finish the step under way, then stop.
    stopping = False

    def on_term(_signo: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)

    helper = (
        Helper(rank, args.publish_every) if os.environ.get("JOBDISPATCH_CHECKPOINT_ROOT") else None
    )
    found = helper.load() if helper is not None else latest(job_dir(), folder)
    state = found or {"step": 0, "w": 0.0, "b": 0.0, "loss": float("nan")}
    start = int(state["step"])
    tag = f"[rank {rank}/{world} submission {submission} execution {execution}]"
    if start:
        print(f"{tag} resuming from step {start} (loss {state['loss']:.4f})", flush=True)
    else:
        print(f"{tag} starting from scratch", flush=True)
    points = data()
    w, b = state["w"], state["b"]
    for i in range(start, args.steps):
        if stopping:
            print(f"{tag} SIGTERM: stopping after step {i}", flush=True)
            return 143
        w, b, loss = step(w, b, points, args.lr)
        if helper is not None:
            helper.step_done({"step": i + 1, "w": w, "b": b, "loss": loss})
        elif rank == 0:
            save(folder, {"step": i + 1, "w": w, "b": b, "loss": loss})
        if (i + 1) % 5 == 0 or i + 1 == args.steps:
            print(
                f"{tag} step {i + 1}/{args.steps} loss {loss:.5f} w {w:.3f} b {b:.3f}", flush=True
            )
        time.sleep(args.step_seconds)
        if i + 1 == args.wait_at and submission == "1" and not stopping:
            wait_for_preemption(tag, i + 1, lambda: stopping)
        if i + 1 == args.hang_at and submission == "1" and not stopping:
            if rank == 0:
                print(f"{tag} step {i + 1}: hanging (no more progress)", flush=True)
            while not stopping:  # a rank stuck in a collective: nothing moves, nothing ends
                time.sleep(0.05)
        if i + 1 == args.crash_at:
            print(f"{tag} step {i + 1}: crashing (exit 3)", flush=True)
            return 3
    print(f"{tag} done: w {w:.3f} b {b:.3f} (true {TRUE_W}, {TRUE_B})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
