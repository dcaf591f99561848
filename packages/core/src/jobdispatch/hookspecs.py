"""The hooks a dispatch plugin may implement.

A plugin is a module listed under the ``jobdispatch`` entry-point group::

    [project.entry-points.jobdispatch]
    slurm = "jobdispatch_slurm._hooks"

The module must be cheap to import: it only registers factories, by string where it can
(``"jobdispatch_slurm.backend:SlurmBackend.from_config"``), so heavy clients (kubernetes,
psycopg, boto3) and the plugin's own modules are imported when something is actually built.
Each hook receives a :class:`~jobdispatch.plugins.Registry` for one kind of thing and calls
``registry.add(name, factory, ...)`` once per thing it provides; a plugin usually writes that as
data, ``jobdispatch_register_adapters = registers(Registration(name, factory, ...))``
(:func:`~jobdispatch.plugins.registers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from jobdispatch.plugins import Registry

PROJECT = "jobdispatch"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def jobdispatch_register_adapters(registry: Registry) -> None:
    """Add scheduler adapters.

    Args:
        registry: adapters by name. ``factory(config, token)`` receives the adapter's section of
            the configuration, already validated against ``schema`` (a JSON Schema; additional
            properties are refused at every level), and a token callable to call on every use.
    """


@hookspec
def jobdispatch_register_record_stores(registry: Registry) -> None:
    """Add record stores.

    Args:
        registry: record stores by name. ``factory(config)`` receives the validated
            configuration and returns a store implementing :class:`jobdispatch.records.Records`.
    """


@hookspec
def jobdispatch_register_escalation_sinks(registry: Registry) -> None:
    """Add escalation sinks, through which the supervisor tells a person.

    Args:
        registry: sinks by name. ``factory(config)`` returns an object with
            ``deliver(escalation)``.
    """


@hookspec
def jobdispatch_register_credential_sources(registry: Registry) -> None:
    """Add credential sources for checkpoint storage (S3 and the like).

    Args:
        registry: credential sources by name. ``factory(config)`` returns a source whose
            ``credentials()`` answers the credentials it can find, or ``None``.
    """
