"""Named clusters and defaults, from ``$XDG_CONFIG_HOME/jobdispatch/config.toml``.

::

    default_cluster = "local"          # what --cluster falls back to
    store = "~/jd-records"             # default: $XDG_STATE_HOME/jobdispatch/records

    # or, instead of that line, a shared PostgreSQL store (jobdispatch-records-postgres):
    # store = "postgresql://dispatch@db.example.org/dispatch"
    # or a table, with the store's settings (the password from a file, TLS):
    # [store]
    # kind = "postgresql"
    # dsn = "postgresql://dispatch@db.example.org/dispatch"
    # password_file = "/etc/jobdispatch/pg-password"
    # sslmode = "verify-full"

    [clusters.local]                   # "local" exists even when not written here
    adapter = "local"
    grace = 5

    [clusters.bigbox]
    adapter = "local"
    state_dir = "/scratch/jobdispatch"
    memory_limit = "64G"

    [clusters.hpc]
    adapter = "slurm"
    poll_interval = 60                 # seconds between polls (the adapter's default: 30)
    poll_floor = 10                    # never more often (a site may raise the adapter's 2)
    prices = { gpu_hour = 2.5, core_hour = 0.04, queues = { a100 = { gpu_hour = 4.0 } } }

    [escalations.pager]                # besides the log, where `run` and `supervise` send them
    sink = "command"
    argv = ["/usr/local/bin/page-oncall", "--team", "training"]

    [escalations.team]                 # escalations, and the lifecycle notices named in notify
    sink = "slack"
    url_file = "/etc/jobdispatch/slack-url"
    notify = ["ended", "settled"]

    [heartbeat]                        # pinged after every poll that saw store and cluster
    url_file = "/etc/jobdispatch/deadman-url"

A top-level ``dashboard_url = "https://dispatch.example.org"`` makes every notice link its
job's page, ``<dashboard_url>/jobs/<job>`` (no user name or password in it: links are shown).

A cluster's ``sinks`` (a list of ``[escalations.NAME]`` names) limits its supervisors to those
sinks (and the log); without it they deliver to every one.

A cluster's ``poll_interval`` and ``poll_floor`` (seconds) are the command's, not the adapter's:
how often its supervisors poll the cluster (by default the adapter's pacing: Slurm every 30 s,
local every 0.5 s), and never more often than the floor, which a site may raise above the
adapter's (Slurm 2 s) but never lower, up to 10 s. ``--poll`` sets the interval for one run,
never below the floor. A cluster's ``prices`` (per GPU-hour and per core-hour, with overrides
per queue or partition) turn ``goodput``'s resource time into cost.

Everything is checked when the file is read: unknown keys, an adapter or sink nobody
registered, and each cluster's and sink's settings against its plugin's schema, every error
naming the key and its line. A cluster's own problems (its adapter not installed, its settings
wrong) stop only the commands that use that cluster: a team's file may name a Kubernetes
cluster that someone with only the Slurm adapter installed never touches. ``clusters`` shows
them as warnings.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.errors import NotFound, ValidationError
from jobdispatch.goodput import Prices, prices_from
from jobdispatch.plugins import BLOCKED_ENV, ENTRY_POINT_GROUP, ONLY_ENV, Plugins, Registry
from jobdispatch.spi import MAX_POLL_FLOOR, MAX_POLL_INTERVAL

from jobdispatch_cli.jobfile import FileError, FileProblem, NoSuchFile, parse_toml
from jobdispatch_cli.locate import line_of

__all__ = [
    "ADAPTER_DISTRIBUTIONS",
    "DEFAULT_CLUSTER",
    "POSTGRES_SCHEMES",
    "STORE_DISTRIBUTIONS",
    "TEST_ONLY_ADAPTERS",
    "Cluster",
    "Config",
    "EscalationSink",
    "HeartbeatConfig",
    "SharedStore",
    "cluster_schema",
    "config_path",
    "load_config",
    "missing_adapter",
    "state_home",
    "store_label",
    "store_value_problem",
    "user_adapters",
]

DEFAULT_CLUSTER = "local"
#: The first-party adapters and the distribution that brings each: with only jobdispatch-cli
#: installed, a cluster of another one is told what to install rather than "no such adapter".
ADAPTER_DISTRIBUTIONS: Mapping[str, str] = {
    "local": "jobdispatch-local",
    "slurm": "jobdispatch-slurm",
    "kubeflow": "jobdispatch-kubeflow",
}
#: Adapters registered for tests that are not clusters anyone runs jobs on: the core's
#: in-process memory scheduler forgets everything when the command exits.
TEST_ONLY_ADAPTERS = frozenset({"memory"})
_TOP_KEYS = ("default_cluster", "store", "clusters", "escalations", "heartbeat", "dashboard_url")
#: What a ``store`` (or ``--store``) that names a PostgreSQL database starts with.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: What marks a store value as a URL rather than a directory.
URL_MARK = "://"
#: The record store a ``[store]`` table may name besides a directory, and what brings it.
STORE_DISTRIBUTIONS: Mapping[str, str] = {"postgresql": "jobdispatch-records-postgres"}
#: A cluster's keys that are the command's, not its adapter's: how often its supervisors poll.
PACING_KEYS = ("poll_interval", "poll_floor")
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
    """One named cluster: its adapter, the adapter's settings, and the site's pacing of its
    supervisors (``poll_interval``, ``poll_floor``: None leaves the adapter's)."""

    name: str
    adapter: str
    settings: Mapping[str, Any]
    source: str
    poll_interval: float | None = None
    poll_floor: float | None = None
    #: What an hour of a GPU or a core costs here (``prices``), for ``goodput``; None: unpriced.
    prices: Prices | None = None
    #: The sinks its supervisors deliver to, by name (None: every configured sink).
    sinks: tuple[str, ...] | None = None


@attrs.frozen
class HeartbeatConfig:
    """``[heartbeat]``: the dead-man URL (given, or read from a file: it often holds a token)
    and the ping's timeout. The URL is read when a supervisor is made, never printed."""

    url: str | None
    url_file: str | None
    timeout: float
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
class SharedStore:
    """A record store other than the LMDB directories: its registered kind (``postgresql``)
    and its settings, checked against that store's schema."""

    kind: str
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
    heartbeat: HeartbeatConfig | None = None
    #: Where a job's page is: ``dashboard_url``; notices link to ``<dashboard_url>/jobs/<job>``.
    dashboard_url: str | None = None
    #: ``store`` naming a database (a URL or a ``[store]`` table); None: LMDB directories.
    shared_store: SharedStore | None = None
    #: The clusters that cannot be used, each with its problems: told when one is chosen.
    unusable: Mapping[str, tuple[FileProblem, ...]] = attrs.field(factory=dict)

    def cluster(self, name: str | None) -> Cluster:
        name = name or self.default_cluster
        if name in self.unusable:
            raise FileError(list(self.unusable[name]))
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted([*self.clusters, *self.unusable]))
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
    text, exists = _config_text(path, named=named)
    data, lines = parse_toml(text, file)
    problems: list[FileProblem] = []

    def problem(field: str, message: str) -> None:
        problems.append(FileProblem(file, line_of(lines, field), field, message))

    for key in data:
        if key not in _TOP_KEYS:
            problem(key, f"unknown key (known keys: {', '.join(_TOP_KEYS)})")
    clusters, unusable = _clusters(plugins, data.get("clusters", {}), file, lines, problem)
    escalations = _escalations(plugins, data.get("escalations", {}), file, problem)
    _check_sinks(clusters, escalations, problem)
    heartbeat = _heartbeat(data.get("heartbeat"), file, problem)
    dashboard_url = _dashboard_url(data.get("dashboard_url"), problem)
    default = data.get("default_cluster", DEFAULT_CLUSTER)
    if not isinstance(default, str):
        problem("default_cluster", f"must be a cluster's name, got {default!r}")
        default = DEFAULT_CLUSTER
    elif default not in clusters and default not in unusable and not problems:
        known = ", ".join(sorted([*clusters, *unusable]))
        problem("default_cluster", f"names no cluster (clusters: {known})")
    root, shared = _store(plugins, data.get("store"), env, file, problem)
    if problems:
        raise FileError(problems)
    return Config(
        path=path,
        exists=exists,
        clusters=clusters,
        default_cluster=default,
        records_root=root,
        escalations=escalations,
        heartbeat=heartbeat,
        dashboard_url=dashboard_url,
        shared_store=shared,
        unusable=unusable,
    )


def _config_text(path: Path, *, named: bool) -> tuple[str, bool]:
    """The file's text and whether it exists. Missing is the defaults (empty) unless the file
    was named, when it is an error: a typo in the name must not quietly mean the defaults."""
    try:
        return path.read_text(), True
    except FileNotFoundError:
        if named:
            raise NoSuchFile(path) from None
        return "", False
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError([FileProblem(str(path), None, "", f"cannot be read: {exc}")]) from None


def _clusters(
    plugins: Plugins,
    raw: Any,
    file: str,
    lines: Mapping[str, int],
    problem: Callable[[str, str], None],
) -> tuple[dict[str, Cluster], dict[str, tuple[FileProblem, ...]]]:
    """The ``[clusters.NAME]`` tables, beside the built-in local cluster. A cluster with
    problems is kept apart as unusable with its own problems, so the others still work and
    only a command that uses it fails."""
    clusters: dict[str, Cluster] = {
        DEFAULT_CLUSTER: Cluster(DEFAULT_CLUSTER, "local", {}, "built-in")
    }
    if not isinstance(raw, dict):
        problem("clusters", "must be a table of clusters ([clusters.NAME])")
        raw = {}
    unusable: dict[str, tuple[FileProblem, ...]] = {}
    for name, table in raw.items():
        cluster, own = _cluster(plugins, name, table, file, lines)
        if own:
            unusable[name] = tuple(own)
        elif cluster is not None:
            clusters[name] = cluster
    return clusters, unusable


def _check_sinks(
    clusters: Mapping[str, Cluster],
    escalations: tuple[EscalationSink, ...],
    problem: Callable[[str, str], None],
) -> None:
    """Every sink a cluster names is configured (or is the built-in log): a notice sent to a
    sink that does not exist would be lost without a word."""
    names = {e.name for e in escalations}
    for cluster in clusters.values():
        for n in cluster.sinks or ():
            if n not in names and n != LOG_SINK:
                known = ", ".join(sorted(names)) or "none configured"
                problem(f"clusters.{cluster.name}.sinks", f"names no sink {n!r} (sinks: {known})")


def _store(
    plugins: Plugins,
    store: Any,
    env: Mapping[str, str],
    file: str,
    problem: Callable[[str, str], None],
) -> tuple[Path, SharedStore | None]:
    """``store``: a directory (the default under the state home), a postgresql:// URL or a
    ``[store]`` table. Returns the records' directory and the shared store, if one is named."""
    shared: SharedStore | None = None
    if isinstance(store, dict):
        shared = _store_table(plugins, store, f"{file}, [store]", problem)
        store = None
    elif isinstance(store, str) and store.startswith(POSTGRES_SCHEMES):
        shared = _store_table(
            plugins, {"kind": "postgresql", "dsn": store}, f"{file}, store", problem
        )
        store = None
    if store is not None and not (isinstance(store, str) and store and "\x00" not in store):
        problem("store", f"must be a directory, a postgresql:// URL or a table, got {store!r}")
        store = None
    elif isinstance(store, str) and (why := store_value_problem(store)) is not None:
        problem("store", why)
        store = None
    root = state_home(env) / "jobdispatch" / "records"
    if store:
        try:
            root = Path(store).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            problem("store", f"{store!r} starts with the home folder of an unknown user")
    return root, shared


def store_value_problem(value: str) -> str | None:
    """What is wrong with a ``store`` value (``--store``, ``$JOBDISPATCH_STORE``, the config's
    ``store``), or None when it can be used: a directory, or a URL of a store this command reads.

    Anything holding ``://`` is meant as a URL, so a mistyped scheme (``postgresq://``,
    ``pg://``) or another database's is refused rather than taken as a folder of that name,
    where the job would be recorded and no supervisor would ever look. An empty value names
    no folder at all (not the working directory)."""
    if not value:
        return "is empty: give a directory or a postgresql:// URL"
    if URL_MARK in value and not value.startswith(POSTGRES_SCHEMES):
        # Only the scheme is quoted: the rest of a URL may hold a password.
        scheme = value.split(URL_MARK, 1)[0] + URL_MARK
        known = " or ".join(POSTGRES_SCHEMES)
        return (
            f"is a {scheme!r} URL, which names no store this command reads (a store URL "
            f"starts with {known}; a directory holds no {URL_MARK})"
        )
    return None


def _cluster(
    plugins: Plugins, name: str, table: Any, file: str, lines: Mapping[str, int]
) -> tuple[Cluster | None, list[FileProblem]]:
    """One ``[clusters.NAME]`` table, checked against its adapter: the cluster, or None and
    every problem found (kept apart from the file's other problems, to be told when the
    cluster is chosen)."""
    found: list[FileProblem] = []

    def problem(field: str, message: str) -> None:
        found.append(FileProblem(file, line_of(lines, field), field, message))

    raw = dict(table) if isinstance(table, dict) else table
    offered = user_adapters(plugins)
    chosen = raw.get("adapter") if isinstance(raw, dict) else None
    if isinstance(chosen, str) and chosen not in offered:
        problem(f"clusters.{name}.adapter", missing_adapter(plugins, chosen))
        return None, found
    pacing: dict[str, float | None] = {}
    prices: Prices | None = None
    if isinstance(raw, dict) and "prices" in raw:
        try:
            prices = prices_from(raw.pop("prices"), f"clusters.{name}.prices")
        except ValidationError as exc:
            for p in exc.problems:
                problem(p.path, p.message)
    sinks: tuple[str, ...] | None = None
    if isinstance(raw, dict) and "sinks" in raw:
        given = raw.pop("sinks")
        if isinstance(given, list) and all(isinstance(n, str) and n for n in given):
            sinks = tuple(given)
        else:
            problem(f"clusters.{name}.sinks", f"must be a list of sink names, got {given!r}")
    if isinstance(raw, dict):
        for key in PACING_KEYS:
            pacing[key] = _seconds(raw.pop(key, None), f"clusters.{name}.{key}", problem)
        poll, floor = pacing["poll_interval"], pacing["poll_floor"]
        if poll is not None and floor is not None and poll < floor:
            problem(
                f"clusters.{name}.poll_interval",
                f"{poll:g} s is below poll_floor ({floor:g} s)",
            )
    checked = _plugin_table(
        plugins.registry("adapter"),
        raw,
        f"clusters.{name}",
        "adapter",
        f"cluster {name!r}",
        problem,
        offered,
    )
    if checked is None:
        return None, found
    adapter, settings = checked
    source = f"{file}, [clusters.{name}]"
    return Cluster(name, adapter, settings, source, **pacing, sinks=sinks, prices=prices), found


def cluster_schema(shared: SharedStore, cluster: str) -> str:
    """The PostgreSQL schema a cluster's records live in: the ``schema`` setting, else one per
    cluster (``jobdispatch_CLUSTER``), as each cluster gets its own LMDB directory, so that a
    job id always belongs to one cluster's objects."""
    given = shared.settings.get("schema")
    if isinstance(given, str):
        return given
    return ("jobdispatch_" + re.sub(r"[^a-z0-9_]", "_", cluster.lower()))[:63]


def store_label(config: Config, cluster: str) -> str:
    """Where a cluster's records are, for ``clusters`` and messages: a directory or a schema."""
    shared = config.shared_store
    if shared is None:
        return str(config.records_root / cluster)
    return f"{shared.kind} schema {cluster_schema(shared, cluster)}"


def _store_table(
    plugins: Plugins, table: dict[str, Any], source: str, problem: Callable[[str, str], None]
) -> SharedStore | None:
    """The ``[store]`` table: ``kind`` names a registered record store (not installed: what
    to install), the rest are its settings, checked against its schema."""
    registry = plugins.registry("record-store")
    kind = table.get("kind")
    if isinstance(kind, str) and kind not in registry and kind in STORE_DISTRIBUTIONS:
        problem(
            "store.kind",
            f"record store {kind!r} is not installed: pip install {STORE_DISTRIBUTIONS[kind]}",
        )
        return None
    if kind == "lmdb":
        problem("store.kind", 'an LMDB store is a directory: write store = "/the/records/root"')
        return None
    checked = _plugin_table(registry, table, "store", "kind", "the record store", problem)
    if checked is None:
        return None
    return SharedStore(checked[0], checked[1], source)


def _seconds(value: Any, at: str, problem: Callable[[str, str], None]) -> float | None:
    """A cluster's ``poll_interval`` or ``poll_floor``: a positive number of seconds (a floor
    at most MAX_POLL_FLOOR); None when not set or not right (the problem told)."""
    if value is None:
        return None
    most = MAX_POLL_FLOOR if at.endswith("poll_floor") else MAX_POLL_INTERVAL
    if isinstance(value, bool) or not isinstance(value, int | float):
        problem(at, f"must be a number of seconds, got {value!r}")
        return None
    if not math.isfinite(value) or not 0 < value <= most:
        problem(at, f"must be a positive number of seconds, at most {most:g}, got {value!r}")
        return None
    return float(value)


def user_adapters(plugins: Plugins) -> list[str]:
    """The adapters a cluster may name: every registered one but the test-only ones."""
    return [n for n in plugins.registry("adapter").names() if n not in TEST_ONLY_ADAPTERS]


def missing_adapter(plugins: Plugins, name: str) -> str:
    """Why no cluster can use adapter ``name``, and what to do about it."""
    offered = ", ".join(user_adapters(plugins)) or "none"
    if name in TEST_ONLY_ADAPTERS:
        return (
            f"adapter {name!r} is an in-process scheduler for tests, not a cluster "
            f"(adapters: {offered})"
        )
    for failure in plugins.failures:
        if failure.plugin == name:
            return (
                f"adapter {name!r} is installed ({failure.distribution}) but failed to load: "
                f"{failure.error} (see `jobdispatch plugins`)"
            )
    installed = {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    if name in installed:
        return (
            f"adapter {name!r} is installed but not loaded: {BLOCKED_ENV} or {ONLY_ENV} "
            "leaves it out"
        )
    if name in ADAPTER_DISTRIBUTIONS:
        return f"adapter {name!r} is not installed: pip install {ADAPTER_DISTRIBUTIONS[name]}"
    return f"no adapter named {name!r} (adapters: {offered})"


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


def _dashboard_url(raw: Any, problem: Callable[[str, str], None]) -> str | None:
    """``dashboard_url``: the web page notices link each job to (``<url>/jobs/<job>``). Links
    are shown to whoever receives a notice, so the URL may carry no user name or password."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.startswith(("http://", "https://")):
        problem("dashboard_url", "must be an http:// or https:// URL")
        return None
    authority = raw.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority:
        problem("dashboard_url", "must not carry a user name or password (links are shown)")
        return None
    return raw.rstrip("/")


def job_link(dashboard_url: str, job: str) -> str:
    """A job's page on the dashboard: what notices link to."""
    return f"{dashboard_url}/jobs/{job}"


_HEARTBEAT_KEYS = ("url", "url_file", "timeout")


def _heartbeat(raw: Any, file: str, problem: Callable[[str, str], None]) -> HeartbeatConfig | None:
    """The ``[heartbeat]`` table: exactly one of ``url`` and ``url_file``, and a timeout."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problem("heartbeat", "must be a table with url or url_file")
        return None
    for key in raw:
        if key not in _HEARTBEAT_KEYS:
            problem(f"heartbeat.{key}", f"unknown key (known keys: {', '.join(_HEARTBEAT_KEYS)})")
    url, url_file = raw.get("url"), raw.get("url_file")
    if (url is None) == (url_file is None):
        problem("heartbeat", "give exactly one of url and url_file")
        return None
    for key, value in (("url", url), ("url_file", url_file)):
        if value is not None and not (isinstance(value, str) and value):
            problem(f"heartbeat.{key}", f"must be a non-empty string, got {value!r}")
            return None
    if isinstance(url, str) and not url.startswith(("http://", "https://")):
        # Only the scheme is quoted: the rest may hold the monitor's token.
        problem("heartbeat.url", "must be an http:// or https:// URL")
        return None
    timeout = _seconds(raw.get("timeout", 10.0), "heartbeat.timeout", problem)
    if timeout is None:
        return None
    return HeartbeatConfig(url, url_file, timeout, f"{file}, [heartbeat]")


def _plugin_table(
    registry: Registry,
    table: Any,
    at: str,
    key: str,
    subject: str,
    problem: Callable[[str, str], None],
    offered: list[str] | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """A ``[section.NAME]`` table (at ``at``) that names a registered plugin under ``key``,
    the rest being that plugin's settings, checked against its schema. The plugin's name and
    its settings; None, with every problem told, when the table is not right."""
    if not isinstance(table, dict):
        problem(at, f"must be a table with {key} = NAME and its settings")
        return None
    chosen = table.get(key)
    if not isinstance(chosen, str):
        names = registry.names() if offered is None else offered
        problem(f"{at}.{key}", f"is required: one of {', '.join(names)}")
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
