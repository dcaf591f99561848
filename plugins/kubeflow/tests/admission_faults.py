"""The admission controller with a test fault point, run as a script with the controller's own
arguments: ``python admission_faults.py exit-after-spend run --lease-namespace ...``.

``exit-after-spend`` exits (code 3) right after the controller recorded an open as spent on a
Workload and before it answered the check Ready: the kill-and-restart test of spec 0012 §4.
The fault lives here, with the tests, so the shipped controller has no way to crash on purpose.
"""

from __future__ import annotations

import os
import sys

from jobdispatch_kubeflow import admission

#: The exit code the fault point exits with.
EXIT_AFTER_SPEND = 3


class ExitAfterSpend(admission.Controller):
    """Exits between the two writes of an admission."""

    def spent(self, namespace: str, name: str, open_id: str) -> None:
        super().spent(namespace, name, open_id)
        admission.log.warning("fault point exit-after-spend: exiting before answering Ready")
        os._exit(EXIT_AFTER_SPEND)


FAULTS: dict[str, type[admission.Controller]] = {"exit-after-spend": ExitAfterSpend}

if __name__ == "__main__":
    fault, *arguments = sys.argv[1:]
    sys.exit(admission.main(arguments, controller=FAULTS[fault]))
