"""The adapter suite as pytest classes an adapter's own tests subclass.

    from jobdispatch_conformance.adapter import AdapterSuite, Driver, Timeouts

    class TestSlurmContract(AdapterSuite):
        @pytest.fixture
        def backend_factory(self, cluster):
            return lambda: SlurmBackend(...)

        @pytest.fixture
        def driver_factory(self, cluster):
            return lambda backend: MySlurmDriver(cluster)

        @pytest.fixture
        def timeouts(self):
            return Timeouts(settle=600, poll=2, quiet=15)

No class here is collected by itself (none is named ``Test*``). The areas are separate mixins,
so an adapter may take only some of them, and any single test can be overridden by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from jobdispatch.spi import Backend

from jobdispatch_conformance.adapter import checks
from jobdispatch_conformance.adapter.driver import Driver, Timeouts
from jobdispatch_conformance.adapter.harness import Harness

__all__ = [
    "AdapterFixtures",
    "AdapterSuite",
    "ConfigurationTests",
    "DeclarationTests",
    "DiscoveryTests",
    "EndingTests",
    "HoldTests",
    "LifecycleTests",
    "OutputTests",
    "RerunTests",
    "SubmissionTests",
]


class AdapterFixtures:
    """The fixtures the suite needs. ``backend_factory`` must be overridden; the rest have
    defaults that suit a real cluster reached with no driver at all."""

    @pytest.fixture
    def backend_factory(self) -> Callable[[], Backend]:
        """Builds a fresh backend of the adapter under test."""
        msg = "override the backend_factory fixture in the adapter's test class"
        raise NotImplementedError(msg)

    @pytest.fixture
    def driver_factory(self) -> Callable[[Backend], Driver]:
        """Builds the environment driver for a backend; by default one that can do nothing."""
        return lambda backend: Driver()

    @pytest.fixture
    def timeouts(self) -> Timeouts:
        """How long to wait; the default suits a real, slow cluster."""
        return Timeouts()

    @pytest.fixture
    def adapter_name(self) -> str | None:
        """The adapter's registered name, for the configuration checks (None: skip them)."""
        return None

    @pytest.fixture
    def adapter_config(self) -> Mapping[str, Any] | None:
        """A valid configuration of the adapter, for the configuration checks."""
        return None

    @pytest.fixture
    def harness(
        self,
        backend_factory: Callable[[], Backend],
        driver_factory: Callable[[Backend], Driver],
        timeouts: Timeouts,
        request: pytest.FixtureRequest,
    ) -> Iterator[Harness]:
        def note(key: str, value: str) -> None:
            # What record_property does, without its warning under JUnit's xunit2 family: the
            # notes reach the JSON summary through the report's user_properties.
            request.node.user_properties.append((key, value))

        backend = backend_factory()
        harness = Harness(backend, driver_factory(backend), timeouts, note=note)
        try:
            yield harness
        finally:
            harness.cleanup()
            backend.close()


class LifecycleTests(AdapterFixtures):
    """Gate, open, stop."""

    def test_start_creates_a_gated_object(self, harness: Harness) -> None:
        checks.start_creates_a_gated_object(harness)

    def test_open_lifts_the_gate_and_is_idempotent(self, harness: Harness) -> None:
        checks.open_lifts_the_gate_and_is_idempotent(harness)

    def test_open_after_stop_has_no_effect(self, harness: Harness) -> None:
        checks.open_after_stop_has_no_effect(harness)

    def test_open_refuses_past_deadline(self, harness: Harness) -> None:
        checks.open_refuses_past_deadline(harness)

    def test_stop_running_is_cancelled_by_an_actor(self, harness: Harness) -> None:
        checks.stop_running_is_cancelled_by_an_actor(harness)

    def test_stop_affects_one_object_only(self, harness: Harness) -> None:
        checks.stop_affects_one_object_only(harness)

    def test_stop_is_idempotent(self, harness: Harness) -> None:
        checks.stop_is_idempotent(harness)

    def test_stop_gated_never_runs(self, harness: Harness) -> None:
        checks.stop_gated_never_runs(harness)


class DiscoveryTests(AdapterFixtures):
    """Find, inspect, find_many, watch."""

    def test_find_returns_every_object_of_the_job(self, harness: Harness) -> None:
        checks.find_returns_every_object_of_the_job(harness)

    def test_find_includes_lost_replies(self, harness: Harness) -> None:
        checks.find_includes_lost_replies(harness)

    def test_inspect_agrees_with_find(self, harness: Harness) -> None:
        checks.inspect_agrees_with_find(harness)

    def test_inspect_unknown_is_not_found(self, harness: Harness) -> None:
        checks.inspect_unknown_is_not_found(harness)

    def test_find_many_agrees_with_find(self, harness: Harness) -> None:
        checks.find_many_agrees_with_find(harness)

    def test_watch_shows_the_job(self, harness: Harness) -> None:
        checks.watch_shows_the_job(harness)


class EndingTests(AdapterFixtures):
    """Every ending the driver can cause, with its typed cause."""

    @pytest.mark.parametrize("operation", list(checks.ENDINGS))
    def test_ending_gives_its_cause(self, harness: Harness, operation: str) -> None:
        checks.ending(harness, operation)

    def test_program_that_cannot_start_is_launch_failed(self, harness: Harness) -> None:
        checks.program_that_cannot_start_is_launch_failed(harness)

    @pytest.mark.parametrize("code", checks.EXEC_CODES)
    def test_application_exit_code_is_its_own(self, harness: Harness, code: int) -> None:
        checks.application_exit_code_is_its_own(harness, code)

    def test_goodput_of_a_preempted_run(self, harness: Harness) -> None:
        checks.goodput_of_a_preempted_run(harness)


class RerunTests(AdapterFixtures):
    """Native requeue or restart, requested requeue, the requeue bit."""

    def test_native_rerun_tells_executions_apart(self, harness: Harness) -> None:
        checks.native_rerun_tells_executions_apart(harness)

    def test_requeue_reruns_as_a_new_execution(self, harness: Harness) -> None:
        checks.requeue_reruns_as_a_new_execution(harness)

    def test_requeue_refuses_past_deadline(self, harness: Harness) -> None:
        checks.requeue_refuses_past_deadline(harness)

    def test_requeue_bit_is_restored(self, harness: Harness) -> None:
        checks.requeue_bit_is_restored(harness)


class HoldTests(AdapterFixtures):
    """Holds by instance, under deadlines."""

    def test_holds_by_instance(self, harness: Harness) -> None:
        checks.holds_by_instance(harness)

    def test_hold_refuses_past_deadline(self, harness: Harness) -> None:
        checks.hold_refuses_past_deadline(harness)

    def test_held_object_does_not_run(self, harness: Harness) -> None:
        checks.held_object_does_not_run(harness)


class OutputTests(AdapterFixtures):
    """Output read and follow, where claimed."""

    def test_output_is_read(self, harness: Harness) -> None:
        checks.output_is_read(harness)

    def test_output_follows_until_the_end(self, harness: Harness) -> None:
        checks.output_follows_until_the_end(harness)

    def test_output_grows(self, harness: Harness) -> None:
        checks.output_grows(harness)


class DeclarationTests(AdapterFixtures):
    """Capabilities and rules: complete, stable, in agreement with behaviour."""

    def test_capabilities_are_complete_and_stable(self, harness: Harness) -> None:
        checks.capabilities_are_complete_and_stable(harness)

    def test_rules_answer_each_rule_in_order(self, harness: Harness) -> None:
        checks.rules_answer_each_rule_in_order(harness)

    def test_rules_agree_with_capabilities(self, harness: Harness) -> None:
        checks.rules_agree_with_capabilities(harness)

    def test_spec_capabilities_are_honoured(self, harness: Harness) -> None:
        checks.spec_capabilities_are_honoured(harness)

    def test_ceased_once_ended(self, harness: Harness) -> None:
        checks.ceased_once_ended(harness)

    def test_identity_weakened_is_text(self, harness: Harness) -> None:
        checks.identity_weakened_is_text(harness)

    def test_unreachable_is_reported(self, harness: Harness) -> None:
        checks.unreachable_is_reported(harness)

    def test_unauthorized_is_reported(self, harness: Harness) -> None:
        checks.unauthorized_is_reported(harness)


class ConfigurationTests(AdapterFixtures):
    """The adapter's configuration schema and its refusal of unknown keys."""

    def test_schema_is_closed(self, adapter_name: str | None) -> None:
        if adapter_name is None:
            pytest.skip("no adapter_name fixture: the configuration checks need one")
        checks.schema_is_closed(adapter_name)

    def test_config_refuses_unknown_keys(
        self, adapter_name: str | None, adapter_config: Mapping[str, Any] | None
    ) -> None:
        if adapter_name is None or adapter_config is None:
            pytest.skip("no adapter_name and adapter_config fixtures: needed to check config")
        checks.config_refuses_unknown_keys(adapter_name, adapter_config)


class SubmissionTests(AdapterFixtures):
    """The dry run shows what start creates."""

    def test_preview_is_what_start_creates(self, harness: Harness) -> None:
        checks.preview_is_what_start_creates(harness)


class AdapterSuite(
    LifecycleTests,
    DiscoveryTests,
    EndingTests,
    RerunTests,
    HoldTests,
    OutputTests,
    DeclarationTests,
    ConfigurationTests,
    SubmissionTests,
):
    """Every area of the adapter contract. Subclass it and override ``backend_factory`` (and
    ``driver_factory``, ``timeouts``, ``adapter_name``, ``adapter_config`` as the adapter can)."""
