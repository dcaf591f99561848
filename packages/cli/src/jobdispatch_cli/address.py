"""Jobs as people address them: by id, by a unique prefix of an id, or by name.

Ids are 12 random characters: nobody types them whole. A word that is a job's id names that
job. Otherwise it names every job whose id starts with it and every job whose name it is; one
such job is the answer, none is ``NotFound`` (exit 3), and several are ``Invalid`` (exit 2),
listing each match with its name and state so the person can pick the id.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

import attrs
from jobdispatch.errors import Invalid, NotFound, Unreadable
from jobdispatch.job import fold
from jobdispatch.records.store import ListFilter, Records
from jobdispatch.spi import Discovery
from jobdispatch.status import project
from jobdispatch.types import JobID, State

__all__ = ["Ambiguous", "Match", "resolve", "select"]


@attrs.frozen
class Match:
    """A job a word may mean: its id, its name and its state."""

    job: JobID
    name: str
    state: State
    settled: bool


class Ambiguous(Invalid):
    """A word that names more than one job."""


def _jobs(store: Records, now: datetime) -> list[Match]:
    """Every readable job of the store, oldest first, with the state its record alone gives
    (no cluster is asked: naming a job must not cost a query). A record that cannot be read
    is left out here; the command that reads it by its id reports it."""
    out = []
    for job in store.list(ListFilter(settled=None)):
        try:
            folded = fold(store.read(job), now)
        except (NotFound, Unreadable, Invalid):
            continue
        state = project(folded, Discovery(job=job), now).state
        out.append(Match(job, folded.header.spec.name, state, folded.settled))
    return out


def resolve(store: Records, word: str, now: datetime) -> JobID:
    """The one job ``word`` means (see the module); raises as the module says."""
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        # Bytes the terminal could not decode (a job id is always plain text): bad input, not
        # a job that merely does not exist.
        msg = f"job id {word!r} is not UTF-8 text"
        raise Invalid(msg) from None
    ids = list(store.list(ListFilter(settled=None)))
    if word in ids:
        return JobID(word)
    if not word:
        raise NotFound("no job named ''")
    matches = [m for m in _jobs(store, now) if m.job.startswith(word) or m.name == word]
    if not matches:
        msg = f"no job with the id, id prefix or name {word!r}"
        raise NotFound(msg)
    if len(matches) > 1:
        lines = "; ".join(f"{m.job} ({m.name or 'unnamed'}, {m.state.value})" for m in matches)
        msg = f"{word!r} names {len(matches)} jobs: {lines}; give more of the id"
        raise Ambiguous(msg)
    return matches[0].job


def select(
    store: Records,
    words: Iterable[str],
    now: datetime,
    *,
    every: bool = False,
    states: Collection[State] = (),
    name: str | None = None,
) -> list[JobID]:
    """The jobs a command acts on: each word resolved, in order and without repeats; or with
    ``every``, every job that has not settled, narrowed to ``states`` and ``name``."""
    words = list(words)
    if every and words:
        raise Invalid("give jobs or --all, not both")
    if not every:
        if states or name is not None:
            raise Invalid("--state and --name narrow --all; give --all too")
        if not words:
            raise Invalid("which job? give one or more ids, id prefixes or names, or --all")
        out: list[JobID] = []
        for word in words:
            job = resolve(store, word, now)
            if job not in out:
                out.append(job)
        return out
    wanted = set(states)
    return [
        m.job
        for m in _jobs(store, now)
        if not m.settled and (not wanted or m.state in wanted) and (name is None or m.name == name)
    ]
