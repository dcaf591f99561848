"""The Slurm backend: the adapter SPI over sbatch, squeue, sacct, scontrol and scancel.

Objects are Slurm jobs (their ref is the job id), created gated under their discovery name;
executions are the job's runs, one per sacct record (a requeue starts a new one). Everything
the backend shows is read back from the cluster on every call: the gate, the hold instance and
whether a hold stands over a gate are all in the begin time (see :mod:`jobdispatch_slurm.holds`),
so two backends, or a backend restarted after a crash, see the same thing.
docs/specs/0008-slurm-adapter.md gives the reasons for each decision.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from jobdispatch import spi
from jobdispatch import types as t
from jobdispatch.errors import Invalid, NotFound, Rejected, Unreachable, Unsupported
from jobdispatch.kit import followed
from jobdispatch.kit.deadline import refuse_past_deadline
from jobdispatch.kit.facts import FactsCache
from jobdispatch.kit.refusal import refuses_unsupported

from jobdispatch_slurm import holds, probe
from jobdispatch_slurm.classify import ENDED_STATES, Accounting, observe
from jobdispatch_slurm.commands import Slurm
from jobdispatch_slurm.config import Settings
from jobdispatch_slurm.parse import SacctRow, SqueueRow
from jobdispatch_slurm.script import (
    RESOURCE_SCHEMA,
    Submission,
    launch_mark,
    render,
    render_preview,
)
from jobdispatch_slurm.transport import LocalTransport, SshTransport, Transport

__all__ = ["SlurmBackend", "build_transport"]

log = logging.getLogger(__name__)

_JOB_ID = re.compile(r"^[0-9]{1,12}$")
#: What scontrol prints when the job is past the point an update or a requeue can apply to.
_NOT_PENDING = "is no longer pending execution"
_FINISHED = "has already finished"
_INVALID = "Invalid job id specified"

#: The causes Slurm reruns a ``--requeue`` job for by itself.
_NODE_REQUEUE = frozenset({t.CauseKind.NODE_LOST})
_PREEMPT_REQUEUE = frozenset({t.CauseKind.PREEMPTED})

#: How often a followed output stream looks again for more.
FOLLOW_POLL = 0.5

#: What a supervisor can have this backend do, per action.
_PERFORM: Mapping[t.Action, t.Support] = {
    t.Action.RESUBMIT: t.Support.yes(t.Source.CATALOGUE, "a new sbatch"),
    t.Action.REQUEUE: t.Support.yes(t.Source.CATALOGUE, "scontrol requeue of the running job"),
    t.Action.HOLD: t.Support.yes(t.Source.CATALOGUE, "a begin-time hold on a pending job"),
    t.Action.ESCALATE: t.Support.yes(t.Source.CATALOGUE, "needs nothing of the scheduler"),
    t.Action.RESTART: t.Support.no(t.Source.CATALOGUE, "Slurm never reruns ranks in place"),
}


def build_transport(settings: Settings) -> Transport:
    """The transport the settings name, with ``SLURM_CONF`` when the site sets one."""
    env = {"SLURM_CONF": settings.slurm_conf} if settings.slurm_conf else {}
    if settings.transport == "ssh":
        ssh = settings.ssh
        assert ssh is not None  # Settings.from_config refuses ssh without its section
        return SshTransport(
            host=ssh.host,
            user=ssh.user,
            port=ssh.port,
            key_filename=ssh.key_file,
            known_hosts=ssh.known_hosts,
            accept_unknown_hosts=ssh.accept_unknown_hosts,
            connect_timeout=ssh.connect_timeout,
            config_file=ssh.config_file,
            jump=ssh.jump,
            control_path=ssh.control_path,
            control_persist=ssh.control_persist,
            env=env,
        )
    return LocalTransport(env=env)


class SlurmBackend(
    spi.Backend,
    spi.Holder,
    spi.IdentityWeakener,
    spi.InventoryReporter,
    spi.MultiFinder,
    spi.NativePolicyCompiler,
    spi.OutputReader,
    spi.Paced,
    spi.Requeuer,
    spi.ResourceTable,
    spi.SubmissionPreview,
):
    """Slurm through one transport. Implements Backend, Holder, Requeuer,
    NativePolicyCompiler, MultiFinder, IdentityWeakener and OutputReader.

    Args:
        settings: the validated configuration.
        transport: overrides the transport the settings name (tests wrap one to count or to
            lose replies).
        clock: now, for deadlines.
    """

    name = "slurm"
    #: Every poll is an squeue and an sacct, RPCs to a controller and an accounting database
    #: that every user of the cluster shares: every 30 s by default, never more often than
    #: every 2 s (a site raises that with ``poll_floor``). Slurm has no watch to wake on.
    pacing = spi.Pacing(interval=30.0, floor=2.0)

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        transport: Transport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.transport = transport or build_transport(self.settings)
        self.slurm = Slurm(
            self.transport, bin_dir=self.settings.bin_dir, timeout=self.settings.command_timeout
        )
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._user: str | None = self.settings.user
        self._output_dir: str | None = self.settings.output_dir
        self._dir_made = False
        #: This backend's facts: even the cluster's name costs a command, so a poll asks
        #: here first, and the probe's cache (shared by the process) only when this expires.
        self._facts: FactsCache[None, probe.ClusterFacts] = FactsCache()
        #: Launch marks found per (object name, execution): a mark, once written, stays, so it
        #: is searched for no more. Absence is not kept: a shared file system may show the
        #: line a moment after accounting shows the end.
        self._marks: dict[tuple[str, int], str] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], token: Any = None) -> SlurmBackend:
        """Build from a configuration (validated here; unknown keys refused). SSH uses key
        authentication, so ``token`` is not used."""
        return cls(Settings.from_config(config))

    def __repr__(self) -> str:
        return f"SlurmBackend({self.transport.where})"

    # ------------------------------------------------------------------ cluster facts

    def facts(self) -> probe.ClusterFacts:
        """The probed facts of the cluster: probed once per ``probe_ttl`` by this backend (and
        shared with other backends of the same cluster), so a poll costs no probe."""
        ttl = self.settings.probe_ttl
        return self._facts.get(None, ttl, lambda: probe.probe(self.slurm, ttl=ttl))

    def _plan_facts(self) -> probe.ClusterFacts:
        """The facts capabilities, rules and the resource check rest on: none with
        ``probe = false`` (the site's declarations answer then), else :meth:`facts`."""
        return self.facts() if self.settings.probe else probe.UNPROBED

    def user(self) -> str:
        """Whose jobs the queries ask for: the configured user, else the transport's login."""
        with self._lock:
            if self._user is None:
                self._user = self.slurm.whoami()
            return self._user

    def _output_root(self) -> str:
        """The output directory's path, without making it."""
        with self._lock:
            if self._output_dir is None:
                home = self.slurm.home() or "/tmp"  # noqa: S108
                self._output_dir = f"{home.rstrip('/')}/jobdispatch-output"
            return self._output_dir

    def output_dir(self) -> str:
        """Where objects' output goes: the configured directory, else ``~/jobdispatch-output``
        of the login the transport uses (made once, since sbatch fails a job whose output file
        cannot be opened, 0007 §8)."""
        path = self._output_root()
        with self._lock:
            if not self._dir_made:
                self.slurm.mkdir(path)
                self._dir_made = True
            return path

    def capabilities(self, spec: t.JobSpec | None = None) -> Mapping[t.Capability, t.Support]:
        """Every capability for this cluster: probed, catalogue, or declared by the site."""
        return probe.capabilities(
            self._plan_facts(),
            partition=self.settings.partition,
            output_dir_known=True,
            declared=self.settings.declared,
        )

    def rules(self, spec: t.JobSpec, policy: t.RecoveryPolicy) -> Sequence[t.RuleSupport]:
        """Native: requeue on node-lost, and on preempted where the partition's PreemptMode
        requeues; perform: the catalogue table, with hold as the cluster answers it."""
        caps = self.capabilities(spec)
        facts = self._plan_facts()
        return [self._rule(rule, caps, facts) for rule in policy.rules]

    def _rule(
        self, rule: t.Rule, caps: Mapping[t.Capability, t.Support], facts: probe.ClusterFacts
    ) -> t.RuleSupport:
        native_cap = caps[t.Capability.NATIVE_REQUEUE]
        perform = _PERFORM[rule.action]
        if rule.action is t.Action.HOLD:
            perform = caps[t.Capability.HOLD]
        if rule.action is not t.Action.REQUEUE:
            return t.RuleSupport(
                t.Support.no(t.Source.CATALOGUE, f"Slurm does not {rule.action} by itself"), perform
            )
        preempt, why = probe.preempt_requeues(facts, self.settings.partition)
        natively = set(_NODE_REQUEUE) | (set(_PREEMPT_REQUEUE) if preempt else set())
        if not facts.probed:  # whether preemption requeues is the cluster's to say
            natively |= set(_PREEMPT_REQUEUE)
        others = [str(k) for k in rule.on if k not in natively]
        if others:
            detail = f"Slurm does not requeue by itself on {', '.join(others)}"
            if t.CauseKind.PREEMPTED in rule.on and not preempt:
                detail += f" ({why})"
            return t.RuleSupport(t.Support.no(t.Source.PROBED, detail), perform)
        if native_cap.answer is not t.Tristate.YES:
            return t.RuleSupport(
                t.Support(native_cap.answer, native_cap.source, "native-requeue"), perform
            )
        return t.RuleSupport(
            t.Support.yes(t.Source.PROBED, f"--requeue, budget kept by the job itself; {why}"),
            perform,
        )

    def compile(
        self, spec: t.JobSpec, rules: Mapping[int, t.Rule], remaining: Mapping[int, int]
    ) -> spi.NativeOffer:
        """Offer the rules Slurm would enforce with budget left: Start then submits with
        ``--requeue`` and a script that clears the requeue bit once the restart count reaches
        the smallest remaining budget (Slurm keeps one counter for all requeues)."""
        caps = self.capabilities(spec)
        facts = self._plan_facts()
        chosen = sorted(
            i
            for i, rule in rules.items()
            if self._rule(rule, caps, facts).native.answer is t.Tristate.YES
            and remaining.get(i, rule.budget) > 0
        )
        if not chosen:
            return spi.NativeOffer()
        left = {i: remaining.get(i, rules[i].budget) for i in chosen}
        return spi.NativeOffer(
            rules=tuple(chosen),
            remaining=left,
            settings={"requeue": "yes", "requeue-budget": str(min(left.values()))},
        )

    def identity_weakened(self, spec: t.JobSpec) -> str:
        """Never: Slurm reruns the whole job, and each run has its own restart count."""
        return ""

    # ------------------------------------------------------------------ lifecycle

    def now(self) -> datetime:
        return self._clock()

    @refuses_unsupported
    def start(self, request: spi.StartRequest) -> spi.ObjectRef:
        """sbatch the request's script gated at the far-future begin time. Rejected when sbatch
        refuses; OutcomeUnknown when its reply was lost (find by the name then)."""
        submission = self._submission(request, self.output_dir())
        job_id = self.slurm.sbatch(submission.options, submission.script)
        return spi.ObjectRef(job_id)

    def _submission(self, request: spi.StartRequest, output_dir: str) -> Submission:
        """The sbatch options and script for ``request`` (what this cluster cannot do was
        refused before, by the core: ``refuses_unsupported``)."""
        caps = self.capabilities(request.spec)
        return render(
            request,
            output_dir=output_dir,
            partition=self.settings.partition,
            account=self.settings.account,
            qos=self.settings.qos,
            mem_per_cpu=self.settings.mem_per_cpu,
            signal=self.settings.signal,
            container=caps[t.Capability.CONTAINER_IMAGE].answer is t.Tristate.YES,
        )

    @refuses_unsupported
    def preview(self, request: spi.StartRequest) -> str:
        """Exactly what ``start`` would send, without sending it or making the output
        directory: the sbatch command line, then the script it reads on standard input."""
        submission = self._submission(request, self._output_root())
        return render_preview(submission)

    def inventory(self) -> t.Inventory:
        """The partitions and nodes, from the probe (cached for ``probe_ttl``)."""
        return probe.inventory(self._plan_facts())

    @property
    def resource_table(self) -> str:
        return "slurm"

    @property
    def resource_schema(self) -> Mapping[str, object]:
        return RESOURCE_SCHEMA

    def _id(self, ref: spi.ObjectRef) -> str | None:
        return ref.id if _JOB_ID.fullmatch(ref.id) else None

    def _row(self, ref: spi.ObjectRef) -> SqueueRow | None:
        job_id = self._id(ref)
        if job_id is None:
            return None
        return next((r for r in self.slurm.squeue(job_id=job_id) if r.job_id == job_id), None)

    def _known(self, ref: spi.ObjectRef) -> bool:
        """Whether accounting knows ``ref`` (for one slurmctld has forgotten)."""
        job_id = self._id(ref)
        return job_id is not None and bool(self.slurm.sacct(job_id=job_id))

    def _queued(self, ref: spi.ObjectRef) -> SqueueRow | None:
        """The queue's row for ``ref``; None for a job that has left the queue but accounting
        still knows (it has ended). NotFound for a job neither knows."""
        row = self._row(ref)
        if row is None and not self._known(ref):
            raise NotFound(f"no Slurm job {ref}")
        return row

    def open(self, ref: spi.ObjectRef, meta: t.CallMeta | None = None) -> None:
        """Lift the gate (begin time → now). Under one of our holds, the hold stays and only
        the gate beneath it is lifted. Already open, running or ended: success. Rejected past
        ``meta.deadline`` (checked here, before scontrol: Slurm itself cannot check it)."""
        if meta is not None:
            self._check(meta.deadline, f"open of {ref}")
        row = self._queued(ref)
        if row is None:
            return
        if row.state != "PENDING":
            return
        begin = holds.decode(row.start)
        if begin.kind is holds.BeginKind.GATE:
            target = "now"
        elif begin.kind is holds.BeginKind.HOLD and begin.gated:
            assert begin.instance is not None
            target = holds.slurm_time(holds.hold_time(begin.instance, gated=False))
        else:
            return
        self._update(ref, StartTime=target, ok_if_past=True)

    def _update(self, ref: spi.ObjectRef, *, ok_if_past: bool, **settings: str) -> bool:
        """scontrol update; False when the job was past pending or finished and ``ok_if_past``,
        NotFound for an unknown id, Rejected for any other refusal."""
        job_id = self._id(ref)
        if job_id is None:
            raise NotFound(f"no Slurm job {ref}")
        result = self.slurm.update(job_id, **settings)
        if result.ok:
            return True
        err = result.stderr.strip()
        if _INVALID in err:
            raise NotFound(f"no Slurm job {ref}: {err}")
        if ok_if_past and (_NOT_PENDING in err or _FINISHED in err):
            return False
        raise Rejected(f"scontrol update {ref} {settings}: {err}")

    def stop(self, ref: spi.ObjectRef, reason: str) -> None:
        """scancel this one job. An unknown or ended job is success (scancel says nothing
        either way; the next observation shows the end)."""
        job_id = self._id(ref)
        if job_id is None:
            return
        self.slurm.cancel(job_id)

    def close(self) -> None:
        self.transport.close()

    # ------------------------------------------------------------------ observation

    def find(self, job: t.JobID) -> spi.Discovery:
        """Every object named for ``job``: one squeue and one sacct (see find_many)."""
        return self.find_many([job])[job]

    def find_many(
        self, jobs: Sequence[t.JobID], states: Sequence[t.ObjectState] = ()
    ) -> Mapping[t.JobID, spi.Discovery]:
        """Every object of every job in ``jobs``, from one squeue and one sacct whatever their
        number. Discovery names hold submission and attempt numbers that a finder does not
        know, and neither squeue nor sacct takes wildcards (0007 §9), so both ask for the
        user's jobs (squeue: those slurmctld still holds; sacct: those of the last
        ``history_days``, up to 3000-01-01 so gated jobs are in) and filter by name here."""
        wanted = set(jobs)
        user = self.user()
        facts = self.facts()
        at = self.now()

        def ours(name: str) -> bool:
            ident = spi.parse_discovery_name(name)
            return ident is not None and ident[0] in wanted

        queued = self.slurm.squeue(user=user, keep=ours)
        accounting, rows = self._accounting(
            lambda: self.slurm.sacct(
                user=user, since=at - timedelta(days=self.settings.history_days), keep=ours
            ),
            facts,
        )
        names: dict[str, str] = {}
        by_id_q: dict[str, SqueueRow] = {}
        for row in queued:
            ident = spi.parse_discovery_name(row.name)
            if ident is not None and ident[0] in wanted:
                by_id_q[row.job_id] = row
                names[row.job_id] = ident[0]
        by_id_a: dict[str, list[SacctRow]] = {}
        for srow in rows:
            ident = spi.parse_discovery_name(srow.name) if not srow.is_step else None
            if srow.is_step:
                if srow.base_id in by_id_a:
                    by_id_a[srow.base_id].append(srow)
                continue
            if ident is not None and ident[0] in wanted:
                by_id_a.setdefault(srow.job_id, []).append(srow)
                names[srow.job_id] = ident[0]
        found: dict[t.JobID, list[spi.ObjectObs]] = {job: [] for job in jobs}
        wanted_states = set(states)
        for job_id, job in names.items():
            obs = observe(
                job_id, by_id_q.get(job_id), by_id_a.get(job_id, []), accounting, self._mark
            )
            if obs is None:
                continue
            if wanted_states and obs.state not in wanted_states:
                continue
            found[job].append(obs)
        complete = accounting is not Accounting.MISSING
        return {
            job: spi.Discovery(
                job=job, objects=tuple(sorted(objs, key=_order)), at=at, complete=complete
            )
            for job, objs in found.items()
        }

    def _accounting(
        self, query: Callable[[], list[SacctRow]], facts: probe.ClusterFacts
    ) -> tuple[Accounting, list[SacctRow]]:
        if not facts.accounting:
            return Accounting.OFF, []
        try:
            return Accounting.ANSWERED, query()
        except Unreachable as exc:
            log.warning("sacct did not answer; observations are incomplete: %s", exc)
            return Accounting.MISSING, []

    def inspect(self, ref: spi.ObjectRef) -> spi.ObjectObs:
        """One job now, from squeue and its sacct records with their steps (an OOM in a step
        shows there). NotFound when neither knows it."""
        job_id = self._id(ref)
        if job_id is None:
            raise NotFound(f"no Slurm job {ref}: a Slurm ref is a job id")
        row = next((r for r in self.slurm.squeue(job_id=job_id) if r.job_id == job_id), None)
        accounting, rows = self._accounting(
            lambda: self.slurm.sacct(job_id=job_id, allocations_only=False), self.facts()
        )
        obs = observe(job_id, row, [r for r in rows if r.base_id == job_id], accounting, self._mark)
        if obs is None:
            raise NotFound(f"no Slurm job {ref}")
        return obs

    def _mark(self, name: str, execution: int) -> str:
        """The line execution ``execution`` of object ``name`` wrote to its standard error when
        a program could not be started ("" when it wrote none): asked only of a run that failed
        with 126 or 127, and searched for where the file is (docs/specs/0008 §6). A search
        that fails raises Unreachable, so no poll reports an end it could not tell."""
        key = (name, execution)
        with self._lock:
            known = self._marks.get(key)
        if known is not None:
            return known
        path = f"{self.output_dir().rstrip('/')}/{name}.err"
        line = self.slurm.find_line(path, launch_mark(name, execution)) or ""
        if line:
            with self._lock:
                self._marks[key] = line
        return line

    # ------------------------------------------------------------------ holds

    def _check(self, deadline: datetime, what: str) -> None:
        refuse_past_deadline(deadline, self.now(), what)

    def hold(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Hold instance ``meta.instance``: the begin time becomes the hold base plus the
        instance (over the gate, if the object is still gated). Only a pending job can be held
        this way: Rejected when it runs or has ended, and past ``meta.deadline``."""
        self._check(meta.deadline, f"hold {meta.instance} of {ref}")
        holds.hold_time(meta.instance, gated=False)  # Invalid before anything is done
        row = self._queued(ref)
        if row is None:
            raise Rejected(f"cannot hold {ref}: it has ended")
        if row.state != "PENDING":
            raise Rejected(f"cannot hold {ref}: it is {row.state}, and only a pending job can be")
        begin = holds.decode(row.start)
        if begin.kind is holds.BeginKind.HOLD and begin.instance == meta.instance:
            return
        gated = begin.kind is holds.BeginKind.GATE or (
            begin.kind is holds.BeginKind.HOLD and begin.gated
        )
        at = holds.slurm_time(holds.hold_time(meta.instance, gated=gated))
        if not self._update(ref, StartTime=at, ok_if_past=True):
            raise Rejected(f"cannot hold {ref}: it started running")

    def release(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Lift hold ``meta.instance`` if it is the one standing: back to the gate when the
        object was still gated under it, else eligible now. Another instance, or none: success
        with no effect. Rejected past ``meta.deadline``."""
        self._check(meta.deadline, f"release {meta.instance} of {ref}")
        row = self._queued(ref)
        if row is None:
            return
        begin = holds.decode(row.start)
        if row.state != "PENDING" or begin.kind is not holds.BeginKind.HOLD:
            return
        if begin.instance != meta.instance:
            return
        target = holds.slurm_time(holds.GATE) if begin.gated else "now"
        self._update(ref, StartTime=target, ok_if_past=True)

    # ------------------------------------------------------------------ requeue

    def requeue(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """``scontrol requeue`` of the running job: its run ends ``requeued`` and it runs again
        as the next execution. The requeue bit is set for the call and put back as it was.

        A gated, pending or held job has nothing to requeue: success with no effect. An ended
        job is refused (Rejected): Slurm would requeue it, but rewrites the ended run's
        accounting row from FAILED or COMPLETED to REQUEUED (0007 §5), erasing the evidence its
        outcome rests on. Rejected past ``meta.deadline``.
        """
        self._check(meta.deadline, f"requeue of {ref}")
        row = self._queued(ref)
        if row is None:
            raise Rejected(f"cannot requeue {ref}: it has ended (0008 §5)")
        if row.state in ENDED_STATES:
            raise Rejected(f"cannot requeue {ref}: it has ended ({row.state}); 0008 §5")
        if row.state == "COMPLETING":
            raise Rejected(f"cannot requeue {ref}: its run is ending; observe it again")
        if row.state not in ("RUNNING", "CONFIGURING", "SUSPENDED"):
            return
        job_id = row.job_id
        was_set = row.requeue is True
        if not was_set:
            self._update(ref, ok_if_past=False, Requeue="1")
        try:
            result = self.slurm.requeue(job_id)
            if not result.ok:
                err = result.stderr.strip()
                if "pending execution" in err:
                    return
                raise Rejected(f"scontrol requeue {ref}: {err}")
        finally:
            if not was_set:
                try:
                    self._update(ref, ok_if_past=True, Requeue="0")
                except Exception:
                    # Left set: the core's restore-requeue step clears it (restore_requeue_bit).
                    log.warning("could not put the requeue bit of %s back to 0", ref)

    def restore_requeue_bit(self, ref: spi.ObjectRef, meta: t.CallMeta) -> None:
        """``scontrol update JobId=N Requeue=0``: the job no longer reruns by itself. An ended
        job is success with no effect. Rejected past ``meta.deadline``."""
        self._check(meta.deadline, f"restore of the requeue bit of {ref}")
        self._update(ref, ok_if_past=True, Requeue="0")

    # ------------------------------------------------------------------ output

    def output(
        self, ref: spi.ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
    ) -> IO[bytes]:
        """The job's output file, read through the transport; with ``follow``, a stream that
        polls for more until the job has ended. Slurm writes every rank of a step into the one
        file, so only rank 0 is asked for."""
        if stream not in ("stdout", "stderr"):
            raise Invalid(f"stream must be stdout or stderr, not {stream!r}")
        if rank != 0:
            raise Unsupported(f"Slurm writes all ranks of {ref} into one file; ask for rank 0")
        path = self._output_path(ref, stream)
        if not follow:
            return io.BytesIO(self.slurm.read(path) or b"")
        return followed.follow(
            lambda offset: self.slurm.read(path, offset) or b"",
            lambda: self._ended(ref),
            lambda _offset: time.sleep(FOLLOW_POLL),
        )

    def output_growth(self, refs: Sequence[spi.ObjectRef]) -> Mapping[spi.ObjectRef, spi.Growth]:
        """Each job's output so far: its stdout and stderr files' total size and newest
        modification time, from one ``squeue`` (their paths) and one ``stat`` for every job of
        ``refs`` together, whatever their number. A job slurmctld has forgotten, or with no
        output file yet, is left out."""
        ids = {job_id: ref for ref in refs if (job_id := self._id(ref)) is not None}
        paths = self.slurm.output_paths(list(ids))
        stats = self.slurm.stat_files(sorted({p for pair in paths.values() for p in pair if p}))
        out: dict[spi.ObjectRef, spi.Growth] = {}
        for job_id, pair in paths.items():
            seen = [stats[p] for p in set(pair) if p in stats]
            if job_id in ids and seen:
                newest = max(t for _, t in seen)
                out[ids[job_id]] = spi.Growth(
                    size=sum(n for n, _ in seen), at=datetime.fromtimestamp(newest, UTC)
                )
        return out

    def _output_path(self, ref: spi.ObjectRef, stream: str) -> str:
        job_id = self._id(ref)
        if job_id is None:
            raise NotFound(f"no Slurm job {ref}")
        shown = self.slurm.show("job", job_id)
        key = "StdOut" if stream == "stdout" else "StdErr"
        if shown is not None and shown.get(key):
            return shown[key]
        rows = self.slurm.sacct(job_id=job_id)
        if not rows:
            raise NotFound(f"no Slurm job {ref}")
        suffix = "out" if stream == "stdout" else "err"
        return f"{self.output_dir().rstrip('/')}/{rows[0].name}.{suffix}"

    def _ended(self, ref: spi.ObjectRef) -> bool:
        row = self._row(ref)
        return row is None or row.state in ENDED_STATES


def _order(obs: spi.ObjectObs) -> tuple[int, int, int]:
    ident = obs.identity
    n, k = (ident[1], ident[2]) if ident is not None else (0, 0)
    return (n, k, int(obs.ref.id) if obs.ref.id.isdigit() else 0)
