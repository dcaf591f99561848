"""Invariant 6: the record always folds, decisions are fenced, and no submitted job is ever
missing from ``list``.

After every step, each record that changed is folded (and, at the end, projected) as any reader
would; a record the protocol could not have written is refused by ``fold`` with Invalid, which
is a violation here. Each record is followed by a :class:`~jobdispatch.job.Replay`, which runs
``fold``'s own code over only the events added since the step before (and over the whole
record whenever it is not the previous one plus new events), so the verdict is ``fold``'s on
the whole record while the cost is that of the new events.

Fencing is checked on the record too: a decision stored under token t proves the writer held
the current lease, so no later decision may carry an older token.
"""

from __future__ import annotations

from jobdispatch.errors import Invalid
from jobdispatch.job import Replay
from jobdispatch.spi import Discovery
from jobdispatch.status import project

from jobdispatch_sim.checkers import Checker, Context, Violation
from jobdispatch_sim.timeline import Commit, Item


class Folds(Checker):
    invariant = 6
    name = "records fold and list"

    def __init__(self) -> None:
        self.dirty: dict[str, int] = {}
        self.token: dict[str, tuple[int, int]] = {}
        self.broken: set[str] = set()
        self.replays: dict[str, Replay] = {}
        #: Whether anything happened since the last settle. The store and the submitted jobs
        #: change only by steps that put items on the timeline (a creation, a commit), so a
        #: step that added none cannot have changed what ``list`` answers.
        self.fed = True

    def feed(self, item: Item) -> list[Violation]:
        self.fed = True
        if not isinstance(item, Commit):
            return []
        self.dirty[item.job] = item.seq
        if item.token is None:
            return []
        last = self.token.get(item.job)
        if last is not None and item.token < last[0]:
            self.token[item.job] = (max(last[0], item.token), item.seq)
            return [
                self.violation(
                    item.job,
                    f"decision {item.event.kind} stored under token {item.token} after a "
                    f"decision under token {last[0]} (#{last[1]}): a fenced-off holder wrote",
                    item.seq,
                )
            ]
        self.token[item.job] = (item.token, item.seq)
        return []

    def settle(self, ctx: Context) -> list[Violation]:
        if not self.fed:
            return []
        self.fed = False
        out = []
        for job, seq in sorted(self.dirty.items()) if self.dirty else ():
            if job in self.broken:
                continue
            try:
                self._replay(job).extend(ctx.read(job), ctx.now)
            except Invalid as exc:
                self.broken.add(job)
                out.append(self.violation(job, f"the record does not fold: {exc}", seq))
        self.dirty.clear()
        listed = set(ctx.listed())
        submitted = ctx.submitted()
        if not listed.issuperset(submitted):
            for job in submitted:
                if job not in listed:
                    out.append(self.violation(job, "a submitted job is missing from list", -1))
        return out

    def _replay(self, job: str) -> Replay:
        replay = self.replays.get(job)
        if replay is None:
            replay = self.replays[job] = Replay()
        return replay

    def finish(self, ctx: Context) -> list[Violation]:
        """Every record folds, and projects as status would show it."""
        out = []
        for job in ctx.submitted():
            try:
                project(
                    self._replay(job).extend(ctx.read(job), ctx.now), Discovery(job=job), ctx.now
                )
            except Invalid as exc:
                out.append(self.violation(job, f"the record does not project: {exc}", -1))
        return out
