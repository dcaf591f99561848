"""What every adapter needs and none should write again: the adapter kit.

An adapter is what is specific to its scheduler (how to talk to it, what its objects mean, what
its probe learns); everything adapters share lives here, written once:

* :mod:`~jobdispatch.kit.settings`: settings declared once, as attrs classes from which the
  JSON Schema is derived, read by one constructor, ``from_config``;
* :mod:`~jobdispatch.kit.refusal`: the start-time refusal of what the cluster answers no for;
* :mod:`~jobdispatch.kit.facts`: a cache of probed facts with a time to live;
* :mod:`~jobdispatch.kit.followed`: a followed output stream, for ``output(follow=True)``.

Each name is imported on first use (:mod:`jobdispatch._lazy`), so a plugin's registration that
imports one module of the kit pays for that module only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

if TYPE_CHECKING:
    from jobdispatch.kit.facts import FactsCache
    from jobdispatch.kit.followed import Followed, follow
    from jobdispatch.kit.refusal import refuse_unsupported, refuses_unsupported
    from jobdispatch.kit.settings import (
        ConfigSection,
        capabilities_setting,
        json_schema,
        probe_setting,
        probe_ttl_setting,
        section,
        setting,
    )

__all__ = [
    "ConfigSection",
    "FactsCache",
    "Followed",
    "capabilities_setting",
    "follow",
    "json_schema",
    "probe_setting",
    "probe_ttl_setting",
    "refuse_unsupported",
    "refuses_unsupported",
    "section",
    "setting",
]

__getattr__, __dir__ = lazy(__name__, __file__)
