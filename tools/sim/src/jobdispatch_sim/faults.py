"""The fault model: what the simulator may do to the code under test, and nothing more.

FoundationDB's BUGGIFY puts fault points into production code; here they live in the wrappers
the simulator injects (the store and the backend), so the production code has none. A fault
point is a moment inside a step, named by where it is:

* ``store.before``: a commit is about to apply (its decision was computed from an older read);
* ``call.before``: a backend call is about to be made (its decision is committed already);
* ``call.after``: the call was made (its answer is not committed yet);
* ``find.before``: a find is about to look (the record it was read with may move meanwhile).

At a fault point the world may crash the acting process (raising :class:`Crash`), or pause it
while other actors run (a GC pause, a slow network), possibly long enough for its lease to lapse
and another supervisor to take over.

Only faults the code claims to survive are injected (TigerBeetle's lesson, "the fault model is
bounded by what is recoverable"): a commit that returned is never lost, a power cut loses at
most the one commit in flight, and a find that claims to be complete may miss a job's objects
only for a window shorter than the core's absence grace (60 s), less the largest clock skew
drawn (20 s), and one job's windows are at least a grace apart: a listing that lags longer
than the grace (or keeps lagging), while claiming completeness, makes any judgment from absence
in a list unsound, and the contract promises safety only for Finds that are truthful within
the grace.
"""

from __future__ import annotations


class Crash(BaseException):
    """The acting process dies here. A BaseException, so no ``except Exception`` in the code
    under test can swallow it: a real crash is not catchable either."""


class PowerCut(Crash):
    """Every supervisor process dies at once, and the commit in flight is lost."""
