"""The ``jobdispatch-publish`` command, run inside job containers.

Start-up cost matters here (it runs before and beside training, in every container), so this
module imports the standard library and the core's exit-code table (itself standard library
only); each command imports what it needs when it runs, and ``--help`` never loads boto3.
argparse rather than click: one dependency fewer in every image.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jobdispatch.exitcodes import summary

__all__ = ["main"]

PROG = "jobdispatch-publish"

#: The exit codes are the core's table (:mod:`jobdispatch.exitcodes`).
EPILOG = """\
environment:
  JOBDISPATCH_JOB               the job id (set by the adapters)
  JOBDISPATCH_SUBMISSION        the submission number, 1, 2, ...
  JOBDISPATCH_EXECUTION         the execution's identity within the submission
  JOBDISPATCH_CHECKPOINT_ROOT   a path, or s3://bucket/prefix
  JOBDISPATCH_PUBLISH_CONFIG    a configuration file (JSON or .toml): S3 settings, proxy,
                                credential sources, [progress] interval
  JOBDISPATCH_PROGRESS_INTERVAL seconds between two progress marks (default 60)
  JOBDISPATCH_PROGRESS_STATE    the file progress keeps its throttle in (default: one per
                                execution in $XDG_RUNTIME_DIR or the temporary folder)
  flags override the variables.

exit codes (shared with jobdispatch):
{codes}
watch stops with the code of a failure no retry can mend (2, 4, 6, 10) and retries the rest.
"""


def _size(text: str) -> int:
    """A byte count such as ``50M``, ``1G`` or ``1048576``."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
    text = text.strip().lower().removesuffix("b").removesuffix("i")
    factor = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        value = int(float(number) * factor)
    except ValueError:
        msg = f"{text!r} is not a size (e.g. 50M, 1G)"
        raise argparse.ArgumentTypeError(msg) from None
    if value <= 0:
        msg = "must be positive"
        raise argparse.ArgumentTypeError(msg)
    return value


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", help="checkpoint root (default: $JOBDISPATCH_CHECKPOINT_ROOT)")
    common.add_argument(
        "--config", help="configuration file (default: $JOBDISPATCH_PUBLISH_CONFIG)"
    )
    common.add_argument("--job", help="job id (default: $JOBDISPATCH_JOB)")
    common.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    common.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")

    execution = argparse.ArgumentParser(add_help=False)
    execution.add_argument(
        "--submission", help="submission number (default: $JOBDISPATCH_SUBMISSION)"
    )
    execution.add_argument(
        "--execution", help="execution identity (default: $JOBDISPATCH_EXECUTION)"
    )
    writer = argparse.ArgumentParser(add_help=False, parents=[execution])
    writer.add_argument("--max-bandwidth", type=_size, help="limit transfers, bytes/s (e.g. 200M)")

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Publish and resolve a dispatch job's checkpoints.",
        epilog=EPILOG.format(codes=summary(PROG)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "resolve",
        parents=[common, execution],
        help="print (and fetch) the newest published checkpoint, to resume from",
        description="Print the folder to resume from: the newest published checkpoint of the job, "
        "over all its executions, after checking the size and digest of every file. With --into "
        "a private copy is fetched (S3) or copied (POSIX; a reflink where the file system has "
        "them) into an empty folder. Prints nothing when nothing is published yet; a root that "
        "does not exist is an error (exit 10), never 'nothing published'. With the execution's "
        "identity (the adapters' variables), a create-only 'resumed' entry records which step "
        "this execution resumed from.",
    )
    p.add_argument("--into", type=Path, help="fetch or copy the checkpoint into this folder")
    p.add_argument("--require", action="store_true", help="exit 3 when nothing is published")
    p.add_argument("--json", action="store_true", help="print the entry as JSON")

    p = sub.add_parser(
        "publish",
        parents=[common, writer],
        help="publish one complete save",
        description="Publish the save in FOLDER as STEP: its data, then its entry, create-only.",
    )
    p.add_argument("folder", type=Path, help="the save's folder")
    p.add_argument("--step", required=True, help="the training step the save is of")
    p.add_argument("--json", action="store_true", help="print the entry as JSON")

    p = sub.add_parser(
        "watch",
        parents=[common, writer],
        help="publish each save as training completes it",
        description="Scan SAVES for save folders (named with their step) that contain the marker "
        "file, and publish each once. Runs until SIGTERM or SIGINT, then scans a last time.",
    )
    p.add_argument("saves", type=Path, help="the folder training writes its save folders into")
    p.add_argument("--marker", default="COMPLETE", help="the file training writes last (COMPLETE)")
    p.add_argument(
        "--step-pattern", help="regex whose first group is the step (default: last digits)"
    )
    p.add_argument("--interval", type=float, default=10.0, help="seconds between scans (10)")
    p.add_argument("--once", action="store_true", help="scan once and exit")

    p = sub.add_parser(
        "progress",
        parents=[common, execution],
        help="mark that training reached a step (call it every step: it writes once per interval)",
        description="Mark that this execution reached STEP, for the supervisor's stall rules. "
        "At most one write per interval (60 s unless --interval, $JOBDISPATCH_PROGRESS_INTERVAL "
        "or the configuration's [progress] interval say otherwise), and only when the step "
        "moved; other calls read and rewrite a small local state file and touch no store. "
        "Prints nothing.",
    )
    p.add_argument("--step", required=True, help="the training step reached (0, 1, 2, ...)")
    p.add_argument("--interval", help="seconds between two writes (default 60)")
    p.add_argument(
        "--now", action="store_true", help="write now if the step moved, whatever the interval"
    )
    p.add_argument(
        "--state", help="the throttle's state file (default: $JOBDISPATCH_PROGRESS_STATE)"
    )

    p = sub.add_parser(
        "prune",
        parents=[common],
        help="withdraw old checkpoints and delete their data",
        description="Keep the newest KEEP_LAST checkpoints and every step that is a multiple of "
        "KEEP_EVERY; withdraw the rest and delete their data unless a resolve holds them.",
    )
    p.add_argument("--keep-last", type=int, required=True, help="newest checkpoints kept (>= 1)")
    p.add_argument("--keep-every", type=int, help="also keep steps that are multiples of this")
    p.add_argument(
        "--grace", type=float, default=86400.0, help="age (s) before leftovers go (86400)"
    )
    p.add_argument(
        "--pin-ttl", type=float, default=21600.0, help="age (s) a resolve pin holds (21600)"
    )
    p.add_argument("--dry-run", action="store_true", help="say what would be withdrawn")

    p = sub.add_parser(
        "probe",
        parents=[common],
        help="check the store honours create-only writes, signatures and listing",
        description="Exercise the store under a scratch prefix and refuse it (exit 4) if a "
        "create-only write can overwrite, a wrong secret is accepted, or listings misbehave.",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")

    p = sub.add_parser("list", parents=[common], help="list the job's published checkpoints")
    p.add_argument("--json", action="store_true", help="one JSON entry per line")
    return parser


class _Context:
    """What every command needs, read once from the flags and the environment."""

    def __init__(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        from jobdispatch_publish.config import load_settings
        from jobdispatch_publish.root import root_of

        self.args = args
        self.env = env
        self.settings = load_settings(args.config, env)
        self.root = root_of(self.settings, env, args.root)

    def store(self, *, check: bool = True) -> Any:
        """The store, its root checked unless ``check`` is false (watch checks at every scan,
        so that a store unreachable at the start is retried like one lost later)."""
        from jobdispatch_publish.stores import open_store

        bandwidth = getattr(self.args, "max_bandwidth", None)
        store = open_store(self.root, self.settings, self.env, max_bandwidth=bandwidth)
        if check:
            store.check_root()
        return store

    def job(self) -> str:
        from jobdispatch_publish.identity import job_from

        return job_from(self.env, self.args.job)

    def identity(self) -> Any:
        from jobdispatch_publish.identity import identity_from

        a = self.args
        return identity_from(self.env, job=a.job, submission=a.submission, execution=a.execution)

    def resuming(self, job: str) -> Any:
        """The execution a resolve resumes, to name in its ``resumed`` entry; ``None`` (with a
        note) when the submission or execution is not given, as when a person resolves by hand.
        A value that is given but wrong is refused, as for any command."""
        from jobdispatch_publish.identity import ENV_EXECUTION, ENV_SUBMISSION, identity_from

        a = self.args
        missing = [
            var
            for var, flag in ((ENV_SUBMISSION, a.submission), (ENV_EXECUTION, a.execution))
            if flag is None and var not in self.env
        ]
        if missing:
            logging.getLogger(PROG).info(
                "no resumed entry written: %s not set", " and ".join(missing)
            )
            return None
        return identity_from(self.env, job=job, submission=a.submission, execution=a.execution)


def _entry_doc(entry: Any, path: Path | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(entry.to_json())
    if path is not None:
        doc["path"] = str(path)
    return doc


def cmd_resolve(ctx: _Context) -> int:
    from jobdispatch_publish.errors import NothingPublished
    from jobdispatch_publish.resolve import resolve

    job = ctx.job()
    found = resolve(ctx.store(), job, into=ctx.args.into, identity=ctx.resuming(job))
    if found is None:
        if ctx.args.require:
            msg = f"job {job} has no published checkpoint under {ctx.root}"
            raise NothingPublished(msg)
        print(f"{PROG}: job {job} has no published checkpoint yet; start fresh", file=sys.stderr)
        return 0
    if ctx.args.json:
        doc = {**_entry_doc(found.entry, found.path), "checked": found.checked}
        print(json.dumps(doc, sort_keys=True))
    else:
        print(found.path)
    logging.getLogger(PROG).info("resolved %s", found.entry.describe())
    return 0


def cmd_publish(ctx: _Context) -> int:
    from jobdispatch_publish.marks import parse_step
    from jobdispatch_publish.publish import publish

    step = parse_step(ctx.args.step)
    identity = ctx.identity()
    store = ctx.store()
    result = publish(store, identity, ctx.args.folder, step)
    if ctx.args.json:
        print(json.dumps({**_entry_doc(result.entry), "written": result.written}, sort_keys=True))
    else:
        verb = "published" if result.written else "already published"
        print(f"{verb} step {result.entry.step} ({identity})")
    return 0


def cmd_watch(ctx: _Context) -> int:
    from jobdispatch_publish.watch import Watcher

    identity = ctx.identity()
    store = ctx.store(check=False)
    log = logging.getLogger(PROG)

    def announce(entry: Any) -> None:
        print(f"published step {entry.step}", flush=True)

    watcher = Watcher(
        store,
        identity,
        ctx.args.saves,
        marker=ctx.args.marker,
        step_pattern=ctx.args.step_pattern,
        interval=ctx.args.interval,
        on_published=announce,
    )
    try:
        if ctx.args.once:
            watcher.scan()
            return 0
        watcher_loop(watcher, log, ctx.args)
    except Exception:
        print(f"{PROG}: watch gave up: retrying cannot mend this failure", file=sys.stderr)
        raise
    return 0


def watcher_loop(watcher: Any, log: logging.Logger, args: argparse.Namespace) -> None:
    """Run the watcher until SIGTERM or SIGINT (then a last scan)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s: finishing the current scan, then a last one", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("watching %s for saves marked %s", args.saves, args.marker)
    watcher.run(stop)


def cmd_progress(ctx: _Context) -> int:
    """Decide from the local state file whether a mark is due, and only then open the store
    (an S3 client, credentials): a call that is not due costs no request and no boto3 import."""
    import datetime as dt

    from jobdispatch_publish.marks import Marker, StateFile, interval_from, parse_step

    a = ctx.args
    step = parse_step(a.step)
    interval = interval_from(ctx.env, ctx.settings, a.interval)
    identity = ctx.identity()
    path = Path(a.state) if a.state else StateFile.default_path(ctx.env, str(ctx.root), identity)
    state_file = StateFile(path, StateFile.owner_of(str(ctx.root), identity))
    state = state_file.lock()
    log = logging.getLogger(PROG)
    if state is None:
        log.info("step %d not marked: another progress call is marking right now", step)
        return 0
    try:
        now = dt.datetime.now(dt.UTC).timestamp()
        if not a.now and not state.due(now, step, interval):
            if step != state.last_step:
                state.pending = step
                state_file.save(state)
            log.info("step %d not marked: the last mark is younger than %g s", step, interval)
            return 0
        marker = Marker(
            ctx.store(check=False), identity, interval=interval, state=state, raise_healable=True
        )
        try:
            if a.now:
                state.pending = step
                written = marker.flush()
            else:
                written = marker.mark(step)
        finally:
            state_file.save(state)
        log.info("step %d %s", step, "marked" if written else "not marked")
        return 0
    finally:
        state_file.unlock()


def cmd_prune(ctx: _Context) -> int:
    from jobdispatch_publish.prune import prune

    a = ctx.args
    report = prune(
        ctx.store(),
        ctx.job(),
        keep_last=a.keep_last,
        keep_every=a.keep_every,
        pin_ttl=a.pin_ttl,
        grace=a.grace,
        dry_run=a.dry_run,
    )
    would = "would withdraw" if a.dry_run else "withdrew"
    print(f"{would} {len(report.withdrawn)}: {_steps(report.withdrawn)}")
    if not a.dry_run:
        print(f"deleted the data of {len(report.deleted)}: {_steps(report.deleted)}")
        if report.held:
            print(f"held by a resolve in progress: {_steps(report.held)}")
        print(f"removed {report.orphans} orphaned folders, {report.unfinished} unfinished writes")
    print(f"kept {len(report.kept)}: {_steps(report.kept)}")
    return 0


def _steps(steps: Sequence[int]) -> str:
    shown = ", ".join(map(str, steps[:20]))
    return shown + (f", ... ({len(steps) - 20} more)" if len(steps) > 20 else "") if steps else "-"


def cmd_probe(ctx: _Context) -> int:
    from jobdispatch_publish.errors import StoreRefused
    from jobdispatch_publish.probe import probe
    from jobdispatch_publish.root import S3Root
    from jobdispatch_publish.stores import wrong_secret_store

    store = ctx.store()
    wrong = (
        wrong_secret_store(ctx.root, ctx.settings, ctx.env)
        if isinstance(ctx.root, S3Root)
        else None
    )
    checks = probe(store, signed_wrongly=wrong)
    if ctx.args.json:
        print(json.dumps([{"check": c.name, "ok": c.ok, "detail": c.detail} for c in checks]))
    else:
        for c in checks:
            mark = {True: "ok", False: "FAIL", None: "n/a"}[c.ok]
            print(f"{mark:<5} {c.name:<18} {c.detail}")
    failed = [c for c in checks if c.ok is False]
    if failed:
        names = ", ".join(c.name for c in failed)
        msg = f"store {ctx.root} cannot keep checkpoints isolated: {names} failed"
        raise StoreRefused(msg)
    return 0


def cmd_list(ctx: _Context) -> int:
    from jobdispatch.exitcodes import ExitCode

    from jobdispatch_publish import layout
    from jobdispatch_publish.resolve import Damaged, entries

    store = ctx.store()
    job = ctx.job()
    withdrawn = {layout.step_of_marker(k) for k in store.keys(layout.pruned_prefix(job))}
    damaged: list[Damaged] = []
    for e in entries(store, job):
        if isinstance(e, Damaged):
            # Shown in its place, marked, and the command ends 8: the other steps stay visible.
            damaged.append(e)
            if ctx.args.json:
                doc = {"step": e.step, "state": "damaged", "problem": e.error.message}
                print(json.dumps(doc, sort_keys=True))
            else:
                print(f"{e.step:>12}  {'damaged':<9}  {e.error.message}")
            continue
        state = "withdrawn" if e.step in withdrawn else "published"
        if ctx.args.json:
            print(json.dumps({**_entry_doc(e), "state": state}, sort_keys=True))
        else:
            print(
                f"{e.step:>12}  {state:<9}  sub {e.submission:<3} exec {e.execution:<8} "
                f"{e.size:>14} B  {e.published_at}"
            )
    if damaged:
        for d in damaged:
            _report(d.error)
        return int(ExitCode.UNREADABLE)
    return 0


COMMANDS = {
    "resolve": cmd_resolve,
    "publish": cmd_publish,
    "watch": cmd_watch,
    "progress": cmd_progress,
    "prune": cmd_prune,
    "probe": cmd_probe,
    "list": cmd_list,
}


def _report(exc: BaseException) -> None:
    from jobdispatch.errors import ValidationError

    if isinstance(exc, ValidationError) and len(exc.problems) > 1:
        lead = f"{exc.subject}: " if exc.subject else ""
        print(f"{PROG}: invalid: {lead}{len(exc.problems)} problems", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
    else:
        print(f"{PROG}: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the command; returns the exit code (see the epilog)."""
    parser = _parser()
    args = parser.parse_args(argv)
    from jobdispatch.exitcodes import ExitCode

    if args.version:
        from jobdispatch_publish.__about__ import __version__

        print(f"{PROG} {__version__}")
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format=f"{PROG}: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3", "hvac"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        ctx = _Context(args, os.environ if env is None else env)
        return COMMANDS[args.command](ctx)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except OSError as exc:
        # A POSIX root's own failures: a permission, a full or read-only file system.
        from jobdispatch_publish.errors import exit_code_for

        where = f": {exc.filename}" if exc.filename else ""
        print(f"{PROG}: file system error: {exc.strerror or exc}{where}", file=sys.stderr)
        return int(exit_code_for(exc))
    except Exception as exc:
        from jobdispatch.errors import DispatchError

        from jobdispatch_publish.errors import exit_code_for

        if isinstance(exc, DispatchError):
            _report(exc)
            return int(exit_code_for(exc))
        if args.debug:
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return int(ExitCode.FAILED)


def run() -> None:
    sys.exit(main())
