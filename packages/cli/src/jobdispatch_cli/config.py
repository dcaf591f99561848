"""Named clusters and defaults, from ``$XDG_CONFIG_HOME/jobdispatch/config.toml``.

::

    default_cluster = "local"          # what --cluster falls back to
    store = "~/jd-records"             # default: $XDG_STATE_HOME/jobdispatch/records

    [clusters.local]                   # "local" exists even when not written here
    adapter = "local"
    grace = 5

    [clusters.bigbox]
    adapter = "local"
    state_dir = "/scratch/jobdispatch"
    memory_limit = "64G"

    [escalations.pager]                # besides the log, where `run` and `supervise` send them
    sink = "command"
    argv = ["/usr/local/bin/page-oncall", "--team", "training"]

Everything is checked when the file is read: unknown keys, an adapter or sink nobody
registered, and each cluster's and sink's settings against its plugin's schema, every error
naming the key and its line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.errors import NotFound, ValidationError
from jobdispatch.plugins import Plugins, Registry

from jobdispatch_cli.jobfile import FileError, FileProblem, NoSuchFile, parse_toml
from jobdispatch_cli.locate import line_of

__all__ = [
    "DEFAULT_CLUSTER",
    "Cluster",
    "Config",
    "EscalationSink",
    "config_path",
    "load_config",
    "state_home",
]

DEFAULT_CLUSTER = "local"
_TOP_KEYS = ("default_cluster", "store", "clusters", "escalations")
#: The sink every supervisor of the command delivers to, configured or not.
LOG_SINK = "log"


def config_home(env: Mapping[str, str]) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def state_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$JOBDISPATCH_CONFIG``, else ``$XDG_CONFIG_HOME/jobdispatch/config.toml``."""
    env = os.environ if env is None else env
    if env.get("JOBDISPATCH_CONFIG"):
        return Path(env["JOBDISPATCH_CONFIG"])
    return config_home(env) / "jobdispatch" / "config.toml"


@attrs.frozen
class Cluster:
    """One named cluster: its adapter and the adapter's settings."""

    name: str
    adapter: str
    settings: Mapping[str, Any]
    source: str


@attrs.frozen
class EscalationSink:
    """One configured escalation sink: the table's name (deliveries are recorded under it),
    the registered sink it builds, and that sink's settings."""

    name: str
    sink: str
    settings: Mapping[str, Any]
    source: str


@attrs.frozen
class Config:
    """The whole configuration, checked."""

    path: Path
    exists: bool
    clusters: Mapping[str, Cluster]
    default_cluster: str
    records_root: Path
    escalations: tuple[EscalationSink, ...] = ()

    def cluster(self, name: str | None) -> Cluster:
        name = name or self.default_cluster
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted(self.clusters))
            where = str(self.path) if self.exists else f"{self.path} (not written yet)"
            msg = f"no cluster named {name!r} (clusters: {known}; configured in {where})"
            raise NotFound(msg) from None


def load_config(
    plugins: Plugins, path: Path | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Read and check the configuration. A missing file at the default place gives the
    defaults; one named (``path``, or ``$JOBDISPATCH_CONFIG``) must exist, since a typo in
    its name would otherwise quietly run everything on the defaults."""
    env = os.environ if env is None else env
    named = path is not None or bool(env.get("JOBDISPATCH_CONFIG"))
    path = path or config_path(env)
    file = str(path)
    try:
        text = path.read_text()
        exists = True
    except FileNotFoundError:
        if named:
            raise NoSuchFile(path) from None
        text, exists = "", False
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError([FileProblem(file, None, "", f"cannot be read: {exc}")]) from None
    data, lines = parse_toml(text, file)
    problems: list[FileProblem] = []

    def problem(field: str, message: str) -> None:
        problems.append(FileProblem(file, line_of(lines, field), field, message))

    for key in data:
        if key not in _TOP_KEYS:
            problem(key, f"unknown key (known keys: {', '.join(_TOP_KEYS)})")
    clusters: dict[str, Cluster] = {
        DEFAULT_CLUSTER: Cluster(DEFAULT_CLUSTER, "local", {}, "built-in")
    }
    raw_clusters = data.get("clusters", {})
    if not isinstance(raw_clusters, dict):
        problem("clusters", "must be a table of clusters ([clusters.NAME])")
        raw_clusters = {}
    adapters = plugins.registry("adapter")
    for name, raw in raw_clusters.items():
        checked = _plugin_table(
            adapters, raw, f"clusters.{name}", "adapter", f"cluster {name!r}", problem
        )
        if checked is not None:
            adapter, settings = checked
            clusters[name] = Cluster(name, adapter, settings, f"{file}, [clusters.{name}]")
    escalations = _escalations(plugins, data.get("escalations", {}), file, problem)
    default = data.get("default_cluster", DEFAULT_CLUSTER)
    if not isinstance(default, str):
        problem("default_cluster", f"must be a cluster's name, got {default!r}")
        default = DEFAULT_CLUSTER
    elif default not in clusters and not problems:
        problem("default_cluster", f"names no cluster (clusters: {', '.join(sorted(clusters))})")
    store = data.get("store")
    if store is not None and not (isinstance(store, str) and store and "\x00" not in store):
        problem("store", f"must be a directory, got {store!r}")
        store = None
    root = state_home(env) / "jobdispatch" / "records"
    if store:
        try:
            root = Path(store).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            problem("store", f"{store!r} starts with the home folder of an unknown user")
    if problems:
        raise FileError(problems)
    return Config(
        path=path,
        exists=exists,
        clusters=clusters,
        default_cluster=default,
        records_root=root,
        escalations=escalations,
    )


def _escalations(
    plugins: Plugins, raw: Any, file: str, problem: Callable[[str, str], None]
) -> tuple[EscalationSink, ...]:
    """The ``[escalations.NAME]`` tables, each checked against its sink's schema."""
    if not isinstance(raw, dict):
        problem("escalations", "must be a table of sinks ([escalations.NAME])")
        return ()
    registry = plugins.registry("escalation-sink")
    out = []
    for name, table in raw.items():
        at = f"escalations.{name}"
        if name == LOG_SINK:
            problem(at, "the log sink always runs; give this sink another name")
            continue
        if isinstance(table, dict) and "name" in table:
            problem(f"{at}.name", f"the sink's name is its table's: {name!r}")
            continue
        checked = _plugin_table(registry, table, at, "sink", f"escalation sink {name!r}", problem)
        if checked is not None:
            sink, settings = checked
            out.append(EscalationSink(name, sink, settings, f"{file}, [escalations.{name}]"))
    return tuple(out)


def _plugin_table(
    registry: Registry,
    table: Any,
    at: str,
    key: str,
    subject: str,
    problem: Callable[[str, str], None],
) -> tuple[str, dict[str, Any]] | None:
    """A ``[section.NAME]`` table (at ``at``) that names a registered plugin under ``key``,
    the rest being that plugin's settings, checked against its schema. The plugin's name and
    its settings; None, with every problem told, when the table is not right."""
    if not isinstance(table, dict):
        problem(at, f"must be a table with {key} = NAME and its settings")
        return None
    chosen = table.get(key)
    if not isinstance(chosen, str):
        problem(f"{at}.{key}", f"is required: one of {', '.join(registry.names())}")
        return None
    settings = {k: v for k, v in table.items() if k != key}
    try:
        entry = registry.get(chosen)
    except NotFound as exc:
        problem(f"{at}.{key}", exc.message)
        return None
    try:
        validate_config(settings, entry.schema, subject=subject)
    except ValidationError as exc:
        for p in exc.problems:
            field = f"{at}.{p.path}" if p.path and p.path != "(top level)" else at
            problem(field, p.message)
        return None
    return chosen, settings
