"""The whole-repo checks: the layout every member follows, plugins, docs and the front door.

They read the repository's files (and, for plugins, import entry points in fresh interpreters),
so they run in the nox ``integration`` session with the other tests under ``tests/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# repo_layout.py, shared by the modules here (pytest's importlib mode does not add this folder).
sys.path.insert(0, str(Path(__file__).parent))
