"""jobdispatch-sim: the deterministic simulator of dispatch (docs/specs/0005-simulator.md).

One seed determines a whole run: the jobs and their policies, the backend's behaviour, the
store's faults, crashes and pauses inside steps, clock jumps, and people's actions. The real
core and supervisor run under it unmodified; checkers fold the run's history after every step
for the invariants of the contract; mutants revert one protection each and must be caught.
"""

from __future__ import annotations

from jobdispatch_sim.__about__ import __version__

__all__ = ["__version__"]
