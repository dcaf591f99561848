"""Set the version of every distribution for a release: ``python tools/release/bump.py 0.2.0``.

The members are released together under one version. This writes it into each member's
``__about__.py`` (hatchling reads the version from there), moves each sibling requirement to
``>=VERSION,<NEXT-MINOR`` so a release requires the siblings it was tested with, and turns the
changelog's "Unreleased" section into this version's. ``uv lock`` must run afterwards (the
release script does it). Versions are static files rather than derived from git at build time so
that uv.lock stays valid between commits and an sdist builds without a git checkout; the git
tag is made from this version, and the release workflow refuses a tag that disagrees.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import tomllib
from pathlib import Path

VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)((?:a|b|rc)\d+)?$")


def members(root: Path) -> list[Path]:
    with (root / "pyproject.toml").open("rb") as f:
        globs = tomllib.load(f)["tool"]["uv"]["workspace"]["members"]
    return sorted({p for g in globs for p in root.glob(g) if (p / "pyproject.toml").is_file()})


def bump(root: Path, version: str, today: datetime.date) -> list[Path]:
    """Write ``version`` everywhere it belongs under ``root``; return the files changed."""
    match = VERSION.match(version)
    if not match:
        msg = f"not a release version: {version!r} (use MAJOR.MINOR.PATCH, optionally a1/b1/rc1)"
        raise ValueError(msg)
    major, minor = int(match.group(1)), int(match.group(2))
    cap = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    paths = members(root)
    names = []
    for path in paths:
        with (path / "pyproject.toml").open("rb") as f:
            names.append(tomllib.load(f)["project"]["name"])
    sibling = re.compile(r'"(' + "|".join(map(re.escape, names)) + r')>=[^",]+(?:,<[^"]+)?"')
    changed: list[Path] = []
    for path in paths:
        pyproject = path / "pyproject.toml"
        with pyproject.open("rb") as f:
            about = path / tomllib.load(f)["tool"]["hatch"]["version"]["path"]
        text = about.read_text(encoding="utf-8")
        new = re.sub(r'^__version__ = "[^"]*"', f'__version__ = "{version}"', text, flags=re.M)
        if new == text and f'"{version}"' not in text:
            msg = f"{about} has no __version__ line to set"
            raise ValueError(msg)
        about.write_text(new, encoding="utf-8")
        changed.append(about)
        text = pyproject.read_text(encoding="utf-8")
        pyproject.write_text(sibling.sub(rf'"\1>={version},<{cap}"', text), encoding="utf-8")
        changed.append(pyproject)
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text(encoding="utf-8")
    if "## Unreleased" not in text:
        msg = "CHANGELOG.md has no '## Unreleased' section to release"
        raise ValueError(msg)
    if f"## {version} " in text:
        msg = f"CHANGELOG.md already has a section for {version}"
        raise ValueError(msg)
    changelog.write_text(
        text.replace("## Unreleased", f"## Unreleased\n\n## {version} ({today.isoformat()})", 1),
        encoding="utf-8",
    )
    changed.append(changelog)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    args = parser.parse_args()
    try:
        changed = bump(args.root, args.version, datetime.date.today())
    except ValueError as exc:
        print(f"bump: {exc}", file=sys.stderr)
        return 2
    print(f"bump: {args.version} written to {len(changed)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
