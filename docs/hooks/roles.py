"""An mkdocs hook: Sphinx cross-reference roles in docstrings read as plain code on the site.

Some docstrings say :class:`State` or :func:`~jobdispatch.fold`, which mkdocstrings (Markdown,
not reStructuredText) renders as the literal text ":class:" before the code. This turns each such
role into just its code, shortened as Sphinx would for a leading ``~`` (``fold``, not
``jobdispatch.fold``), so the docstrings need not change for the site's sake.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|type):<code>(~?)([^<]*)</code>"
)


def _code(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def strip_roles(html: str) -> str:
    """``html`` with every rendered Sphinx role reduced to its code."""
    return _ROLE.sub(_code, html)


def on_page_content(html: str, **kwargs: Any) -> str:
    """Strip the roles from every page's rendered content."""
    return strip_roles(html)
