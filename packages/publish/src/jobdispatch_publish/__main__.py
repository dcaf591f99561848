"""``python -m jobdispatch_publish``: the same as the ``jobdispatch-publish`` command."""

from __future__ import annotations

import sys

from jobdispatch_publish.cli import main

sys.exit(main())
