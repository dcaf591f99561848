"""Benchmark: what installing the helper costs a job image, and how fast it starts.

Run standalone (``python packages/publish/bench/bench_footprint.py``) or through ``nox -s bench``.
It builds the core's and this package's wheels, then makes one fresh virtual environment per
install a user would choose: none (the baseline: an empty environment), ``jobdispatch-publish``
(POSIX roots only), ``jobdispatch-publish[s3]`` and ``jobdispatch-publish[vault]``. The last one
holds what every install pulled before S3 and Vault became extras. Measured in the same run:

* the packages and the bytes each install adds to site-packages, against the empty environment,
  and as a share of the ``[vault]`` install;
* start-up of the base install: ``--help`` and a ``resolve`` on an empty POSIX root (median of
  7 runs each) against the interpreter's own start-up (``python -c pass``) in that environment.

It also runs the base install against an ``s3://`` root, which must fail with exit code 2 (bad
input) and name the extra to install. Prints a table; asserts nothing about timings. Needs
``uv`` (``UV``, the PATH, or ``.bootstrap/bin/uv``) and the package index or uv's cache for
boto3 and hvac.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MB = 1_000_000
VARIANTS = (
    ("empty environment", None),
    ("jobdispatch-publish", "jobdispatch-publish"),
    ("jobdispatch-publish[s3]", "jobdispatch-publish[s3]"),
    ("jobdispatch-publish[vault]", "jobdispatch-publish[vault]"),
)


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv") or str(ROOT / ".bootstrap/bin/uv")
    if not Path(found).exists() and shutil.which(found) is None:
        sys.exit(f"bench_footprint: uv not found (set UV, or run tools/bootstrap): {found}")
    return found


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env)


def _must(*argv: str) -> str:
    out = _run(*argv, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    if out.returncode != 0:
        sys.exit(f"bench_footprint: {' '.join(argv)} failed:\n{out.stderr}")
    return out.stdout


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _footprint(venv: Path) -> tuple[int, int]:
    """(distributions installed, bytes under site-packages)."""
    site = _site_packages(venv)
    total = sum((Path(d) / f).stat().st_size for d, _, files in os.walk(site) for f in files)
    return len(list(site.glob("*.dist-info"))), total


def _median_seconds(argv: list[str], env: dict[str, str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        out = _run(*argv, env=env)
        times.append(time.perf_counter() - start)
        if out.returncode != 0:
            sys.exit(f"bench_footprint: {' '.join(argv)} exited {out.returncode}:\n{out.stderr}")
    return statistics.median(times)


def main() -> int:
    uv = _uv()
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="jd-footprint-") as tmp:
        work = Path(tmp)
        dist = work / "dist"
        for member in ("packages/core", "packages/publish"):
            _must(uv, "build", "--quiet", "--wheel", "--out-dir", str(dist), str(ROOT / member))
        sizes: dict[str, tuple[int, int]] = {}
        venvs: dict[str, Path] = {}
        for name, requirement in VARIANTS:
            venv = work / f"venv-{len(venvs)}"
            _must(uv, "venv", "--quiet", "--python", sys.executable, str(venv))
            if requirement is not None:
                _must(
                    uv, "pip", "install", "--quiet", "--python", str(venv / "bin/python"),
                    "--find-links", str(dist), requirement,
                )  # fmt: skip
            sizes[name] = _footprint(venv)
            venvs[name] = venv
        base_count, base_bytes = sizes["empty environment"]
        full = sizes["jobdispatch-publish[vault]"][1] - base_bytes
        for name, (count, size) in sizes.items():
            added = size - base_bytes
            rows.append(
                (
                    f"install {name}",
                    f"{added / MB:.1f} MB added",
                    f"{count - base_count} packages ({size / MB:.1f} MB in all)",
                    "(baseline)" if name.startswith("empty") else f"{added / full:.2f} of [vault]",
                )
            )

        venv = venvs["jobdispatch-publish"]
        root = work / "root"
        root.mkdir()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "JOBDISPATCH_CHECKPOINT_ROOT": str(root),
            "JOBDISPATCH_JOB": "bench",
        }
        helper = str(venv / "bin/jobdispatch-publish")
        interpreter = _median_seconds([str(venv / "bin/python"), "-c", "pass"], env)
        rows.append(("start-up: python -c pass", f"{interpreter * 1000:.0f} ms", "", "1.00"))
        for label, argv in (
            ("start-up: --help", [helper, "--help"]),
            ("start-up: resolve, empty POSIX root", [helper, "resolve"]),
        ):
            t = _median_seconds(argv, env)
            rows.append((label, f"{t * 1000:.0f} ms", "base install", f"{t / interpreter:.2f}"))

        out = _run(helper, "resolve", "--root", "s3://bucket/prefix", "--into", "x", env=env)
        named = "jobdispatch-publish[s3]" in out.stderr
        rows.append(
            (
                "base install, s3:// root",
                f"exit {out.returncode}",
                "names the [s3] extra" if named else f"MISSING HINT: {out.stderr.strip()}",
                "",
            )
        )

    head = ("measurement", "value", "note", "ratio")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    rule = "  ".join("-" * w for w in widths)
    print(rule)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print(rule)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(rule)
    return 0 if named and out.returncode == 2 else 1


if __name__ == "__main__":
    sys.exit(main())
