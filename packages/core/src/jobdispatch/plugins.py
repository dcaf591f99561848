"""The plugin manager and the registries plugins add to.

Nothing here runs at import time. :func:`load` builds a manager in a fixed order (hookspecs,
names blocked by the environment, entry points, built-ins, ``check_pending``) and asks every
plugin to register what it provides. A plugin that fails to import is recorded with its
distribution and the reason, so ``jobdispatch plugins`` can show it, and the rest still load.

Adapters are separately released distributions, so each says which version of the adapter SPI
(:mod:`jobdispatch.spi`) it was written against, and registration refuses one this core cannot
drive (:data:`ADAPTER_SPI`, :func:`spi_compatible`) instead of failing later, mid-job, with an
``AttributeError``.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from types import ModuleType
from typing import Any

import attrs
import pluggy

from jobdispatch import hookspecs
from jobdispatch.errors import AlreadyRegistered, Invalid, NotFound

__all__ = [
    "ADAPTER_SPI",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "Entry",
    "IncompatibleAdapter",
    "LoadFailure",
    "Plugins",
    "Registration",
    "Registry",
    "Target",
    "default",
    "load",
    "registers",
    "resolve",
    "spi_compatible",
]

#: The version of the adapter SPI this core drives, ``MAJOR.MINOR``. A minor bump only adds
#: (a new optional protocol, a new optional field), so an adapter written for 1.0 still works
#: with a 1.3 core; a major bump changes or removes something adapters rely on. An adapter
#: passes the version it was written for as ``registry.add(..., spi="1.0")``.
#: 1.1 added :class:`~jobdispatch.spi.Paced` (an adapter's poll interval and floor) and
#: :class:`~jobdispatch.spi.ConcurrentCalls` (how many calls it takes at once), both issue 19.
ADAPTER_SPI = "1.1"
BUILTIN_PROVIDER = "jobdispatch (built-in)"

ENTRY_POINT_GROUP = "jobdispatch"
#: Every kind of thing a plugin can register, and the hook that asks for it.
KINDS: Mapping[str, str] = {
    "adapter": "jobdispatch_register_adapters",
    "record-store": "jobdispatch_register_record_stores",
    "escalation-sink": "jobdispatch_register_escalation_sinks",
    "credential-source": "jobdispatch_register_credential_sources",
}
#: Comma-separated plugin (entry-point) names not to load.
BLOCKED_ENV = "JOBDISPATCH_DISABLED_PLUGINS"
#: When set, only these comma-separated plugin names are loaded from entry points.
ONLY_ENV = "JOBDISPATCH_LOAD_PLUGINS"
#: Built-in plugin modules, registered after entry points; third parties add, never replace.
BUILTINS: tuple[str, ...] = ("jobdispatch._builtins",)


class IncompatibleAdapter(Invalid):
    """An adapter written for an adapter SPI this core does not speak (or that declares none)."""


def _spi(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        msg = f"an adapter SPI version is MAJOR.MINOR, like {ADAPTER_SPI!r}; got {text!r}"
        raise ValueError(msg)
    return int(major), int(minor)


def spi_compatible(declared: str, spoken: str = ADAPTER_SPI) -> bool:
    """Whether a core speaking SPI ``spoken`` can drive an adapter written for ``declared``.

    The majors must be equal and the adapter's minor at most the core's: a newer core keeps
    everything an older minor had, an older core lacks what a newer minor added.
    """
    (d_major, d_minor), (s_major, s_minor) = _spi(declared), _spi(spoken)
    return d_major == s_major and d_minor <= s_minor


def _core_version() -> str:
    try:
        return metadata.version("jobdispatch")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        return "unknown version"


#: What a plugin may register in place of an object: ``"module:attribute.path"``, imported the
#: first time the object is used, so that discovering the plugins imports none of them.
Target = str


def resolve(target: Target) -> Any:
    """The object ``"module:attribute.path"`` names (the module imported now)."""
    module, colon, path = target.partition(":")
    if not colon or not module or not path:
        msg = f"a plugin target is 'module:attribute', got {target!r}"
        raise ValueError(msg)
    found: Any = importlib.import_module(module)
    for part in path.split("."):
        found = getattr(found, part)
    return found


@attrs.frozen
class Entry:
    """One registered thing: its name, how to build it, and who provided it.

    The factory and the schema may be registered as :data:`Target` strings; reading
    :attr:`factory` or :attr:`schema` imports what they name. ``spi`` is the adapter SPI
    version an adapter was written for; empty for other kinds.
    """

    kind: str
    name: str
    factory_target: Callable[..., Any] | Target
    schema_target: Mapping[str, Any] | Target | None = None
    summary: str = ""
    provider: str = ""
    spi: str = ""

    @property
    def factory(self) -> Callable[..., Any]:
        """How to build the thing: ``factory(config, ...)`` (see :mod:`jobdispatch.hookspecs`)."""
        found = self.factory_target
        return _resolved(found) if isinstance(found, str) else found

    @property
    def schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema its configuration is checked against, if it registered one."""
        found = self.schema_target
        return _resolved(found) if isinstance(found, str) else found


_resolved = functools.cache(resolve)


@attrs.frozen
class LoadFailure:
    """A plugin that could not be loaded or could not register, and why."""

    plugin: str
    distribution: str
    error: str


class Registry:
    """The names of one kind of thing (adapters, record stores, ...) and their factories."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._provider = ""

    def add(
        self,
        name: str,
        factory: Callable[..., Any] | Target,
        *,
        schema: Mapping[str, Any] | Target | None = None,
        summary: str = "",
        spi: str | None = None,
    ) -> None:
        """Register ``name``; a name taken already is AlreadyRegistered and the first stays.

        ``factory`` and ``schema`` may be the objects or :data:`Target` strings naming them
        (``"jobdispatch_slurm.backend:SlurmBackend.from_config"``), imported when first used:
        a plugin's registration then imports nothing of the plugin.

        An adapter must say which adapter SPI it was written for (``spi="1.0"``); one this core
        cannot drive, or one that says nothing, is :class:`IncompatibleAdapter` and is not
        registered. The core's own adapters speak :data:`ADAPTER_SPI` by definition.
        """
        if not name or not isinstance(name, str):
            msg = f"{self.kind} name must be a non-empty string, got {name!r}"
            raise ValueError(msg)
        declared = ""
        if self.kind == "adapter":
            declared = self._check_spi(name, spi)
        if name in self._entries:
            first = self._entries[name].provider or "an earlier registration"
            msg = f"{self.kind} {name!r} is registered already (by {first})"
            raise AlreadyRegistered(msg)
        self._entries[name] = Entry(
            self.kind, name, factory, schema, summary, self._provider, declared
        )

    def _check_spi(self, name: str, spi: str | None) -> str:
        if spi is None and self._provider == BUILTIN_PROVIDER:
            return ADAPTER_SPI
        who = f"adapter {name!r} ({self._provider or 'unknown distribution'})"
        core = f"jobdispatch {_core_version()} speaks adapter SPI {ADAPTER_SPI}"
        if spi is None:
            msg = (
                f"{who} declares no adapter SPI version; {core}: the adapter must pass "
                f"spi={ADAPTER_SPI!r} to registry.add"
            )
            raise IncompatibleAdapter(msg)
        try:
            fits = spi_compatible(spi, ADAPTER_SPI)
        except ValueError as exc:
            msg = f"{who}: {exc}"
            raise IncompatibleAdapter(msg) from None
        if not fits:
            msg = (
                f"{who} was written for adapter SPI {spi}; {core}: install a release of "
                f"that adapter written for SPI {_spi(ADAPTER_SPI)[0]}.x, or a jobdispatch "
                f"that speaks SPI {spi}"
            )
            raise IncompatibleAdapter(msg)
        return spi

    def get(self, name: str) -> Entry:
        """The entry registered as ``name``; :class:`NotFound` lists the names there are."""
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            msg = f"no {self.kind} named {name!r} (registered: {known})"
            raise NotFound(msg) from None

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries[n] for n in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._entries


@attrs.frozen
class Registration:
    """One thing a plugin provides, as data: the arguments of one :meth:`Registry.add`."""

    name: str
    factory: Callable[..., Any] | Target
    schema: Mapping[str, Any] | Target | None = attrs.field(default=None, kw_only=True)
    summary: str = attrs.field(default="", kw_only=True)
    spi: str | None = attrs.field(default=None, kw_only=True)


def registers(*registrations: Registration) -> Callable[[Registry], None]:
    """A hook implementation that adds each of ``registrations``, in order.

    A plugin's ``_hooks`` module assigns it to the hook's name
    (``jobdispatch_register_adapters = registers(Registration(...))``): its registration is then
    data, and calling :meth:`Registry.add` is written here, once, for every plugin. The first
    refused registration (a taken name, an incompatible SPI) stops the rest, as a hand-written
    hook would.
    """

    @hookspecs.hookimpl
    def register(registry: Registry) -> None:
        for each in registrations:
            registry.add(
                each.name, each.factory, schema=each.schema, summary=each.summary, spi=each.spi
            )

    return register


@attrs.define
class Plugins:
    """A loaded plugin manager with every registry filled, and what failed to load."""

    manager: pluggy.PluginManager
    registries: dict[str, Registry]
    failures: list[LoadFailure]
    loaded: list[tuple[str, str]]  # (plugin name, distribution)

    def registry(self, kind: str) -> Registry:
        """The registry of one kind (see :data:`KINDS`)."""
        try:
            return self.registries[kind]
        except KeyError:
            msg = f"no plugin kind {kind!r} (kinds: {', '.join(KINDS)})"
            raise NotFound(msg) from None


def _names(env: Mapping[str, str], key: str) -> set[str]:
    return {n.strip() for n in env.get(key, "").split(",") if n.strip()}


def _distribution(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"


def load(
    *,
    entry_points: bool = True,
    env: Mapping[str, str] | None = None,
    extra: tuple[ModuleType | object, ...] = (),
) -> Plugins:
    """Build a plugin manager and fill every registry.

    Args:
        entry_points: load third-party plugins from the ``jobdispatch`` entry-point group.
        env: where to read ``JOBDISPATCH_DISABLED_PLUGINS`` and ``JOBDISPATCH_LOAD_PLUGINS``
            from; the process environment by default.
        extra: plugin objects to register after the built-ins (tests use this).
    """
    env = os.environ if env is None else env
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    blocked = _names(env, BLOCKED_ENV)
    only = _names(env, ONLY_ENV)
    for name in sorted(blocked):
        pm.set_blocked(name)

    failures: list[LoadFailure] = []
    loaded: list[tuple[str, str]] = []
    owners: dict[int, str] = {}
    if entry_points:
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in blocked or (only and ep.name not in only):
                continue
            dist = _distribution(ep)
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
            except Exception as exc:
                failures.append(LoadFailure(ep.name, dist, f"{type(exc).__name__}: {exc}"))
                continue
            owners[id(plugin)] = dist
            loaded.append((ep.name, dist))

    for module_name in BUILTINS:
        module = __import__(module_name, fromlist=["_"])
        pm.register(module, name=f"builtin:{module_name}")
        owners[id(module)] = BUILTIN_PROVIDER
        loaded.append((module_name, BUILTIN_PROVIDER))
    for i, plugin in enumerate(extra):
        pm.register(plugin, name=f"extra:{i}")
        owners[id(plugin)] = getattr(plugin, "__name__", f"extra plugin {i}")
    pm.check_pending()

    registries = {kind: Registry(kind) for kind in KINDS}
    builtin_names = {f"builtin:{m}" for m in BUILTINS}
    for kind, hook_name in KINDS.items():
        registry = registries[kind]
        impls = getattr(pm.hook, hook_name).get_hookimpls()
        # Built-ins register first, so that no plugin can take a built-in's name.
        impls.sort(key=lambda i: (i.plugin_name not in builtin_names, i.plugin_name))
        for impl in impls:
            registry._provider = owners.get(id(impl.plugin), impl.plugin_name)
            try:
                impl.function(registry=registry)
            except Exception as exc:
                failures.append(
                    LoadFailure(
                        impl.plugin_name, registry._provider, f"{type(exc).__name__}: {exc}"
                    )
                )
        registry._provider = ""
    return Plugins(pm, registries, failures, loaded)


_lock = threading.Lock()


@functools.cache
def _default() -> Plugins:
    return load()


def default() -> Plugins:
    """The process's plugins, loaded on first use (never at import time)."""
    with _lock:
        return _default()


def reset_default() -> None:
    """Forget the loaded plugins, so the next :func:`default` loads them again."""
    with _lock:
        _default.cache_clear()
