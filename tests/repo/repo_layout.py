"""What the whole-repo checks share: the workspace's members, read from the files themselves."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SPECS = DOCS / "specs"


def _toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        return tomllib.load(f)


@dataclass(frozen=True)
class Member:
    """One workspace member: its folder, its pyproject, its import packages."""

    path: Path
    pyproject: dict[str, Any]

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def distribution(self) -> str:
        return str(self.pyproject.get("project", {}).get("name", ""))

    @property
    def import_packages(self) -> list[Path]:
        src = self.path / "src"
        if not src.is_dir():
            return []
        return sorted(p for p in src.iterdir() if (p / "__init__.py").is_file())

    def __str__(self) -> str:
        return self.rel


def members() -> list[Member]:
    """Every member the root pyproject's uv workspace names, in folder order."""
    globs = _toml(ROOT / "pyproject.toml")["tool"]["uv"]["workspace"]["members"]
    found: dict[Path, Member] = {}
    for pattern in globs:
        for folder in sorted(ROOT.glob(pattern)):
            if (folder / "pyproject.toml").is_file():
                found[folder] = Member(folder, _toml(folder / "pyproject.toml"))
    return list(found.values())


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def providers() -> dict[str, set[str]]:
    """Top-level import name -> the normalized distributions providing it (the workspace's
    members included, which are installed in editable mode)."""
    found: dict[str, set[str]] = {
        name: {normalize(d) for d in dists} for name, dists in packages_distributions().items()
    }
    for member in members():
        for package in member.import_packages:
            found.setdefault(package.name, set()).add(normalize(member.distribution))
    return found


def core_dependencies() -> set[str]:
    """The distributions the core declares it needs at run time, normalized."""
    core = next(m for m in members() if m.distribution == "jobdispatch")
    specs = core.pyproject.get("project", {}).get("dependencies", [])
    return {normalize(Requirement(spec).name) for spec in specs}


def light_imports() -> set[str]:
    """What loading the plugins may import: the standard library, the workspace's own packages
    and what the core's own dependencies provide. Anything else (a database client, a cloud
    SDK, a Kubernetes client, whatever comes next) is paid by every process that loads the
    plugins, whether it uses that plugin or not, so it belongs inside a factory."""
    core = core_dependencies()
    members_ = {p.name for m in members() for p in m.import_packages}
    provided = {name for name, dists in providers().items() if dists & core}
    return set(sys.stdlib_module_names) | members_ | provided


def run_python(code: str, *args: str, timeout: float = 120, **options: Any) -> str:
    """Run ``code`` in a fresh interpreter (this one has imported who knows what) and return its
    standard output; a failure shows the end of its standard error."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **options,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return str(done.stdout)


@cache
def noxfile() -> Any:
    """noxfile.py as a module, loaded once (nox refuses a session registered twice)."""
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
