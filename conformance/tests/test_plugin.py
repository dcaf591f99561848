"""The pytest11 plugin is loaded by every pytest run wherever the package is installed, so it
must do nothing and import nothing heavy until an adapter's tests select the suite."""

from __future__ import annotations

import subprocess
import sys


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys, jobdispatch_conformance.plugin as p;"
        "heavy = [m for m in ('jobdispatch', 'jsonschema', 'hypothesis', 'jobdispatch.memory',"
        " 'jobdispatch_conformance.adapter') if m in sys.modules];"
        "hooks = [n for n in vars(p) if n.startswith('pytest_')];"
        "print(heavy, hooks)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[] []"
