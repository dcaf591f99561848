"""What the whole-repo checks share: the workspace's members, read from the files themselves."""

from __future__ import annotations

import functools
import importlib.util
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SPECS = DOCS / "specs"

#: Client libraries a plugin's entry-point module must not import: they cost seconds and
#: megabytes, and every process that loads plugins (the helper inside a job container too)
#: would pay for them whether it used that adapter or not.
HEAVY = ("fabric", "paramiko", "kubernetes", "boto3", "botocore", "s3fs", "hvac")


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


@functools.cache
def noxfile() -> Any:
    """noxfile.py as a module, loaded once (nox refuses a session registered twice)."""
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
