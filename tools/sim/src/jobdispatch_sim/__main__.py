"""``python -m jobdispatch_sim``: see :mod:`jobdispatch_sim.cli`."""

from __future__ import annotations

import sys

from jobdispatch_sim.cli import main

sys.exit(main())
