"""Shared by the tests under tests/: their helper modules (netns_hosts.py) are importable by
name, since pytest's importlib mode does not put this folder on the path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
