"""Fixtures that run the adapter suite against a site's own cluster, as the command line does.

``jobdispatch-conformance run`` puts a :class:`Site` into the pytest config's stash and runs a
generated test class that mixes :class:`SiteFixtures` into the suite, so the same tests that run
in an adapter's CI run at a site, built from the site's configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
from jobdispatch.spi import Backend

from jobdispatch_conformance.adapter.driver import Driver, Timeouts
from jobdispatch_conformance.adapter.suite import AdapterFixtures

__all__ = ["SITE", "Site", "SiteFixtures"]


@attrs.frozen
class Site:
    """What the command line was told: the adapter, its configuration, a driver, timeouts."""

    adapter: str
    config: Mapping[str, Any]
    driver: Callable[[Backend], Driver]
    timeouts: Timeouts


SITE = pytest.StashKey[Site]()


class SiteFixtures(AdapterFixtures):
    """Suite fixtures built from the :class:`Site` in the config's stash."""

    @pytest.fixture
    def site(self, pytestconfig: pytest.Config) -> Site:
        return pytestconfig.stash[SITE]

    @pytest.fixture
    def backend_factory(self, site: Site) -> Callable[[], Backend]:
        import jobdispatch

        return lambda: jobdispatch.new_backend(site.adapter, site.config)

    @pytest.fixture
    def driver_factory(self, site: Site) -> Callable[[Backend], Driver]:
        return site.driver

    @pytest.fixture
    def timeouts(self, site: Site) -> Timeouts:
        return site.timeouts

    @pytest.fixture
    def adapter_name(self, site: Site) -> str | None:
        return site.adapter

    @pytest.fixture
    def adapter_config(self, site: Site) -> Mapping[str, Any] | None:
        return site.config
