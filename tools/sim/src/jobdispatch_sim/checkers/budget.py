"""Invariant 3: no rule authorizes more submissions (or recoveries) than its budget, and one
trigger authorizes at most one. A firing a ``no-advance`` rule said it does not charge is not
counted (invariant 10 checks that it was right not to).

The checker does not trust the ``rule`` field a decision carries (a bug could charge the wrong
rule, or none): it attributes every recovery triggered by an execution's end or a failed launch
to the first rule of the plan whose effective causes include the recorded cause, as the
contract defines, and counts. Native reruns the backend performed count against the rule whose
offer they were charged to, so a budget offered twice (once per object) shows up too.
"""

from __future__ import annotations

from jobdispatch.memory import history as h
from jobdispatch.records import events as ev
from jobdispatch.triggers import End, Launch, Trigger
from jobdispatch.types import Plan

from jobdispatch_sim.checkers import Checker, Violation
from jobdispatch_sim.timeline import Commit, Happened, Item, Submitted


def _rule_for(plan: Plan, kind: object) -> int | None:
    for assignment in plan.rules:
        if kind in assignment.effective.on:
            return assignment.index
    return None


class Budget(Checker):
    invariant = 3
    name = "budgets and triggers"

    def __init__(self) -> None:
        self.plans: dict[str, Plan] = {}
        self.triggers: dict[str, set[Trigger]] = {}
        self.used: dict[tuple[str, int], int] = {}

    def _charge(self, job: str, rule: int, what: str, seq: int) -> list[Violation]:
        key = (job, rule)
        self.used[key] = self.used.get(key, 0) + 1
        budget = self.plans[job].rules[rule].effective.budget
        if self.used[key] > budget:
            return [
                self.violation(
                    job,
                    f"rule {rule} (budget {budget}) authorized its recovery number "
                    f"{self.used[key]}: {what}",
                    seq,
                )
            ]
        return []

    def feed(self, item: Item) -> list[Violation]:
        if isinstance(item, Submitted):
            self.plans[item.job] = item.header.plan
            return []
        if isinstance(item, Happened):
            e = item.entry
            if isinstance(e, h.NativeRerun) and e.rule is not None and e.job in self.plans:
                return self._charge(e.job, e.rule, f"native {e.mode} of {e.ref}", item.seq)
            return []
        if not isinstance(item, Commit):
            return []
        e2 = item.event
        if not isinstance(e2, ev.SubmissionAuthorized | ev.RecoveryDecided):
            return []
        out: list[Violation] = []
        seen = self.triggers.setdefault(item.job, set())
        if e2.trigger in seen:
            out.append(
                self.violation(
                    item.job, f"trigger {str(e2.trigger)!r} authorized a second recovery", item.seq
                )
            )
        seen.add(e2.trigger)
        if not isinstance(e2.trigger, End | Launch):
            return out
        plan = self.plans[item.job]
        cause = e2.cause
        rule = _rule_for(plan, cause.kind) if cause is not None else None
        if rule is None:
            out.append(
                self.violation(
                    item.job,
                    f"{e2.kind} for {e2.trigger} names a cause ({cause}) no rule covers",
                    item.seq,
                )
            )
            return out
        if e2.charged is False:
            return out  # a no-advance rule's firing after training advanced: not charged
        what = f"submission {e2.n}" if isinstance(e2, ev.SubmissionAuthorized) else "recovery"
        out.extend(self._charge(item.job, rule, f"{what} for {e2.trigger}", item.seq))
        return out
