"""The console every line of the command goes through, made in this one place."""

from __future__ import annotations

from rich.console import Console

__all__ = ["terminal"]


def terminal(*, stderr: bool = False) -> Console:
    """A console on standard output, or on standard error for messages.

    rich's emoji codes are off: text people wrote (a job name, a GPU type, a license such as
    ``a:b:c``) and every message quoting it is shown as written, never with ``:b:`` turned into
    a picture. Markup stays a per-call choice: messages are printed with ``markup=False``."""
    return Console(stderr=stderr, emoji=False)
