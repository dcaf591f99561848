"""Every check this repository runs, as nox sessions.

``./dev test`` runs the default sessions inside the workspace environment that ``tools/bootstrap``
built from ``uv.lock``; sessions reuse that environment instead of building their own, so a full
run costs what the checks cost and nothing more. ``./dev nox -l`` lists them all.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "none"
nox.options.error_on_external_run = False
nox.options.sessions = ["lint", "typecheck", "tests", "integration", "docs", "sim", "mutants"]


def _members() -> dict[str, Path]:
    """Map each workspace member's short name (its folder) to its folder."""
    found: dict[str, Path] = {}
    for pattern in (
        "packages/*/pyproject.toml",
        "plugins/*/pyproject.toml",
        "conformance/pyproject.toml",
        "tools/sim/pyproject.toml",
    ):
        for pyproject in sorted(ROOT.glob(pattern)):
            found[pyproject.parent.name] = pyproject.parent
    return found


MEMBERS = _members()
STRICT = ["core", "supervise"]


@nox.session
@nox.parametrize("package", list(MEMBERS))
def tests(session: nox.Session, package: str) -> None:
    """Run one member's own tests (those beside its source)."""
    tests_dir = MEMBERS[package] / "tests"
    if not tests_dir.is_dir():
        session.error(f"{package} has no tests/ folder")
    session.run("pytest", str(tests_dir), *session.posargs)


@nox.session
def integration(session: nox.Session) -> None:
    """Cross-package and whole-repo tests under tests/."""
    session.run("pytest", "tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff's lint and format check over the whole tree."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over every member's source, strict on core and supervise (pyproject.toml says how)."""
    for name, path in MEMBERS.items():
        packages = [p.name for p in (path / "src").iterdir() if (p / "__init__.py").exists()]
        session.log(f"mypy: {name}")
        session.run("mypy", *(arg for p in packages for arg in ("-p", p)))


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into site/ with mkdocs in strict mode: any warning fails.

    The docs tools are a dependency group of their own (not in every environment), so they are
    added here without removing anything (``--inexact``); a later bootstrap drops them again.
    """
    uv = os.environ.get("UV") or shutil.which("uv") or str(ROOT / ".bootstrap" / "bin" / "uv")
    session.run(uv, "sync", "--quiet", "--frozen", "--inexact", "--all-packages", "--group", "docs")
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", "site", env={"NO_MKDOCS_2_WARNING": "1"}
    )


@nox.session
def sim(session: nox.Session) -> None:
    """The deterministic simulator (spec 0005): its lint of the simulated path, 2,000 seeds, then
    every seed that ever failed (tools/sim/regressions.txt).

    ``-- --seeds 100000`` runs long (``--start N`` from another first seed); ``-- --seed N
    [--mutant M]`` replays one seed and prints its whole trace. Given arguments, only they run.
    """
    session.run(sys.executable, "-m", "jobdispatch_sim.lint")
    if session.posargs:
        session.run(sys.executable, "-m", "jobdispatch_sim", *session.posargs)
        return
    session.run(sys.executable, "-m", "jobdispatch_sim", "--seeds", "2000")
    regressions = ROOT / "tools" / "sim" / "regressions.txt"
    session.run(sys.executable, "-m", "jobdispatch_sim", "--seed-file", str(regressions))


@nox.session
def mutants(session: nox.Session) -> None:
    """Every simulator mutant (one protection reverted each) is caught within 500 seeds."""
    session.run(sys.executable, "-m", "jobdispatch_sim", "mutants", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: each prints a table of measurements beside a baseline taken in the same run."""
    scripts = sorted(ROOT.glob("*/*/bench/bench_*.py"))
    scripts += sorted(ROOT.glob("tools/bench/bench_*.py"))
    if not scripts:
        session.skip("no benchmarks yet")
    for script in scripts:
        session.run(sys.executable, str(script), *session.posargs, env={"PYTHONHASHSEED": "0"})


@nox.session
def build(session: nox.Session) -> None:
    """Build every member's sdist and wheel into dist/."""
    out = ROOT / "dist"
    for path in MEMBERS.values():
        session.run("uv", "build", "--quiet", "--out-dir", str(out), str(path))


if os.environ.get("NOX_DEBUG_MEMBERS"):
    print(MEMBERS)
