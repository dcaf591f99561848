"""The ``jobdispatch`` command: the group, its global options, and the error-to-exit-code
boundary. Subcommands live in the modules under ``jobdispatch_cli.commands``.

This module imports nothing of the core at the top: ``--help``, ``--version`` and shell
completion run it and need only click (see :mod:`jobdispatch_cli.lazygroup`), so the core and
the subcommands are imported where a command actually runs.
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from jobdispatch_cli.__about__ import __version__
from jobdispatch_cli.lazygroup import LazyGroup

__all__ = ["cli", "main"]

#: The exit codes are the core's table (jobdispatch.exitcodes), written out here so that
#: ``--help`` imports nothing of the core; a test holds the two equal.
EPILOG = """\b
Exit codes (shared with jobdispatch-publish):
  0  done
  1  failed: run's job failed or was cancelled; the helper's own error
  2  bad usage or input: an option, a file, a variable or a value
  3  not found (the helper: nothing published, with --require)
  4  refused: unsupported, rejected, read-only, or failed the probe
  5  unreachable or unavailable, or a full disk; try again
  6  unauthorized: credentials or permissions missing or refused
  7  conflict: the record moved, or the step was published first
  8  unreadable: stored data damaged, or from a newer version
130  interrupted (run: the job goes on, unsupervised)

\b
A JOB is its id, a unique prefix of it, or its name. The global options
(--cluster, --store, --config, --as) may also follow the subcommand.
"""


def default_actor() -> str:
    """The OS user, which is who acts unless ``--as`` says otherwise."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"


def _actor(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--as``, checked as the core checks every actor's id, while the options are read
    (not while completing a word, which must not wait for the core)."""
    if ctx.resilient_parsing:
        return value
    from jobdispatch.types import actor_id_problem

    why = actor_id_problem(value)
    if why is not None:
        raise click.BadParameter(f"{why}: {value!r}")
    return value


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.option(
    "--cluster",
    envvar="JOBDISPATCH_CLUSTER",
    metavar="NAME",
    help="A cluster named in the config file (default: its default_cluster, else local).",
)
@click.option(
    "--store",
    envvar="JOBDISPATCH_STORE",
    metavar="DIR|URL",
    help=(
        "The records' LMDB directory (default: $XDG_STATE_HOME/jobdispatch/records/CLUSTER), "
        "or a shared PostgreSQL store, postgresql://USER@HOST[:PORT]/DB."
    ),
)
@click.option(
    "--config",
    "config_path",
    envvar="JOBDISPATCH_CONFIG",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The config file (default: $XDG_CONFIG_HOME/jobdispatch/config.toml).",
)
@click.option(
    "--as",
    "actor",
    default=default_actor,
    callback=_actor,
    show_default="the OS user",
    metavar="NAME",
    help="Who acts: recorded with every action, as given (declared, not authenticated).",
)
@click.version_option(__version__, "--version", prog_name="jobdispatch")
@click.pass_context
def cli(
    ctx: click.Context,
    cluster: str | None,
    store: str | None,
    config_path: Path | None,
    actor: str,
) -> None:
    """Submit and supervise multi-node training jobs; see why every execution ended.

    A job file (TOML or YAML) says what to run and how to recover it. `jobdispatch run FILE`
    submits it and supervises it here until it has an outcome; `submit` records it for a
    `supervise` process to launch.
    """
    from jobdispatch_cli.context import App

    app = App(config_path=config_path, cluster=cluster, store=store, actor=actor)
    ctx.obj = app
    ctx.call_on_close(app.close)


#: The group's options a subcommand takes too, and the App attribute each sets.
_GLOBAL = {"cluster": "cluster_name", "store": "store_option", "config_path": "config_path"}
_GLOBAL_ACTOR = "actor"


def _set_later(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """A callback that sets ``attr`` of the App, for a global option given after the
    subcommand: it wins over the same option given before it, as the later word should."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None:
            return
        from jobdispatch_cli.context import App

        app = ctx.find_object(App)
        assert app is not None  # the group's callback made it
        setattr(app, attr, value)

    return callback


def _accept_global_options_after(command: click.Command) -> None:
    """``jobdispatch status JOB --store X`` as well as ``jobdispatch --store X status JOB``:
    the group's options, copied onto each subcommand (hidden from its help, told once in the
    group's), with no default so that only a given one changes anything."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_global_options_after(sub)
        return
    for param in cli.params:
        if not isinstance(param, click.Option) or param.name is None:
            continue
        if param.name == _GLOBAL_ACTOR:
            attr = "actor_name"
        elif param.name in _GLOBAL:
            attr = _GLOBAL[param.name]
        else:
            continue
        command.params.append(
            click.Option(
                param.opts,
                type=param.type,
                metavar=param.metavar,
                help=param.help,
                hidden=True,
                expose_value=False,
                callback=_set_later(attr),
            )
        )


def _register(group: click.Group) -> None:
    """Add the subcommands: called by the group the first time a command is needed."""
    from jobdispatch_cli.commands import (
        control,
        dashboard,
        goodput,
        inspect,
        local,
        observe,
        running,
        store,
    )

    for module in (running, inspect, control, goodput, local, store, observe, dashboard):
        module.register(group)
    for command in group.commands.values():
        _accept_global_options_after(command)


cli.load_with(_register)


def main(argv: list[str] | None = None) -> None:
    """Run the command and exit with a code that says how it went (:mod:`jobdispatch.exitcodes`)."""
    try:
        result = cli.main(args=argv, prog_name="jobdispatch", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        from jobdispatch.exitcodes import ExitCode

        exc.show()
        sys.exit(ExitCode.USAGE if exc.exit_code == 2 else exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        from jobdispatch.exitcodes import ExitCode

        from jobdispatch_cli.terminal import terminal

        terminal(stderr=True).print("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as exc:
        from jobdispatch.errors import DispatchError
        from jobdispatch.exitcodes import ExitCode, code_for

        from jobdispatch_cli.terminal import terminal

        if not isinstance(exc, DispatchError):
            raise
        # Never wrapped: an error names a file and line that people copy and grep.
        terminal(stderr=True).print(
            str(exc), style="red", markup=False, highlight=False, soft_wrap=True
        )
        sys.exit(code_for(exc, otherwise=ExitCode.USAGE))
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
