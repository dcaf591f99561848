"""``jobdispatch --help``, ``--version`` and shell completion start without the core.

Each starts a fresh interpreter (completion on every Tab), so each import is paid every time:
they must import click and the command's own entry module, and nothing of the core, the
subcommands, rich or the plugins. The help they print from the command index must be the help
the loaded commands print. Each check runs in a fresh interpreter, since this one has imported
everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from jobdispatch_cli.lazygroup import INDEX_FILE, index_text
from jobdispatch_cli.main import cli

#: Runs ``main`` with ``argv`` and the environment given, then prints the top-level modules
#: outside the standard library that it imported, and whether any subcommand module loaded.
PROBE = textwrap.dedent(
    """
    import json, os, sys
    from jobdispatch_cli.main import main
    os.environ.update(json.loads(sys.argv[2]))
    try:
        main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
    sys.stdout.flush()
    outside = set(sys.stdlib_module_names) | {"__main__"}
    print(json.dumps({
        "code": code,
        "imported": sorted({m.split(".")[0] for m in sys.modules} - outside),
        "commands": sorted(m for m in sys.modules if m.startswith("jobdispatch_cli.commands")),
    }), file=sys.stderr)
    """
)

COMPLETE = {"_JOBDISPATCH_COMPLETE": "bash_complete", "COMP_CWORD": "1"}


def _probe(argv: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(env or {})],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    report["out"] = done.stdout
    return report


def test_the_command_index_is_current() -> None:
    assert INDEX_FILE.read_text(encoding="utf-8") == index_text(cli), (
        "stale: run python -m jobdispatch_cli.lazygroup"
    )


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--help"], {}),
        (["-h"], {}),
        (["--version"], {}),
        ([], {**COMPLETE, "COMP_WORDS": "jobdispatch s"}),
        ([], {**COMPLETE, "COMP_WORDS": "jobdispatch --c"}),
    ],
    ids=["help", "h", "version", "complete-command", "complete-option"],
)
def test_starting_imports_only_click(argv: list[str], env: dict[str, str]) -> None:
    report = _probe(argv, env)
    assert report["code"] in (0, None), report
    assert report["imported"] == ["click", "jobdispatch_cli"], report["imported"]
    assert report["commands"] == [], report["commands"]
    assert report["out"], "printed nothing"


def test_the_help_from_the_index_is_the_commands_help() -> None:
    """The top-level help and the completion of every command name, at several widths,
    before the commands are imported and after."""
    code = textwrap.dedent(
        """
        import json
        from click.shell_completion import ShellComplete
        from click.testing import CliRunner
        from jobdispatch_cli.main import cli

        def seen():
            runner = CliRunner()
            helps = [
                runner.invoke(cli, ["--help"], prog_name="jobdispatch", terminal_width=w).output
                for w in (40, 60, 80, 100)
            ]
            complete = ShellComplete(cli, {}, "jobdispatch", "_JOBDISPATCH_COMPLETE")
            items = [(i.value, i.help) for i in complete.get_completions([], "")]
            return helps, items

        before = seen()
        cli.commands
        print(json.dumps({"before": before, "after": seen()}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["before"] == report["after"]
    assert len(report["after"][1]) >= 20, report["after"][1]
