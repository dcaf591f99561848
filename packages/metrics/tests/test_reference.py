"""docs/reference/metrics.md names every series the collector serves, with its labels, and no
series it does not serve."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from jobdispatch.errors import Unavailable
from jobdispatch.records.store import Measured
from jobdispatch_metrics import RecordCollector
from metrics_scenario import PREEMPT_RESUBMIT, Scenario

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "metrics.md"


def _served(scenario: Scenario) -> dict[str, set[str]]:
    scenario.submit(PREEMPT_RESUBMIT)
    scenario.store.announce(
        "h:1:x", timedelta(seconds=30), Measured(poll_seconds=0.25, commit_seconds=0.01)
    )
    families = list(RecordCollector(scenario.store, cluster="c", per_job=True).collect())

    def down() -> object:
        raise Unavailable("away")

    families += list(RecordCollector(down, cluster="c").collect())  # type: ignore[arg-type]
    served: dict[str, set[str]] = {}
    for family in families:
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = served.setdefault(name, set())
        for sample in family.samples:
            labels.update(k for k in sample.labels if k not in ("cluster", "le"))
    return served


def test_every_served_series_is_in_the_reference_with_its_labels(scenario: Scenario) -> None:
    text = PAGE.read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(jobdispatch_[a-z_]+)` \|(.*)$", text, re.MULTILINE)
    }
    served = _served(scenario)
    assert set(served) == set(rows), (
        f"served, not in the reference: {sorted(set(served) - set(rows))}; "
        f"in the reference, not served: {sorted(set(rows) - set(served))}"
    )
    for name, labels in served.items():
        for label in labels:
            assert f"`{label}`" in rows[name], f"{name}'s label {label} is not in its row"
