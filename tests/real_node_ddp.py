"""The DDP training that tests/test_real_node.py runs with torchrun in the real node's pods.

A small model (8 -> 16 -> 1) fits a fixed noisy linear target with SGD and momentum, on two
ranks over gloo. Every rank draws its batch from a generator seeded by (step, rank), so a run
resumed from a checkpoint sees exactly the batches an uninterrupted run would, and its final
loss is the same. Rank 0 saves the model, the optimizer (momentum included) and the step after
every step, atomically, into ``<out>/<job>/s<submission>-a<attempt>/``, and each execution
resumes from the newest checkpoint an earlier one wrote (dispatch's isolated checkpoints, as in
examples/train.py). ``--wait-at N`` makes the first submission stop after step N, checkpointed,
and wait until it is killed: the test preempts it then. The final loss and the step resumed from
go to ``result-s<submission>-a<attempt>.json`` beside the checkpoints.

``--helper DIR``: checkpoints go through the publish image instead (the Kubeflow adapter's
``publish`` option, docs/how-to/publish-image.md). The pod's init container resolved the
checkpoint to resume from and named it in ``DIR/resume.env``; rank 0 saves every
``--publish-every`` steps into a local folder and publishes it with the helper the init
container copied, ``DIR/helper/bin/jobdispatch-publish publish FOLDER --step N``, to the root
``JOBDISPATCH_CHECKPOINT_ROOT``. The result file then goes to ``<out>/<job>/`` as before.

``--publish-with PROGRAM``: the same, with no init container (a Slurm job): the helper is the
program named, and every rank resolves the checkpoint to resume from itself, rank 0 as its
execution (so the record names the step it resumed from), the others as readers only.
Under srun (``SLURM_PROCID`` set, no ``RANK``) the ranks come from Slurm as torchrun's would:
``RANK``, ``WORLD_SIZE`` and a ``MASTER_PORT`` of the Slurm job's own; ``--master-addr`` gives
``MASTER_ADDR`` (the first node's address; dispatch reserves the variable itself).
``--step-seconds S``: each step then sleeps S seconds, so the steps between two checkpoints
take a time a clock can tell apart.

``--exit-code N``: the worker of ``--fail-rank`` exits N after the first step (a worker's own
failure, which torchrun folds into its exit 1). ``--allocate-mib N``: that worker then allocates
N MiB and touches it (an OOM under the pod's memory limit). With either, the other ranks wait
``--peer-wait`` seconds before their next collective, which then fails.

Runs in the torch image (Debian's python3-torch 1.13); it is never imported by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def latest(job: Path, mine: Path) -> Path | None:
    """The newest checkpoint an earlier execution of the job wrote."""
    found = [p for p in job.glob("*/step-*.pt") if p.parent != mine]
    return max(found, key=lambda p: int(p.stem.split("-")[1]), default=None)


def save(folder: Path, state: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"step-{state['step']:06d}.pt"
    tmp = folder / f".{final.name}.tmp"
    with tmp.open("wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(final)
    for old in sorted(folder.glob("step-*.pt"))[:-2]:
        old.unlink(missing_ok=True)


def resume_from(helper: Path) -> Path | None:
    """The folder the init container resolved and fetched, None when nothing was published."""
    for line in (helper / "resume.env").read_text().splitlines():
        name, _, value = line.partition("=")
        if name == "JOBDISPATCH_RESUME_FROM":
            return Path(value) if value else None
    raise SystemExit(f"{helper}/resume.env names no JOBDISPATCH_RESUME_FROM")


def resolve_with(program: Path, rank: int) -> Path | None:
    """The newest published checkpoint, fetched by the helper ``program`` into a fresh folder
    the caller removes once loaded; None (and no folder left) when nothing was published.
    Rank 0 resolves as its execution: the helper then leaves the "resumed" entry the supervisor
    records; every other rank only reads."""
    env = dict(os.environ)
    if rank != 0:
        env.pop("JOBDISPATCH_SUBMISSION", None)
        env.pop("JOBDISPATCH_EXECUTION", None)
    into = Path(tempfile.mkdtemp(prefix=f"ddp-rank{rank}-"))
    done = subprocess.run(
        [program, "resolve", "--into", str(into), "--debug"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # the helper's own words, where the job's log keeps them
        sys.stderr.write(done.stderr)
        raise SystemExit(f"rank {rank}: {program} resolve exited {done.returncode}")
    found = done.stdout
    if found.strip():
        return into
    shutil.rmtree(into, ignore_errors=True)
    return None


def publish(program: Path, state: dict[str, Any]) -> None:
    """Save ``state`` into a fresh folder and publish it as its step with the helper program."""
    with tempfile.TemporaryDirectory() as folder:
        torch.save(state, Path(folder) / "state.pt")
        subprocess.run([program, "publish", folder, "--step", str(state["step"])], check=True)


def ranks_from_slurm(master: str) -> None:
    """Under srun, give torch.distributed the rank, the world size and a port from Slurm's own
    variables, as torchrun does in a pod (a port per Slurm job: two runs never share one)."""
    if "RANK" in os.environ or "SLURM_PROCID" not in os.environ:
        return
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
    os.environ["MASTER_ADDR"] = master
    os.environ.setdefault("MASTER_PORT", str(20000 + int(os.environ["SLURM_JOB_ID"]) % 20000))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 8, generator=g)
    y = 0.5 * x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(32, 1, generator=g)
    return x, y


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--wait-at", type=int, default=0)
    parser.add_argument("--out", default="/checkpoints")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--allocate-mib", type=int, default=0)
    parser.add_argument("--fail-rank", type=int, default=1)
    parser.add_argument("--peer-wait", type=float, default=30.0)
    parser.add_argument("--helper", type=Path, help="the publish image's shared folder")
    parser.add_argument("--publish-every", type=int, default=3)
    parser.add_argument("--publish-with", type=Path, help="the helper program itself")
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--master-addr", default="127.0.0.1", help="under srun: MASTER_ADDR")
    args = parser.parse_args()

    ranks_from_slurm(args.master_addr)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    submission = os.environ.get("JOBDISPATCH_SUBMISSION", "1")
    attempt = os.environ.get("JOBDISPATCH_ATTEMPT", "0")
    job = Path(args.out) / os.environ.get("JOBDISPATCH_JOB", "standalone")
    mine = job / f"s{submission}-a{attempt}"
    tag = f"[rank {rank}/{world} submission {submission}]"

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    program: Path | None = args.publish_with
    if args.helper is not None:
        program = args.helper / "helper" / "bin" / "jobdispatch-publish"  # the pod's copy
    if args.publish_with is not None:
        source = resolve_with(args.publish_with, rank)
    else:
        source = resume_from(args.helper) if args.helper else latest(job, mine)
    if source is not None:
        state = torch.load(source / "state.pt" if program else source)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])
        print(f"{tag} resuming from step {start} ({source})", flush=True)
        if args.publish_with is not None:  # a fetched copy of this rank's own: loaded, done
            shutil.rmtree(source, ignore_errors=True)
    ddp = nn.parallel.DistributedDataParallel(model)

    loss_value = float("nan")
    for step in range(start, args.steps):
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        loss_value = total.item() / world
        if rank == 0:
            state = {"step": step + 1, "model": model.state_dict(), "opt": opt.state_dict()}
            if program is None:
                save(mine, state)
            elif (step + 1) % args.publish_every == 0:
                publish(program, state)
            print(f"{tag} step {step + 1} loss {loss_value:.6f}", flush=True)
        if rank == args.fail_rank and args.allocate_mib:
            print(f"{tag} allocating {args.allocate_mib} MiB", flush=True)
            hog = bytearray(args.allocate_mib << 20)
            for i in range(0, len(hog), 4096):
                hog[i] = 1
        if rank == args.fail_rank and args.exit_code:
            print(f"{tag} exiting {args.exit_code}", flush=True)
            sys.exit(args.exit_code)
        if rank != args.fail_rank and (args.exit_code or args.allocate_mib):
            # The failing rank's pod ends first, seconds apart, so its failure is the
            # earliest: the peers would otherwise fail in the same second at the barrier.
            time.sleep(args.peer_wait)
        time.sleep(args.step_seconds)
        dist.barrier()  # the checkpoint of this step is on disk before anyone waits or ends
        if step + 1 == args.wait_at and submission == "1":
            print(f"{tag} step {step + 1}: waiting to be preempted", flush=True)
            while True:
                time.sleep(1)
    if rank == 0:
        result = {"final_loss": loss_value, "resumed_from": start, "steps": args.steps}
        job.mkdir(parents=True, exist_ok=True)
        (job / f"result-s{submission}-a{attempt}.json").write_text(json.dumps(result))
        print(f"{tag} done: final loss {loss_value!r}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
