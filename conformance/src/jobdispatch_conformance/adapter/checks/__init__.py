"""The adapter checks, as plain functions of a :class:`~jobdispatch_conformance.adapter.Harness`.

The suite's test classes call them; the suite's own tests call them directly on deliberately
broken adapters to show each one catches what it claims to.
"""

from __future__ import annotations

from jobdispatch_conformance.adapter.checks.config import (
    config_refuses_unknown_keys,
    schema_is_closed,
)
from jobdispatch_conformance.adapter.checks.declared import (
    capabilities_are_complete_and_stable,
    ceased_once_ended,
    identity_weakened_is_text,
    rules_agree_with_capabilities,
    rules_answer_each_rule_in_order,
    spec_capabilities_are_honoured,
    unauthorized_is_reported,
    unreachable_is_reported,
)
from jobdispatch_conformance.adapter.checks.discovery import (
    find_includes_lost_replies,
    find_many_agrees_with_find,
    find_returns_every_object_of_the_job,
    inspect_agrees_with_find,
    inspect_unknown_is_not_found,
    watch_shows_the_job,
)
from jobdispatch_conformance.adapter.checks.endings import (
    ENDINGS,
    EXEC_CODES,
    application_exit_code_is_its_own,
    ending,
    program_that_cannot_start_is_launch_failed,
)
from jobdispatch_conformance.adapter.checks.goodput import goodput_of_a_preempted_run
from jobdispatch_conformance.adapter.checks.holds import (
    held_object_does_not_run,
    hold_refuses_past_deadline,
    holds_by_instance,
)
from jobdispatch_conformance.adapter.checks.lifecycle import (
    open_after_stop_has_no_effect,
    open_lifts_the_gate_and_is_idempotent,
    open_refuses_past_deadline,
    start_creates_a_gated_object,
    stop_affects_one_object_only,
    stop_gated_never_runs,
    stop_is_idempotent,
    stop_running_is_cancelled_by_an_actor,
)
from jobdispatch_conformance.adapter.checks.output import (
    output_follows_until_the_end,
    output_grows,
    output_is_read,
)
from jobdispatch_conformance.adapter.checks.reruns import (
    native_rerun_tells_executions_apart,
    requeue_bit_is_restored,
    requeue_refuses_past_deadline,
    requeue_reruns_as_a_new_execution,
)
from jobdispatch_conformance.adapter.checks.submission import preview_is_what_start_creates

__all__ = [
    "ENDINGS",
    "EXEC_CODES",
    "application_exit_code_is_its_own",
    "capabilities_are_complete_and_stable",
    "ceased_once_ended",
    "config_refuses_unknown_keys",
    "ending",
    "find_includes_lost_replies",
    "find_many_agrees_with_find",
    "find_returns_every_object_of_the_job",
    "goodput_of_a_preempted_run",
    "held_object_does_not_run",
    "hold_refuses_past_deadline",
    "holds_by_instance",
    "identity_weakened_is_text",
    "inspect_agrees_with_find",
    "inspect_unknown_is_not_found",
    "native_rerun_tells_executions_apart",
    "open_after_stop_has_no_effect",
    "open_lifts_the_gate_and_is_idempotent",
    "open_refuses_past_deadline",
    "output_follows_until_the_end",
    "output_grows",
    "output_is_read",
    "preview_is_what_start_creates",
    "program_that_cannot_start_is_launch_failed",
    "requeue_bit_is_restored",
    "requeue_refuses_past_deadline",
    "requeue_reruns_as_a_new_execution",
    "rules_agree_with_capabilities",
    "rules_answer_each_rule_in_order",
    "schema_is_closed",
    "spec_capabilities_are_honoured",
    "start_creates_a_gated_object",
    "stop_affects_one_object_only",
    "stop_gated_never_runs",
    "stop_is_idempotent",
    "stop_running_is_cancelled_by_an_actor",
    "unauthorized_is_reported",
    "unreachable_is_reported",
    "watch_shows_the_job",
]
