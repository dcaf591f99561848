"""Every check this repository runs, as nox sessions.

``./dev test`` runs the default sessions inside the workspace environment that ``tools/bootstrap``
built from ``uv.lock``; sessions reuse that environment instead of building their own, so a full
run costs what the checks cost and nothing more. ``./dev nox -l`` lists them all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "none"
nox.options.error_on_external_run = False
# What ./dev test (and so CI) runs. python, lowest and build add about 16 minutes to a run of
# 10-15, well inside CI's 90: measured on the shared 2-core machine at load 10-20, python 3.12
# 4m37s and 3.13 4m11s (679 tests each), lowest 5m18s (822 tests), build 2m09s.
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "integration",
    "docs",
    "sim",
    "mutants",
    "python",
    "lowest",
    "build",
]


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
#: The interpreter behind the workspace environment (fresh environments are made from it, not
#: from .venv's own python, which is a link into one).
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


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
    """mypy, strict (pyproject.toml), over every member's source, its tests and the
    cross-package tests under tests/."""
    config = ("--config-file", str(ROOT / "pyproject.toml"))
    cache = ("--cache-dir", str(ROOT / ".mypy_cache"))
    for name, path in MEMBERS.items():
        packages = [p.name for p in (path / "src").iterdir() if (p / "__init__.py").exists()]
        session.log(f"mypy: {name}")
        session.run("mypy", *config, *cache, *(arg for p in packages for arg in ("-p", p)))
    for name, path in MEMBERS.items():
        tests = path / "tests"
        session.log(f"mypy: {name}'s tests")
        with session.chdir(path):
            session.run("mypy", *config, *cache, "tests", env=_tests_search_path(tests))
    # The cross-package tests, which import their helpers by name; tests/repo has a conftest
    # of its own, so it is checked apart.
    session.log("mypy: the cross-package tests")
    with session.chdir(ROOT):
        tests = ROOT / "tests"
        session.run(
            "mypy", *config, *cache, "tests", "--exclude", "tests/repo/",
            env={"MYPYPATH": str(tests)},
        )  # fmt: skip
        session.run("mypy", *config, *cache, "tests/repo", env={"MYPYPATH": str(tests / "repo")})


def _tests_search_path(tests: Path) -> dict[str, str]:
    """Where mypy finds what a member's tests import from beside them, as pytest does.

    Tests whose conftest puts their folder on ``sys.path`` import their helpers by name
    (``from publish_helpers import ...``): that folder is mypy's search path too. The others
    import from their conftest relatively (``from .conftest import ...``), which mypy resolves
    from the member's folder, where ``tests`` is a namespace package.
    """
    conftest = tests / "conftest.py"
    on_path = conftest.is_file() and "sys.path.insert(0, str(Path(__file__).parent))" in (
        conftest.read_text(encoding="utf-8")
    )
    return {"MYPYPATH": str(tests)} if on_path else {}


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into site/ with mkdocs in strict mode: any warning fails.

    The docs tools are a dependency group of their own (not in every environment), so they are
    added here without removing anything (``--inexact``); a later bootstrap drops them again.
    """
    session.run(
        _uv(), "sync", "--quiet", "--frozen", "--inexact", "--all-packages", "--group", "docs"
    )
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
    """Every simulator mutant (one protection reverted each) is caught within 1,000 seeds."""
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


def _uv() -> str:
    """The uv the bootstrap installed, unless one is named or on the PATH."""
    return os.environ.get("UV") or shutil.which("uv") or str(ROOT / ".bootstrap" / "bin" / "uv")


#: The Pythons CI tests: the workspace environment's own (3.11, the oldest supported) and these,
#: each in an environment of its own synced from the same uv.lock. The classifiers name the same.
PYTHONS = ["3.12", "3.13"]
#: The suites each extra Python runs; the rest depend on nothing version-specific beyond these.
PYTHON_SUITES = ["core", "supervise", "cli", "records-lmdb", "local", "conformance"]


def _interpreter(session: nox.Session, version: str) -> str:
    """A real interpreter of ``version`` already on this machine; uv never downloads one.

    ``JOBDISPATCH_PYTHON_<MAJOR>_<MINOR>`` names one explicitly; otherwise pyenv's versions and
    then the PATH are searched (a pyenv shim is resolved to the binary behind it).
    """
    variable = f"JOBDISPATCH_PYTHON_{version.replace('.', '_')}"
    named = os.environ.get(variable)
    candidates = [named] if named else []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob(f"{version}.*/bin/python{version}"))]
    candidates += [shutil.which(f"python{version}") or ""]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.executable); print(sys.version[:5])"],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = probe.stdout.splitlines()
        if probe.returncode == 0 and len(lines) == 2 and lines[1].startswith(f"{version}."):
            return lines[0]
    session.error(f"no Python {version} on this machine (name one in {variable})")
    raise AssertionError  # session.error raises; this line tells type checkers so


def _fresh_project_env(session: nox.Session, name: str, python: str) -> Path:
    """Sync the workspace into .nox/NAME for ``python`` from uv.lock as it is, apart from .venv,
    and return its bin/."""
    env = ROOT / ".nox" / name
    session.run(
        _uv(),
        "sync",
        "--quiet",
        "--all-packages",
        "--python",
        python,
        "--frozen",
        env={"UV_PROJECT_ENVIRONMENT": str(env), "UV_PYTHON_DOWNLOADS": "never"},
    )
    return env / "bin"


@nox.session
@nox.parametrize("version", PYTHONS)
def python(session: nox.Session, version: str) -> None:
    """The unit suites on another Python, in its own environment synced from uv.lock."""
    bin_dir = _fresh_project_env(session, f"py{version}", _interpreter(session, version))
    suites = [str(MEMBERS[p] / "tests") for p in PYTHON_SUITES]
    session.run(str(bin_dir / "pytest"), "-q", "-p", "no:cacheprovider", *suites, *session.posargs)


@nox.session
def lowest(session: nox.Session) -> None:
    """Every member's own tests with each declared floor installed exactly.

    The floors in the pyproject files are promises to users who share an environment with
    other software; this resolves them (uv's ``lowest-direct``) into an environment of its
    own, leaving uv.lock and .venv alone, and runs the suites there. Every floor a member
    declares, in its dependencies and in its extras, is named as a direct requirement: uv takes
    the requirements of an extra reached through the dev group as indirect and would resolve
    them to the newest (boto3, hvac and requests did). After the install, each declared floor
    must be the version installed, or the session fails before any test runs.
    """
    env = ROOT / ".nox" / "lowest"
    shutil.rmtree(env, ignore_errors=True)  # uv pip keeps what satisfies: start empty
    uv_env = {"UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(env)}
    session.run(_uv(), "venv", "--quiet", "--python", BASE_PYTHON, str(env), env=uv_env)
    editable = [arg for path in MEMBERS.values() for arg in ("-e", str(path))]
    declared = floors()
    # The dev group's own floor of a package a member declares (pytest) would hide the member's.
    dev = [
        r
        for r in [*_root_group("dev"), *_members_dev()]
        if not r.startswith(("mypy", "ruff", "nox", "types-"))
        and canonicalize_name(Requirement(r).name) not in declared
    ]
    session.run(
        _uv(),
        "pip",
        "install",
        "--quiet",
        "--resolution",
        "lowest-direct",
        *editable,
        *dev,
        *(f"{name}>={version}" for name, version in sorted(declared.items())),
        env=uv_env,
    )
    listed = json.loads(
        str(session.run(str(env / "bin" / "python"), "-c", _VERSIONS, silent=True, log=False))
    )
    installed = listed["versions"]
    for name, version in sorted(declared.items()):
        session.log(f"floor {name}>={version}: installed {installed.get(name, 'nothing')}")
    wrong, above = floor_mismatches(declared, installed, listed["raised"])
    for line in above:
        session.warn(f"not tested at its floor, {line} in this one environment")
    if wrong:
        session.error("declared floors not installed: " + "; ".join(wrong))
    suites = [p / "tests" for name, p in MEMBERS.items() if name != "sim"]
    _without_clusters(session, env, suites)


def _without_clusters(session: nox.Session, env: Path, suites: list[Path]) -> None:
    """Run ``suites`` with the pytest of ``env``, leaving out the real-cluster Slurm and
    Kubernetes tests: they take minutes and test the cluster, not the Python packages; the
    tests sessions run them in the workspace environment."""
    session.run(
        str(env / "bin" / "pytest"),
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slurm and not kube",
        *map(str, suites),
        *session.posargs,
    )


#: Prints, as JSON, every installed distribution's version, and the floors (>=) the installed
#: distributions' own requirements set (uv pip list adds a line to stderr, which nox's captured
#: output would mix in; this environment's packaging reads the requirements).
_VERSIONS = """
import json, importlib.metadata as m
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as c
versions, raised = {}, {}
for d in m.distributions():
    versions[c(d.metadata["Name"])] = d.version
    for text in d.requires or []:
        r = Requirement(text)
        if r.marker is not None and not r.marker.evaluate({"extra": ""}):
            continue
        for s in r.specifier:
            if s.operator == ">=":
                raised.setdefault(c(r.name), []).append([s.version, d.metadata["Name"]])
print(json.dumps({"versions": versions, "raised": raised}))
"""


def floors() -> dict[str, str]:
    """Every third-party requirement the members declare, in their dependencies and in every
    extra, as its name and its floor (the highest, when several members declare one)."""
    found: dict[str, str] = {}
    for path in MEMBERS.values():
        with (path / "pyproject.toml").open("rb") as f:
            project = tomllib.load(f)["project"]
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for text in requirements:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            if name.startswith("jobdispatch"):
                continue  # the members themselves: installed from the checkout
            floor = [s.version for s in requirement.specifier if s.operator == ">="]
            if len(floor) != 1:
                raise ValueError(f"{path.name}: {text!r} declares no single floor (>=)")
            if name not in found or Version(floor[0]) > Version(found[name]):
                found[name] = floor[0]
    return found


def floor_mismatches(
    declared: dict[str, str],
    installed: dict[str, str],
    raised: dict[str, list[tuple[str, str]]] | None = None,
) -> tuple[list[str], list[str]]:
    """Each declared floor the environment does not hold exactly, said in words; and, apart,
    each one another installed distribution requires above (``raised``: name to its
    ``(floor, by whom)``), which one environment cannot test and which is only reported."""
    wrong, above = [], []
    for name, floor in sorted(declared.items()):
        have = installed.get(name)
        higher = [(v, by) for v, by in (raised or {}).get(name, []) if Version(v) > Version(floor)]
        if have is None:
            wrong.append(f"{name}: nothing installed (floor {floor})")
        elif higher and Version(have) == max(Version(v) for v, _ in higher):
            version, by = max(higher, key=lambda h: Version(h[0]))
            above.append(f"{name}: floor {floor} raised to {version} by {by}")
        elif Version(have) != Version(floor):
            wrong.append(f"{name}: {have} installed, floor {floor}")
    return wrong, above


def _members_dev() -> list[str]:
    """The third-party requirements of the members' own ``dev`` groups (what their tests use
    beyond the root's, such as the dashboard's HTTP client for Starlette's TestClient); the
    members themselves are installed editable already."""
    found: list[str] = []
    for path in MEMBERS.values():
        with (path / "pyproject.toml").open("rb") as f:
            groups = tomllib.load(f).get("dependency-groups", {})
        for text in groups.get("dev", []):
            name = canonicalize_name(Requirement(text).name) if isinstance(text, str) else ""
            if name and not name.startswith("jobdispatch"):
                found.append(text)
    return sorted(set(found))


def _root_group(name: str) -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["dependency-groups"][name])


#: The classifier that keeps a member off the package index (PyPI refuses it, too).
PRIVATE = "Private :: Do Not Upload"


def published() -> list[Path]:
    """The members a release builds and uploads: all but those classified private."""
    out = []
    for path in MEMBERS.values():
        with (path / "pyproject.toml").open("rb") as f:
            project = tomllib.load(f)["project"]
        if PRIVATE not in project.get("classifiers", []):
            out.append(path)
    return out


#: What a user installs for each adapter, as they would from PyPI: the command and the adapter;
#: ``jobdispatch-cli`` alone gives the local adapter (it depends on it).
SMOKE = {
    "local": ["jobdispatch-cli"],
    "slurm": ["jobdispatch-cli", "jobdispatch-slurm"],
    "kubeflow": ["jobdispatch-cli", "jobdispatch-kubeflow"],
    # The rest, each as its users install it: so every wheel in dist/ is installed somewhere.
    "postgresql": ["jobdispatch-cli[postgresql]"],
    "publish": ["jobdispatch-publish[s3,vault]"],
    "conformance": ["jobdispatch-conformance"],
    "dashboard": ["jobdispatch-dashboard"],
}


@nox.session
def build(session: nox.Session) -> None:
    """Build every published member into dist/, check it, and smoke-test the wheels.

    After the build and the metadata checks (tools/release/check_dists.py, with twine's),
    each adapter gets a fresh virtual environment into which its user-facing distributions are
    installed from dist/ and the package index only (no workspace, no editable install), then
    ``jobdispatch plugins`` must list that adapter and ``jobdispatch plan`` must plan a job on it.
    """
    out = ROOT / "dist"
    shutil.rmtree(out, ignore_errors=True)
    for path in published():
        session.run(_uv(), "build", "--quiet", "--out-dir", str(out), str(path))
    session.run(
        _uv(), "sync", "--quiet", "--frozen", "--inexact", "--all-packages", "--group", "release"
    )
    session.run(sys.executable, str(ROOT / "tools" / "release" / "check_dists.py"), str(out))
    for adapter, distributions in SMOKE.items():
        _smoke(session, out, adapter, distributions)


#: Siblings the members' tests use beside the member itself, from their wheels too: the
#: conformance kit (fixtures, suites) and the supervisor (the local adapter's tests drive one).
TEST_KIT = ["jobdispatch-conformance", "jobdispatch-supervise"]


@nox.session
@nox.parametrize("package", [p.name for p in published()])
def wheels(session: nox.Session, package: str) -> None:
    """One member's own tests against its built wheel, in an environment of its own.

    The workspace installs every member editable, so a module, schema or data file missing
    from a wheel, or a dependency a member uses but does not declare, passes every other
    session. Here the environment holds what dist/ and the package index give (the member's
    wheel, its siblings' wheels, its declared dependencies and the test tools), never the
    checkout's sources, and the member's tests run against that. Run ``build`` first.
    """
    out = ROOT / "dist"
    path = MEMBERS[package]
    with (path / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    name = canonicalize_name(project["name"])
    if not any(_name(w) == name for w in out.glob("*.whl")):
        session.error(f"no wheel of {name} in dist/: run ./dev nox -s build first")
    extras = sorted(project.get("optional-dependencies", {}))
    target = f"{name}[{','.join(extras)}]" if extras else name
    tools = [r for r in _root_group("dev") if not r.startswith(("mypy", "ruff", "nox", "types-"))]
    env = _wheel_env(session, out, f"wheel-{package}", [target, *TEST_KIT, *tools])
    python = str(env / "bin" / "python")
    where = str(
        session.run(
            python, "-c", f"import {_import_name(path)} as m; print(m.__file__)", silent=True
        )
    ).strip()
    if not where.startswith(str(env)):
        session.error(f"{package} was imported from {where}, not from {env}")
    _without_clusters(session, env, [path / "tests"])


def _import_name(path: Path) -> str:
    """The member's first import package (``packages/core`` → ``jobdispatch``)."""
    return next(p.name for p in sorted((path / "src").iterdir()) if (p / "__init__.py").exists())


def _name(wheel: Path) -> str:
    """The distribution name of a wheel file (``jobdispatch_cli-0.1-py3-none-any.whl``)."""
    return wheel.name.split("-", 1)[0].replace("_", "-")


def _wheel_env(session: nox.Session, dist: Path, name: str, requirements: list[str]) -> Path:
    """A fresh environment .nox/NAME holding ``requirements`` from ``dist`` and the package
    index only: no workspace, no editable install."""
    env = ROOT / ".nox" / name
    shutil.rmtree(env, ignore_errors=True)
    uv_env = {"UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(env)}
    session.run(_uv(), "venv", "--quiet", "--python", BASE_PYTHON, str(env), env=uv_env)
    # The wheels keep their version between builds (and reproducible timestamps), so uv's cache
    # would hand back an older build of the same name: refresh every one of ours.
    ours = [arg for w in sorted(dist.glob("*.whl")) for arg in ("--refresh-package", _name(w))]
    session.run(
        _uv(),
        "pip",
        "install",
        "--quiet",
        *ours,
        "--find-links",
        str(dist),
        *requirements,
        env=uv_env,
    )
    return env


def _smoke(session: nox.Session, dist: Path, adapter: str, distributions: list[str]) -> None:
    env = _wheel_env(session, dist, f"smoke-{adapter}", distributions)
    session.run(
        str(env / "bin" / "python"),
        str(ROOT / "tools" / "release" / "smoke.py"),
        adapter,
        env={"JOBDISPATCH_SMOKE_JOB": str(ROOT / "examples" / "train.toml")},
    )


if os.environ.get("NOX_DEBUG_MEMBERS"):
    print(MEMBERS)
