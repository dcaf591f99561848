"""Telling a person what happens to a job as it happens: each new execution, each ending with
its cause, each committed transition. ``run`` and ``supervise`` print these lines.

It works by comparing successive statuses, so it shows the same story whether the supervisor
is in this process or another one.
"""

from __future__ import annotations

from collections.abc import Iterator

from jobdispatch.status import Status
from rich.text import Text

from jobdispatch_cli.render import cause_text, transition_text, when

__all__ = ["Reporter"]


class Reporter:
    """Remembers what it has told about one job and tells the rest."""

    def __init__(self) -> None:
        self._history = 0
        self._started: set[tuple[int, int]] = set()
        self._ended: set[tuple[int, int]] = set()
        self._submissions: set[int] = set()

    def news(self, status: Status) -> Iterator[Text]:
        """Lines for everything in ``status`` not told before, oldest first."""
        for sub in status.submissions:
            if sub.n not in self._submissions and sub.canonical is not None:
                self._submissions.add(sub.n)
                line = Text(" " * 10)
                line.append(f"submission {sub.n}", style="bold")
                line.append(f": object {sub.canonical}", style="dim")
                if sub.rule is not None:
                    line.append(f" (rule {sub.rule})", style="dim")
                yield line
            for e in sub.executions:
                key = (sub.n, e.index)
                if key not in self._started:
                    self._started.add(key)
                    line = Text(f"{when(e.started_at)}  ")
                    line.append(f"submission {sub.n} execution {e.index} running", style="blue")
                    yield line
                if e.ended_at is not None and key not in self._ended:
                    self._ended.add(key)
                    line = Text(f"{when(e.ended_at)}  ")
                    line.append(f"submission {sub.n} execution {e.index} ended: ")
                    line.append_text(cause_text(e.cause))
                    yield line
        for t in status.history[self._history :]:
            yield transition_text(t)
        self._history = len(status.history)
