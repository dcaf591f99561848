"""tools/bootstrap, the first thing every ./dev call runs, against a stand-in uv.

A copy of the script runs in a scratch folder whose ``.bootstrap/bin/uv`` only records how it was
called, so these checks cost milliseconds and never touch the real .venv. They pin the three
promises that keep ./dev cheap and safe on a pyenv machine: the interpreter handed to uv is the
real one behind a shim, a current environment is not synced again, and concurrent calls sync one
at a time.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from repo_layout import ROOT

FAKE_UV = """\
#!/bin/sh
# Records each call, and overlapping calls, then makes the environment a sync would make.
here=$(dirname "$0")
if ! mkdir "$here/busy" 2>/dev/null; then echo overlap >>"$here/log"; fi
echo "$*" >>"$here/log"
sleep 0.5
mkdir -p .venv/bin && ln -sf "$(command -v sh)" .venv/bin/python
rmdir "$here/busy" 2>/dev/null || true
"""


def _scratch(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "bootstrap", root / "tools" / "bootstrap")
    (root / "uv.lock").write_text("version = 1\n")
    (root / "pyproject.toml").write_text("[tool.uv.workspace]\n")
    uv = root / ".bootstrap" / "bin" / "uv"
    uv.parent.mkdir(parents=True)
    uv.write_text(FAKE_UV)
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    return root


def _shim(tmp_path: Path) -> Path:
    """A python3 that is a shell script in front of the real one, the way pyenv's shims are."""
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    shim.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            exec {sys.executable} "$@"
            """)
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return shim


def _run(root: Path, shim: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": str(shim)}
    return subprocess.run(
        [str(root / "tools" / "bootstrap")], env=env, capture_output=True, text=True, check=False
    )


def _calls(root: Path) -> list[str]:
    log = root / ".bootstrap" / "bin" / "log"
    return log.read_text().splitlines() if log.exists() else []


def test_uv_gets_the_real_interpreter_not_the_shim(tmp_path: Path) -> None:
    root, shim = _scratch(tmp_path), _shim(tmp_path)
    done = _run(root, shim)
    assert done.returncode == 0, done.stderr
    (call,) = _calls(root)
    assert f"--python {sys.executable}" in call, call
    assert str(shim) not in call


def test_a_current_environment_is_not_synced_again(tmp_path: Path) -> None:
    root, shim = _scratch(tmp_path), _shim(tmp_path)
    for _ in range(3):
        assert _run(root, shim).returncode == 0
    assert len(_calls(root)) == 1, _calls(root)
    # A changed lock is a stale environment: exactly one more sync.
    (root / "uv.lock").write_text("version = 1\n# changed\n")
    assert _run(root, shim).returncode == 0
    assert len(_calls(root)) == 2, _calls(root)


def test_concurrent_calls_sync_once_and_never_overlap(tmp_path: Path) -> None:
    root, shim = _scratch(tmp_path), _shim(tmp_path)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: _run(root, shim), range(4)))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    calls = _calls(root)
    assert "overlap" not in calls, calls
    assert len(calls) == 1, calls


def test_an_old_python_is_refused_by_name(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    old = tmp_path / "python2"
    old.write_text('#!/bin/sh\necho "Python 3.10.13"; exit 1\n')
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    done = _run(root, old)
    assert done.returncode == 1
    assert "Python 3.11 or newer is needed" in done.stderr
    assert _calls(root) == []
