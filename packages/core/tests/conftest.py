"""Hypothesis strategies for the core's value types whose classes check their fields, so that
``st.from_type`` (and ``st.builds`` of an event that holds one) draws only values that exist."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from jobdispatch import triggers as tr

#: Object ids as adapters write them, ``:`` and ``/`` included, and the empty one.
_ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_counts = st.integers(0, 10**6)
_triggers: st.SearchStrategy[tr.Trigger] = st.from_type(tr.Trigger)  # type: ignore[arg-type]

_cls: type[Any]
st.register_type_strategy(tr.Submit, st.just(tr.SUBMIT))
st.register_type_strategy(tr.End, st.builds(tr.End, ref=_ids, index=st.integers(-1, 10**6)))
for _cls in (tr.Launch, tr.Resubmit, tr.Release, tr.Requeue, tr.Retry):
    st.register_type_strategy(_cls, st.builds(_cls, _counts))
for _cls in (tr.RuleEscalates, tr.Unenforced, tr.NativeSpent):
    st.register_type_strategy(_cls, st.builds(_cls, _counts, st.deferred(lambda: _triggers)))
for _cls in (tr.BudgetSpent, tr.HoldExpired, tr.Unresolved, tr.RequeueFailed, tr.Blind):
    st.register_type_strategy(_cls, st.builds(_cls, _counts))
st.register_type_strategy(tr.Cleanup, st.just(tr.CLEANUP))
