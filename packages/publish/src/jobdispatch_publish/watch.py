"""Publishing saves as training completes them, from beside the training process.

Training writes each save into its own folder under a saves folder, named with its step
(``step-1200``, ``checkpoint-1200``, ``global_step1200``: the last run of digits in the name is
the step, or the first group of ``--step-pattern``). A save is *complete* when its folder
contains the marker file (``COMPLETE`` by default), which training writes last, after every other
file is closed. The marker, not the folder's age or quiet, is the signal, because only training
knows when it is done; frameworks that already write a last file (torch.distributed.checkpoint's
``.metadata``) can name that file as the marker. A save that changes while it is being published
is refused and tried again on the next scan.

Folders and files whose names start with "." are ignored (writes in progress).

Failures are sorted by whether waiting can mend them (:func:`~jobdispatch_publish.errors.can_heal`).
An unreachable store, a full disk or a save still changing is retried at the next scan. A save
that can never be published as it is (a step another execution published, a file that is not a
regular file) is skipped with an error, and the others go on. A failure of the whole store that no
retry can mend (the root is missing or unreadable, the credentials are refused, the store is
refused) stops the watcher with that error, so the job script learns of it, instead of retrying
the same invalid root forever while training runs with nothing published.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path

from jobdispatch.errors import DispatchError, Rejected, Unauthorized

from jobdispatch_publish.entry import Entry
from jobdispatch_publish.errors import AlreadyPublished, RootUnavailable, can_heal
from jobdispatch_publish.identity import Identity
from jobdispatch_publish.publish import publish
from jobdispatch_publish.store import Store

__all__ = ["DEFAULT_MARKER", "Watcher"]

log = logging.getLogger(__name__)

DEFAULT_MARKER = "COMPLETE"
_LAST_DIGITS = re.compile(r"([0-9]+)(?!.*[0-9])")
#: Failures of the whole store, not of one save: no later scan or other save can do better.
_FATAL = (RootUnavailable, Unauthorized, Rejected)


class Watcher:
    """Scans ``saves`` every ``interval`` seconds and publishes each complete, unpublished save."""

    def __init__(
        self,
        store: Store,
        identity: Identity,
        saves: Path,
        *,
        marker: str = DEFAULT_MARKER,
        step_pattern: str | None = None,
        interval: float = 10.0,
        on_published: Callable[[Entry], None] | None = None,
    ) -> None:
        self.store = store
        self.identity = identity
        self.saves = saves
        self.marker = marker
        self.pattern = re.compile(step_pattern) if step_pattern else _LAST_DIGITS
        self.interval = interval
        self.on_published = on_published
        self.done: set[int] = set()
        self.failures = 0  # retried
        self.skipped: dict[int, str] = {}  # step -> why it can never be published as it is

    def step_of(self, name: str) -> int | None:
        m = self.pattern.search(name)
        if m is None:
            return None
        try:
            return int(m.group(1) if m.groups() else m.group(0))
        except ValueError:
            return None

    def pending(self) -> list[tuple[int, Path]]:
        """Complete saves not yet published by this watcher, oldest step first."""
        found = []
        if not self.saves.is_dir():
            return []
        for child in self.saves.iterdir():
            if child.name.startswith(".") or not child.is_dir():
                continue
            step = self.step_of(child.name)
            if step is None or step in self.done or not (child / self.marker).is_file():
                continue
            found.append((step, child))
        return sorted(found)

    def scan(self) -> list[Entry]:
        """One pass; what it published.

        Failures that may heal are logged and retried on the next pass; a save that cannot be
        published is skipped; a store that cannot work raises (see the module's docstring).
        """
        try:
            self.store.check_root()
        except (DispatchError, OSError) as exc:
            if not can_heal(exc):
                raise
            self.failures += 1
            log.error("the checkpoint store is not available (will retry): %s", exc)
            return []
        published = []
        for step, folder in self.pending():
            try:
                result = publish(self.store, self.identity, folder, step)
            except AlreadyPublished as exc:
                log.warning("skipping %s: %s", folder, exc.message)
                self.done.add(step)
                continue
            except (DispatchError, OSError) as exc:
                if isinstance(exc, _FATAL) or (isinstance(exc, OSError) and not can_heal(exc)):
                    raise
                if can_heal(exc):
                    self.failures += 1
                    log.error("could not publish %s (will retry): %s", folder, exc)
                else:
                    self.skipped[step] = str(exc)
                    self.done.add(step)
                    log.error("not publishing %s (retrying cannot help): %s", folder, exc)
                continue
            self.done.add(step)
            if result.written:
                published.append(result.entry)
                if self.on_published is not None:
                    self.on_published(result.entry)
        return published

    def run(self, stop: threading.Event) -> None:
        """Scan until ``stop`` is set, then once more, so a save finished at the end is not lost."""
        while not stop.is_set():
            self.scan()
            stop.wait(self.interval)
        self.scan()
