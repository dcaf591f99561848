"""Check the built distributions in a dist/ folder before anyone installs or uploads them.

twine's own check (``--strict``: the long description renders on PyPI) runs first; then each
wheel's METADATA is read for what twine does not look at: the licence text is inside, the
links and classifiers are there, the description has no relative link (they break on PyPI),
nothing private is about to be uploaded, and every distribution carries the same version (the
members are released together, see docs/how-to/release.md).

Usage: python tools/release/check_dists.py DIST [--version X.Y.Z]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

PYTHONS = ("3.11", "3.12", "3.13")


def check_wheel(path: Path) -> tuple[str, list[str]]:
    """The wheel's version and what is wrong with its metadata."""
    problems: list[str] = []
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(wheel.read(meta_name).decode())
    info = meta_name.rsplit("/", 1)[0]
    for licence in meta.get_all("License-File") or ["(none declared)"]:
        if f"{info}/licenses/{licence}" not in names:
            problems.append(f"licence file {licence} is not in the wheel")
    if meta.get("License-Expression") != "MIT":
        problems.append(f"License-Expression is {meta.get('License-Expression')!r}")
    urls = {u.split(",", 1)[0] for u in meta.get_all("Project-URL") or []}
    for label in ("Homepage", "Documentation", "Source", "Issues"):
        if label not in urls:
            problems.append(f"no Project-URL {label}")
    classifiers = meta.get_all("Classifier") or []
    if "Private :: Do Not Upload" in classifiers:
        problems.append("is private (Private :: Do Not Upload) and must not be in dist/")
    for version in PYTHONS:
        if f"Programming Language :: Python :: {version}" not in classifiers:
            problems.append(f"no classifier for Python {version}")
    if not meta.get("Author") and not meta.get("Author-email"):
        problems.append("no author")
    description = meta.get_payload() or ""
    relative = [
        link
        for link in re.findall(r"\]\(([^)\s]+)\)", description)
        if not re.match(r"(https?://|mailto:|#)", link)
    ]
    if relative:
        problems.append(f"relative links in the description: {relative}")
    if "<!-- pypi: end -->" in description or ".venv/" in description:
        problems.append("the description carries the repository-only part of the README")
    return meta["Version"], problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path)
    parser.add_argument("--version", help="the version every distribution must have")
    args = parser.parse_args()
    files = sorted(args.dist.glob("*.whl")) + sorted(args.dist.glob("*.tar.gz"))
    if not files:
        print(f"check_dists: nothing built in {args.dist}", file=sys.stderr)
        return 1
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, files)], check=False
    )
    failed = twine.returncode != 0
    versions: dict[str, str] = {}
    for wheel in files:
        if wheel.suffix != ".whl":
            continue
        version, problems = check_wheel(wheel)
        versions[wheel.name] = version
        for problem in problems:
            print(f"check_dists: {wheel.name}: {problem}", file=sys.stderr)
        failed |= bool(problems)
    wanted = {args.version} if args.version else set(versions.values())
    if len(set(versions.values()) | wanted) != 1:
        print(f"check_dists: versions differ: {versions} (wanted {wanted})", file=sys.stderr)
        failed = True
    print(f"check_dists: {len(files)} files, version {sorted(set(versions.values()))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
