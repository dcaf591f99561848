"""What every command works with: the configuration, the cluster, the store and the actor,
built once from the global options and only when a command needs them."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import jobdispatch
from jobdispatch import plugins
from jobdispatch.config import validate_config
from jobdispatch.errors import Invalid, NotFound, ReadOnly
from jobdispatch.plugins import Entry
from jobdispatch.records.store import Records
from jobdispatch.types import Actor, JobID, State
from rich.console import Console

from jobdispatch_cli.config import (
    POSTGRES_SCHEMES,
    STORE_DISTRIBUTIONS,
    Cluster,
    Config,
    SharedStore,
    cluster_schema,
    job_link,
    load_config,
    state_home,
    store_value_problem,
)
from jobdispatch_cli.jobfile import FileError, FileProblem
from jobdispatch_cli.private import private_dir, repair
from jobdispatch_cli.terminal import terminal

__all__ = ["App"]


def _make_store_dir(path: Path, *, given: bool) -> None:
    """Create the store's folder (and its parents) if missing, each 0700 (a record keeps its
    job's env); a folder that cannot be made
    is told with the OS's reason and where the path came from, never as a traceback. Not
    permitted (a read-only file system, a folder of someone else's) is refused (exit 4); any
    other reason (a parent that is a file, a pseudo file system) means the path cannot be a
    store (exit 2)."""
    if "\x00" in str(path):
        msg = f"the store folder {str(path)!r} holds a NUL byte: no file system takes one"
        raise Invalid(msg)
    try:
        str(path).encode()
    except UnicodeEncodeError:
        msg = f"the store folder {str(path)!r} is not UTF-8 text, which the LMDB store needs"
        raise Invalid(msg) from None
    try:
        private_dir(path)
    except OSError as exc:
        source = "--store or $JOBDISPATCH_STORE" if given else "$XDG_STATE_HOME, or store in config"
        reason = exc.strerror or str(exc)
        msg = f"cannot create the store folder {path} (from {source}): {reason}"
        if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            raise ReadOnly(msg) from None
        raise Invalid(msg) from None


class App:
    """The command's state, shared by every subcommand through click's context."""

    def __init__(
        self,
        *,
        config_path: Path | None,
        cluster: str | None,
        store: str | None,
        actor: str,
        console: Console | None = None,
        err: Console | None = None,
    ) -> None:
        self.config_path = config_path
        self.cluster_name = cluster
        #: ``--store`` as given: a directory, or a postgresql:// URL.
        self.store_option = store
        self.actor_name = actor
        self.console = console or terminal()
        self.err = err or terminal(stderr=True)
        #: Set by commands that only read the store (list, status, watch, logs): a store this
        #: process may not write (a read-only mount or snapshot) is then opened read-only.
        self.reads_only = False
        self._config: Config | None = None
        self._store: Records | None = None
        self._cluster: jobdispatch.Cluster | None = None
        self._backend: Any = None
        self._state_checked = False

    @property
    def plugins(self) -> plugins.Plugins:
        return plugins.default()

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.plugins, self.config_path)
        return self._config

    @property
    def cluster_config(self) -> Cluster:
        return self.config.cluster(self.cluster_name)

    @property
    def actor(self) -> Actor:
        return Actor.human(self.actor_name)

    @property
    def store_given(self) -> str | None:
        """``--store`` (or ``$JOBDISPATCH_STORE``), checked: a value that is neither a
        directory nor a store URL is refused (Invalid, exit 2) before anything is created."""
        given = self.store_option
        if given is not None and (why := store_value_problem(given)) is not None:
            msg = f"--store or $JOBDISPATCH_STORE {why}"
            raise Invalid(msg)
        return given

    @property
    def store_path(self) -> Path | None:
        """``--store`` when it names a directory."""
        given = self.store_given
        if given is None or given.startswith(POSTGRES_SCHEMES):
            return None
        return Path(given)

    @property
    def store_dir(self) -> Path:
        """``--store``, else one store per cluster under the records root, so a job id always
        belongs to one cluster's objects."""
        if self.store_path is not None:
            return self.store_path
        return self.config.records_root / self.cluster_config.name

    def shared_store(self) -> SharedStore | None:
        """The PostgreSQL store ``--store URL`` or the configuration names; None for LMDB.

        ``--store URL`` replaces the configured DSN but keeps the ``[store]`` table's other
        settings (where the password is, TLS). Without a ``schema`` setting each cluster gets
        a schema of its own (``jobdispatch_CLUSTER``), as each gets its own LMDB directory."""
        configured = None if self.store_path is not None else self.config.shared_store
        given = self.store_given
        if given is not None and given.startswith(POSTGRES_SCHEMES):
            settings = dict(configured.settings) if configured is not None else {}
            settings.pop("host", None)
            settings["dsn"] = given
            configured = SharedStore("postgresql", settings, "--store or $JOBDISPATCH_STORE")
        if configured is None:
            return None
        settings = dict(configured.settings)
        settings["schema"] = cluster_schema(configured, self.cluster_config.name)
        return attrs.evolve(configured, settings=settings)

    @property
    def store_label(self) -> str:
        """Where the records are, for messages and --json: the directory, or the database."""
        shared = self.shared_store()
        if shared is None:
            return str(self.store_dir)
        if self._store is not None:
            return repr(self._store)
        return f"{shared.kind} store {shared.settings.get('dsn') or shared.settings.get('host')}"

    def _private_state(self) -> None:
        """Close the state folder (``$XDG_STATE_HOME/jobdispatch``: the records and the local
        adapter's objects by default) if an earlier version left it open to other users,
        saying so once; then nothing more than a ``stat`` per command."""
        if self._state_checked:
            return
        self._state_checked = True
        repaired = repair(state_home() / "jobdispatch")
        if repaired is not None:
            self.err.print(
                repaired.warning(), style="yellow", markup=False, highlight=False, soft_wrap=True
            )

    def store(self) -> Records:
        self._private_state()
        if self._store is None and (shared := self.shared_store()) is not None:
            self._store = self._store_entry(shared).factory(dict(shared.settings))
        if self._store is None:
            from jobdispatch_records_lmdb import LmdbRecords

            _make_store_dir(self.store_dir, given=self.store_path is not None)
            try:
                self._store = LmdbRecords(str(self.store_dir))
            except ReadOnly:
                if not self.reads_only:
                    raise
                self._store = LmdbRecords(str(self.store_dir), readonly=True)
        return self._store

    def _store_entry(self, shared: SharedStore) -> Entry:
        """The registered store ``shared`` names, its settings checked against its schema;
        Invalid naming the distribution to install when no plugin provides it."""
        try:
            entry = self.plugins.registry("record-store").get(shared.kind)
        except NotFound:
            need = STORE_DISTRIBUTIONS.get(shared.kind, f"a {shared.kind} record store")
            msg = f"record store {shared.kind!r} (from {shared.source}) is not installed: "
            raise Invalid(msg + f"pip install {need}") from None
        validate_config(dict(shared.settings), entry.schema, subject=shared.source)
        return entry

    def store_readonly(self) -> Records:
        """A store of its own that only reads, for a watcher such as the metrics endpoint:
        LMDB opened read-only (nothing created, no write possible; a missing store is
        NotFound), PostgreSQL in sessions the database refuses every write in (a missing or
        older schema is neither created nor migrated). Each call opens a new one."""
        self._private_state()
        shared = self.shared_store()
        if shared is None:
            from jobdispatch_records_lmdb import LmdbRecords

            return LmdbRecords(str(self.store_dir), readonly=True)
        if shared.kind != "postgresql":
            msg = f"record store {shared.kind!r} (from {shared.source}) cannot be opened read-only"
            raise Invalid(msg)
        self._store_entry(shared)
        from jobdispatch_records_postgres import PostgresRecords

        return PostgresRecords(dict(shared.settings), readonly=True)

    def job(self, word: str) -> JobID:
        """The job ``word`` names: an id, a unique id prefix or a name (see ``address``)."""
        from jobdispatch_cli.address import resolve

        return resolve(self.store(), word, datetime.now(UTC))

    def select_jobs(
        self,
        words: Iterable[str],
        *,
        every: bool = False,
        states: Collection[State] = (),
        name: str | None = None,
    ) -> list[JobID]:
        """The jobs an action on several takes: each word resolved, or ``--all`` filtered."""
        from jobdispatch_cli.address import select

        return select(self.store(), words, datetime.now(UTC), every=every, states=states, name=name)

    def cluster(self) -> jobdispatch.Cluster:
        self._private_state()
        if self._cluster is None:
            self._cluster = jobdispatch.compose(self.backend(), store=self.store())
        return self._cluster

    def backend(self) -> Any:
        """The cluster's adapter, made without opening the store (a supervisor paces its
        wait for a store that does not answer yet by it)."""
        self._private_state()
        if self._backend is None:
            chosen = self.cluster_config
            self._backend = jobdispatch.new_backend(chosen.adapter, dict(chosen.settings))
        return self._backend

    def pacing(self) -> jobdispatch.Pacing:
        """How this cluster's supervisors poll: the adapter's pacing with the site's
        ``poll_interval`` and ``poll_floor`` from the cluster's table. A floor below the
        adapter's, or an interval below the floor, is a FileError naming the key."""
        from jobdispatch.spi import pacing_of

        chosen = self.cluster_config
        pacing = pacing_of(self.backend())
        key = "poll_floor"
        try:
            pacing = pacing.for_site(floor=chosen.poll_floor)
            key = "poll_interval"
            return pacing.for_site(interval=chosen.poll_interval)
        except Invalid as exc:
            problem = FileProblem(
                str(self.config.path), None, f"clusters.{chosen.name}.{key}", exc.message
            )
            raise FileError([problem]) from None

    def check_poll(self, spec: jobdispatch.JobSpec, file: Path, poll: float | None = None) -> None:
        """Refuse, naming the field, a job whose durations judged once per poll
        (``stall.after``, ``pending.after``) are shorter than the poll of this cluster's
        supervisors (``poll``, else the site's ``poll_interval``): the plan checks them
        against the adapter's interval only, which the site may lengthen. A FileError."""
        from jobdispatch.plan import shorter_than_poll

        interval = self.pacing().interval if poll is None else poll
        whose = f"the supervisors of cluster {self.cluster_config.name!r}"
        found = shorter_than_poll(spec, timedelta(seconds=interval), whose)
        if found:
            raise FileError([FileProblem(str(file), None, p.path, p.message) for p in found])

    def supervisor(
        self,
        poll: float | None,
        lease_ttl: timedelta,
        on_observed: Callable[[JobID, Any], object] | None = None,
    ) -> Any:
        """A supervisor of this cluster's jobs, paced by the adapter and the site; ``poll``
        (``--poll``) overrides the interval, never below the floor (Invalid, exit 2). Its
        sinks and heartbeat are made (and their files read) first: a sink that cannot work
        is an error naming its key before anything is supervised."""
        from jobdispatch_publish.supervision import RootsReader
        from jobdispatch_supervise import Supervisor

        pacing = self.pacing()
        sinks = self.sinks()
        heartbeat = self.heartbeat()
        try:
            return Supervisor(
                self.backend(),
                self.store(),
                sinks=sinks,
                poll=pacing.interval if poll is None else poll,
                poll_floor=pacing.floor,
                lease_ttl=lease_ttl,
                on_observed=on_observed,
                cluster=self.cluster_config.name,
                heartbeat=heartbeat,
                # Jobs with a [progress] root: their marks and publications, one listing of
                # each root a poll, read with this process's own credentials.
                progress=RootsReader(env=os.environ),
                link=self._job_link(),
            )
        except Invalid as exc:
            if "poll" not in exc.message:
                raise
            msg = f"--poll: {exc.message}"
            raise Invalid(msg) from None

    def _job_link(self) -> Callable[[str], str] | None:
        """Each notice's link to its job's page, when ``dashboard_url`` is configured."""
        base = self.config.dashboard_url
        if base is None:
            return None
        return lambda job: job_link(base, job)

    def _config_problem(self, exc: Invalid, default: str) -> FileError:
        """A sink's or the heartbeat's Invalid (``KEY: what``) as the config file's problem."""
        key, sep, what = exc.message.partition(": ")
        if not sep or " " in key:
            key, what = default, exc.message
        return FileError([FileProblem(str(self.config.path), None, key, what)])

    def heartbeat(self) -> Any:
        """The ``[heartbeat]`` of the configuration, made (its URL file read), or None."""
        configured = self.config.heartbeat
        if configured is None:
            return None
        from jobdispatch_supervise.heartbeat import Heartbeat
        from jobdispatch_supervise.http_sinks import read_secret

        try:
            url = configured.url
            if configured.url_file is not None:
                url = read_secret(configured.url_file, "heartbeat.url_file")
            key = "heartbeat.url_file" if configured.url_file else "heartbeat.url"
            return Heartbeat(url or "", timeout=configured.timeout, key=key)
        except Invalid as exc:
            raise self._config_problem(exc, "heartbeat") from None

    def sinks(self, cluster: str | None = None) -> list[Any]:
        """Where a supervisor of this command delivers escalations and notices: the log, then
        every ``[escalations.NAME]`` of the configuration the cluster's ``sinks`` names (all of
        them when it names none), each delivering under its table's name. Each is made here,
        so a secret file that cannot be read or a bad URL is an error naming its key."""
        from jobdispatch_supervise.sinks import LogSink

        chosen = self.config.clusters.get(cluster) if cluster else self.cluster_config
        wanted = chosen.sinks if chosen is not None else None
        registry = self.plugins.registry("escalation-sink")
        built: list[Any] = [LogSink()]
        for configured in self.config.escalations:
            if wanted is not None and configured.name not in wanted:
                continue
            entry = registry.get(configured.sink)
            settings = dict(configured.settings)
            if "name" in (entry.schema or {}).get("properties", {}):
                settings["name"] = configured.name
            try:
                sink = entry.factory(settings)
            except (Invalid, ValueError) as exc:
                error = exc if isinstance(exc, Invalid) else Invalid(str(exc))
                raise self._config_problem(error, f"escalations.{configured.name}") from None
            if sink.name in {s.name for s in built}:
                problem = FileProblem(
                    str(self.config.path),
                    None,
                    f"escalations.{configured.name}",
                    f"sink {configured.sink!r} delivers as {sink.name!r}, as another sink does",
                )
                raise FileError([problem])
            built.append(sink)
        return built

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
        elif self._backend is not None:
            self._backend.close()
        if self._store is not None:
            self._store.close()
