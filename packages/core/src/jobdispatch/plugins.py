"""The plugin manager and the registries plugins add to.

Nothing here runs at import time. :func:`load` builds a manager in a fixed order (hookspecs,
names blocked by the environment, entry points, built-ins, ``check_pending``) and asks every
plugin to register what it provides. A plugin that fails to import is recorded with its
distribution and the reason, so ``jobdispatch plugins`` can show it, and the rest still load.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from types import ModuleType
from typing import Any

import attrs
import pluggy

from jobdispatch import hookspecs
from jobdispatch.errors import AlreadyRegistered, NotFound

__all__ = [
    "ENTRY_POINT_GROUP",
    "KINDS",
    "Entry",
    "LoadFailure",
    "Plugins",
    "Registry",
    "default",
    "load",
]

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


@attrs.frozen
class Entry:
    """One registered thing: its name, how to build it, and who provided it."""

    kind: str
    name: str
    factory: Callable[..., Any]
    schema: Mapping[str, Any] | None = None
    summary: str = ""
    provider: str = ""


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
        factory: Callable[..., Any],
        *,
        schema: Mapping[str, Any] | None = None,
        summary: str = "",
    ) -> None:
        """Register ``name``; a name taken already is AlreadyRegistered and the first stays."""
        if not name or not isinstance(name, str):
            msg = f"{self.kind} name must be a non-empty string, got {name!r}"
            raise ValueError(msg)
        if name in self._entries:
            first = self._entries[name].provider or "an earlier registration"
            msg = f"{self.kind} {name!r} is registered already (by {first})"
            raise AlreadyRegistered(msg)
        self._entries[name] = Entry(self.kind, name, factory, schema, summary, self._provider)

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
        owners[id(module)] = "jobdispatch (built-in)"
        loaded.append((module_name, "jobdispatch (built-in)"))
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
