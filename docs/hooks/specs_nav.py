"""An mkdocs hook: the "Specs" section of the navigation lists every numbered spec in docs/specs.

Specs are written by the engineers who own each part, and a new one should appear on the site the
moment it lands, without anyone remembering to edit mkdocs.yml. So the navigation's ``Specs``
entry is filled here, in number order, from the files that exist: a spec is never missing from
the site, and the site never points at a spec that does not exist yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: A spec's file name: a four-digit number, a dash, a kebab-case name.
SPEC_NAME = re.compile(r"^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")
SECTION = "Specs"


def spec_pages(docs_dir: Path) -> list[str]:
    """The specs' paths relative to ``docs_dir``, in number order."""
    folder = docs_dir / "specs"
    names = sorted(p.name for p in folder.glob("*.md") if SPEC_NAME.match(p.name))
    return [f"specs/{name}" for name in names]


def _fill(nav: list[Any], pages: list[str]) -> bool:
    for item in nav:
        if isinstance(item, dict):
            for key, value in item.items():
                if key == SECTION and isinstance(value, list):
                    keep = [v for v in value if not (isinstance(v, str) and v.startswith("specs/"))]
                    item[key] = keep + pages
                    return True
                if isinstance(value, list) and _fill(value, pages):
                    return True
    return False


def on_config(config: Any) -> Any:
    """Put every spec under the navigation's ``Specs`` section."""
    if not _fill(config["nav"], spec_pages(Path(config["docs_dir"]))):
        msg = f"mkdocs.yml has no {SECTION!r} section in its nav to list the specs under"
        raise ValueError(msg)
    return config
