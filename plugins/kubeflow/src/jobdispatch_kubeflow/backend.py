"""The Kubeflow backend: the adapter SPI over TrainJobs (Kubeflow Trainer v2).

Objects are TrainJobs (their ref is ``<namespace>/<name>``), one per submission, created
suspended under their discovery name; executions are the child JobSet's restart attempts.
Everything the backend shows is read back from the cluster on every call: the gate, the hold
instance and the stop reason are annotations on the TrainJob, so two backends, or a backend
restarted after a crash, see the same thing. docs/specs/0010-kubeflow-adapter.md gives the
reasons for each decision.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from jobdispatch import spi
from jobdispatch import types as t
from jobdispatch.errors import (
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    Problem,
    Rejected,
    Unauthorized,
    Unsupported,
    ValidationError,
)
from jobdispatch.kit import followed
from jobdispatch.kit.deadline import refuse_past_deadline
from jobdispatch.kit.facts import NOT_PROBED
from jobdispatch.kit.refusal import refuses_unsupported

from jobdispatch_kubeflow import (
    classify,
    derived,
    gating,
    job_settings,
    manifest,
    names,
    placement,
    probe,
    restart,
)
from jobdispatch_kubeflow.api import AlreadyExists, Api, KubeApi, file_token
from jobdispatch_kubeflow.classify import Chain, Observation, observe
from jobdispatch_kubeflow.config import Settings
from jobdispatch_kubeflow.informers import OBSERVED, Informers
from jobdispatch_kubeflow.listwatch import Changed, Event, Listed, list_watch
from jobdispatch_kubeflow.sentinel import Sentinel

__all__ = ["KubeflowBackend"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: How often a followed output stream looks again for more.
FOLLOW_POLL = 0.5

#: What a supervisor can have this backend do, per action.
_PERFORM: Mapping[t.Action, t.Support] = {
    t.Action.RESUBMIT: t.Support.yes(t.Source.CATALOGUE, "a new TrainJob"),
    t.Action.ESCALATE: t.Support.yes(t.Source.CATALOGUE, "needs nothing of the cluster"),
    t.Action.REQUEUE: t.Support.no(t.Source.CATALOGUE, "an ended TrainJob cannot be rerun"),
    t.Action.RESTART: t.Support.no(
        t.Source.CATALOGUE, "restarts are the JobSet's, on its own policy"
    ),
}
#: How long one watch call listens before it returns (call it again to go on).
WATCH_WINDOW = 10
#: Pins remembered as written (see ``KubeflowBackend._pin``).
PINS_REMEMBERED = 100_000
#: How long the receipt of a TrainJob someone else deleted is kept once its pods are gone,
#: from its deletion, before an observation releases the finalizer (spec 0010 §4): many polls
#: of a supervisor (every 10 s), so the ending is recorded by then wherever one runs.
RECEIPT_KEEP = timedelta(minutes=10)


class KubeflowBackend(
    spi.Backend,
    spi.CessationSignal,
    spi.Holder,
    spi.IdentityWeakener,
    spi.MultiFinder,
    spi.NativePolicyCompiler,
    spi.OutputReader,
    spi.Paced,
    spi.PlacementChecker,
    spi.ResourceChecker,
    spi.ResourceTable,
    spi.SubmissionPreview,
    spi.Watcher,
):
    """Kubeflow Trainer v2 through the Kubernetes API. Implements Backend, Holder,
    NativePolicyCompiler, MultiFinder, Watcher, CessationSignal, IdentityWeakener,
    PlacementChecker and OutputReader.

    Args:
        settings: the validated configuration.
        api: overrides the API built from the settings (tests count or fake requests).
        token: a bearer token source, called on every request and never cached.
        clock: now, for deadlines.
    """

    name = "kubeflow"
    #: A poll is a LIST (of TrainJobs, JobSets, pods) against the API server; a watch streams
    #: the changes between polls, so the supervisor follows it and polls every 10 s at most.
    pacing = spi.Pacing(interval=10.0, floor=0.5, watch=True)

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        api: Api | None = None,
        token: Callable[[], str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        if token is None and self.settings.token_file is not None:
            token = file_token(self.settings.token_file)
        self._token = token
        self.api: Api = api or KubeApi(
            kubeconfig=self.settings.kubeconfig,
            context=self.settings.context,
            in_cluster=self.settings.in_cluster,
            token=token,
            timeout=self.settings.request_timeout,
        )
        self._clock = clock or (lambda: datetime.now(UTC))
        self.namespace = self.settings.namespace
        #: How TrainJobs are gated and held: chosen once, here, from the settings.
        self.gating = gating.of(self.settings)
        #: Follows dying pods between polls once a supervisor watches (see :meth:`watch`).
        self._sentry: Sentinel | None = None
        self._sentinel_lock = threading.Lock()
        #: The shared caches of every kind observed, started by the first :meth:`watch`.
        self._informers: Informers | None = None
        #: Seconds one :meth:`watch` call follows before it returns.
        self.watch_window: float = WATCH_WINDOW
        #: The pins this backend wrote, by (TrainJob uid, annotation), so that two looks at
        #: once (the poll, a watch thread) write one once (bounded, the oldest forgotten).
        self._pinned: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._pins_lock = threading.Lock()

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], token: Callable[[], str] | None = None
    ) -> KubeflowBackend:
        """Build from a configuration (validated here; unknown keys refused)."""
        return cls(Settings.from_config(config), token=token)

    def __repr__(self) -> str:
        return f"KubeflowBackend({self.api!r}, namespace={self.namespace})"

    # ------------------------------------------------------------------ capabilities

    def facts(self) -> probe.ClusterFacts:
        """The probed facts, cached per cluster for ``probe_ttl``: a poll costs no probe."""
        s = self.settings
        if not s.probe:
            return probe.UNPROBED
        return probe.probe(self.api, self.settings, key=self._probe_key())

    def _probe_key(self) -> str:
        s = self.settings
        return f"{self.api!r}|{s.kubeconfig}|{s.context}|{s.token_file}|{id(self._token)}"

    def _queue(self, spec: t.JobSpec | None) -> str | None:
        """The Kueue LocalQueue the TrainJob of ``spec`` goes to (read from the TrainJob
        ``start`` would create, so whatever chooses it is followed); the configured one
        without a spec; None when it goes through no Kueue queue."""
        if spec is None:
            return self.settings.kueue.queue if self.settings.kueue is not None else None
        labels = self._would_create(spec)["metadata"].get("labels") or {}
        queue = labels.get(names.QUEUE_NAME)
        return str(queue) if queue else None

    def _would_create(self, spec: t.JobSpec) -> Obj:
        """The TrainJob ``start`` would create for a first submission of ``spec`` (pure)."""
        request = spi.StartRequest(job="plan", submission=1, attempt=1, spec=spec)
        return manifest.trainjob(request, self.settings, self.gating)

    def capabilities(self, spec: t.JobSpec | None = None) -> Mapping[t.Capability, t.Support]:
        """Every capability, probed per cluster (cached for ``probe_ttl``), the readmission
        gate per LocalQueue; a spec that names a GPU model is told no, since the model is a
        node label this adapter does not select by."""
        facts = self.facts()
        queue = self._queue(spec) if self.gating.through_kueue else None
        readmission = None
        if queue is not None:
            readmission = probe.gate(
                self.api,
                self.settings,
                queue,
                key=self._probe_key(),
                facts=facts,
                clock=self._clock,
            )
        answers = probe.capabilities(
            facts,
            self.settings.declared,
            kueue_mode=self.gating.through_kueue,
            readmission=readmission,
        )
        if spec is not None and spec.resources.gpu_type is not None:
            answers = dict(answers)
            answers[t.Capability.GPUS] = t.Support.no(
                t.Source.CATALOGUE,
                f"GPUs of type {spec.resources.gpu_type!r}: the model is a node label; select it "
                "in resources.constraints (nvidia.com/gpu.product=...), or name a MIG slice or "
                "another vendor's resource in resources.kubeflow gpu_resource",
            )
        return answers

    # ------------------------------------------------------------------ the job file's table

    @property
    def resource_table(self) -> str:
        return job_settings.TABLE

    @property
    def resource_schema(self) -> Mapping[str, object]:
        return job_settings.RESOURCE_SCHEMA

    def resource_problems(self, spec: t.JobSpec) -> Sequence[Problem]:
        """What the schema of ``[resources.kubeflow]`` cannot say: each value read (a label
        given twice, a reserved key), constraints that are not node labels, a priority class
        where the cluster entry submits through no Kueue, an environment variable set twice,
        and a training runtime the cluster does not have or will not let it read (one GET,
        unless probing is off)."""
        problems: list[Problem] = []
        try:
            fields = job_settings.of(spec)
        except ValidationError as exc:
            at = f"resources.{job_settings.TABLE}."
            return [Problem(at + p.path, p.message) for p in exc.problems]
        try:
            job_settings.node_selector(spec.resources.constraints)
        except ValueError as exc:
            problems.append(Problem("resources.constraints", str(exc)))
        if fields.priority_class is not None and not self.gating.through_kueue:
            problems.append(
                Problem(
                    "resources.kubeflow.priority_class",
                    "names a Kueue WorkloadPriorityClass, but this cluster entry submits "
                    "through no Kueue (no kueue table); a pod PriorityClass cannot be patched "
                    "into a TrainJob (Trainer v2.2.1), so it comes from the training runtime",
                )
            )
        if fields.runtime is not None and self.settings.probe:
            why = probe.runtime_problem(self.api, self.settings, fields.runtime)
            if why:
                problems.append(Problem("resources.kubeflow.runtime", why))
        if self.settings.publish is not None and self.settings.probe:
            why = self._publish_runtime_problem(spec)
            if why:
                problems.append(Problem("", why))
        for ref in (*fields.secret_env, *fields.config_map_env):
            if ref.name in spec.env or ref.name.startswith("JOBDISPATCH_"):
                where = "secret_env" if ref in fields.secret_env else "config_map_env"
                problems.append(
                    Problem(
                        f"resources.kubeflow.{where}",
                        f"{ref.name!r} is also set by [env] or by dispatch itself",
                    )
                )
        return problems

    def _publish_runtime_problem(self, spec: t.JobSpec) -> str:
        """Why no run of ``spec`` could start under the publish option: the runtime derived for
        its init container is absent and the probed RBAC refuses creating it (what ``start``
        would refuse, told at plan instead); "" otherwise, or when the base runtime cannot be
        read (a problem told by its own check)."""
        try:
            body = derived.derive(
                self.api, self.settings, manifest.runtime_name(spec, self.settings)
            )
            if derived.present(self.api, body):
                return ""
        except DispatchError:
            return ""
        if self.facts().allowed.get("create trainingruntimes", False):
            return ""
        return derived.missing(body, "RBAC refuses creating trainingruntimes")

    @refuses_unsupported
    def preview(self, request: spi.StartRequest) -> str:
        """The TrainJob ``start`` would create for ``request``, as JSON (``kubectl create -f``
        reads it), creating nothing. Where a restart rule needs a derived runtime, its name is
        computed from the base runtime (one read), not created."""
        runtime = self._derived_runtime(request, create=False) if self._derives(request) else None
        body = manifest.trainjob(request, self.settings, self.gating, runtime=runtime)
        return json.dumps(body, indent=2, sort_keys=True) + "\n"

    def rules(self, spec: t.JobSpec, policy: t.RecoveryPolicy) -> Sequence[t.RuleSupport]:
        """Native: a restart on causes a derived runtime's failure policy tells apart exactly
        (0010 §6); nothing else. Perform: resubmit and escalate; hold as the cluster answers."""
        caps = self.capabilities(spec)
        return [self._rule(rule, caps) for rule in policy.rules]

    def _rule(self, rule: t.Rule, caps: Mapping[t.Capability, t.Support]) -> t.RuleSupport:
        perform = caps[t.Capability.HOLD] if rule.action is t.Action.HOLD else _PERFORM[rule.action]
        ungated = self._ungated(rule, caps)
        if ungated is not None:
            return ungated
        answered = self.gating.rule(rule, perform)
        if answered is not None:
            return answered
        if rule.action is not t.Action.RESTART:
            return t.RuleSupport(
                t.Support.no(t.Source.CATALOGUE, f"the cluster does not {rule.action} by itself"),
                perform,
            )
        cap = caps[t.Capability.NATIVE_RESTART]
        if not restart.covered(rule):
            on = ", ".join(str(k) for k in rule.on)
            return t.RuleSupport(
                t.Support.no(
                    t.Source.CATALOGUE, f"no JobSet failure policy restarts on exactly {on}"
                ),
                perform,
            )
        if cap.answer is not t.Tristate.YES:
            return t.RuleSupport(t.Support(cap.answer, cap.source, cap.detail), perform)
        return t.RuleSupport(
            t.Support.yes(t.Source.PROBED, "JobSet RestartJobSet, maxRestarts = the budget"),
            perform,
        )

    def _ungated(
        self, rule: t.Rule, caps: Mapping[t.Capability, t.Support]
    ) -> t.RuleSupport | None:
        """Under Kueue without a readmission gate, a rule on a cause Kueue requeues by itself
        (a preemption, a pods-ready timeout) cannot be enforced by anyone: Kueue readmits the
        evicted TrainJob before the supervisor decides. Answered with the gate's own answer
        (no, or unknown), so the plan refuses it as any rule without an enforcer; None when
        the gate stands or the rule names no such cause."""
        gate = caps[t.Capability.READMISSION_GATE]
        kueue_causes = sorted(str(k) for k in rule.on if k in gating.KUEUE_REQUEUES)
        if not self.gating.through_kueue or gate.answer is t.Tristate.YES or not kueue_causes:
            return None
        detail = f"Kueue readmits on {', '.join(kueue_causes)} by itself: {gate.detail}"
        return t.RuleSupport(
            t.Support.no(t.Source.CATALOGUE, detail), t.Support(gate.answer, gate.source, detail)
        )

    def compile(
        self, spec: t.JobSpec, rules: Mapping[int, t.Rule], remaining: Mapping[int, int]
    ) -> spi.NativeOffer:
        """Offer the restart rules a derived runtime enforces, with budget left. JobSet keeps
        one restart counter, so the offered rules share the smallest remaining budget."""
        caps = self.capabilities(spec)
        chosen = sorted(
            i
            for i, rule in rules.items()
            if self._rule(rule, caps).native.answer is t.Tristate.YES
            and remaining.get(i, rule.budget) > 0
        )
        if not chosen:
            return spi.NativeOffer()
        left = {i: remaining.get(i, rules[i].budget) for i in chosen}
        on: set[int] = set()
        for i in chosen:
            on.update(restart.indices(rules[i].on) or ())
        return spi.NativeOffer(
            rules=tuple(chosen),
            remaining=left,
            settings={
                "restart-on": ",".join(str(x) for x in sorted(on)),
                "max-restarts": str(min(left.values())),
            },
        )

    def identity_weakened(self, spec: t.JobSpec) -> str:
        """Why a run's identity is weak: the runtime lets Kubernetes rerun a rank in place
        (:meth:`_ranks_rerun`), or, under Kueue without a readmission gate, Kueue reruns an
        evicted TrainJob by itself as a new execution nobody decided (a job without a rule on
        preemption runs again). The plan shows it; Start refuses only the first."""
        ranks = self._ranks_rerun(spec)
        gate = self.capabilities(spec)[t.Capability.READMISSION_GATE]
        if not self.gating.through_kueue or gate.answer is t.Tristate.YES:
            return ranks
        readmits = f"Kueue may readmit an evicted TrainJob by itself (readmission-gate {gate})"
        return f"{ranks}; {readmits}" if ranks else readmits

    def _ranks_rerun(self, spec: t.JobSpec) -> str:
        """Why the runtime ``spec`` runs under (its own, else the cluster entry's) lets
        Kubernetes rerun a rank in place (the Job's ``backoffLimit`` or the pods'
        ``OnFailure``), so one execution may hold several runs of a rank; "" when it does not.
        Only where the site allows rank restarts; otherwise Start refuses. A job's own runtime
        is read here (one GET); one that cannot be read is taken to rerun ranks, never not to."""
        facts = self.facts()
        if not facts.probed:
            return f"the runtime may let Kubernetes rerun a rank in place: {NOT_PROBED}"
        name = manifest.runtime_name(spec, self.settings)
        if name != self.settings.runtime.name:
            try:
                own = probe.read_runtime(self.api, self.settings, name)
            except Unauthorized as exc:
                return f"runtime {name} may let Kubernetes rerun a rank in place: {exc}"
            if own is None:
                return f"runtime {name} may let Kubernetes rerun a rank in place: it is not found"
            facts = probe.with_runtime(facts, own)
        if not facts.reruns_pods:
            return ""
        limit = 6 if facts.backoff_limit is None else facts.backoff_limit
        return (
            f"runtime {name} lets Kubernetes rerun a rank in place "
            f"(Job backoffLimit {limit}, pod restartPolicy {facts.restart_policy or 'OnFailure'})"
        )

    def never_fits(self, spec: t.JobSpec) -> Sequence[Problem]:
        """Why the TrainJob ``spec`` becomes could never run here (:mod:`placement`): the nodes'
        largest allocatable of each resource it asks, its node selector (when it has one), and
        under Kueue its ClusterQueue's quota and what its cohort may lend it. One LIST of nodes
        (and a GET of the LocalQueue, a LIST of ClusterQueues) per plan; nothing where probing
        is off or RBAC refuses the reads."""
        if not self.settings.probe:
            return []
        body = self._would_create(spec)
        queue = (body["metadata"].get("labels") or {}).get(names.QUEUE_NAME)
        try:
            nodes, _ = self.api.list("nodes", None)
            cluster_queue, queues = None, None
            if queue:
                local = self.api.get("localqueues", self.namespace, str(queue))
                name = str(((local or {}).get("spec") or {}).get("clusterQueue") or "")
                cluster_queue = self.api.get("clusterqueues", None, name) if name else None
                queues, _ = self.api.list("clusterqueues", None)
        except Unauthorized as exc:
            log.info("the placement check reads nothing: %s", exc)
            return []
        return placement.never_fits(body, nodes, cluster_queue, queues)

    # ------------------------------------------------------------------ lifecycle

    def now(self) -> datetime:
        return self._clock()

    @refuses_unsupported
    def start(self, request: spi.StartRequest) -> spi.ObjectRef:
        """Create the TrainJob suspended under the discovery name. Rejected when the API
        refuses it (an object of that name exists: find it); OutcomeUnknown when the reply was
        lost. What the cluster cannot do was refused before, by the core."""
        runtime = self._derived_runtime(request) if self._derives(request) else None
        identity = "" if request.native.rules else self._ranks_rerun(request.spec)
        if identity and not self.settings.allow_rank_restart:
            raise Unsupported(
                f"cannot start {request.name}: {identity}; set allow_rank_restart where "
                "the site accepts it, or use a runtime with backoffLimit 0 and "
                "restartPolicy Never"
            )
        body = manifest.trainjob(request, self.settings, self.gating, runtime=runtime)
        try:
            created = self.api.create("trainjobs", self.namespace, body)
        except AlreadyExists as exc:
            raise Rejected(f"TrainJob {request.name} exists already: {exc}") from exc
        self._wrote("trainjobs", created)
        return names.ref_of(self.namespace, request.name)

    def _derives(self, request: spi.StartRequest) -> bool:
        """Whether the run needs a TrainingRuntime of its own: for the offer's failure policy,
        or for the publish image's init container."""
        return bool(request.native.rules) or self.settings.publish is not None

    def _derived_runtime(self, request: spi.StartRequest, *, create: bool = True) -> str:
        """Find (an operator applied it) or create the TrainingRuntime that carries the offer's
        failure policy and the publish image's init container (each when asked), based on the
        job's runtime; its name (module ``derived``). The name is a hash of its content, so
        equal runtimes are one. ``create=False``: the name only (a preview)."""
        restart_on: list[int] | None = None
        max_restarts = 0
        if request.native.rules:
            settings = request.native.settings
            try:
                restart_on = [int(x) for x in settings["restart-on"].split(",") if x]
                max_restarts = int(settings["max-restarts"])
            except (KeyError, ValueError) as exc:
                msg = f"native offer of {request.name} is not this adapter's: {exc}"
                raise Invalid(msg) from exc
        body = derived.derive(
            self.api,
            self.settings,
            manifest.runtime_name(request.spec, self.settings),
            restart_on=restart_on,
            max_restarts=max_restarts,
        )
        if create:
            derived.ensure(self.api, body)
        return str(body["metadata"]["name"])

    def _trainjob(self, ref: spi.ObjectRef) -> tuple[str, str, Obj]:
        namespace, name = names.split_ref(ref)
        obj = self.api.get("trainjobs", namespace, name)
        if obj is None:
            raise NotFound(f"no TrainJob {ref}")
        return namespace, name, obj

    def _patch(self, ref: spi.ObjectRef, change: Callable[[Obj], Obj | None]) -> None:
        """Read, decide, write with the version read (so a write between is a Conflict, and
        the decision is made again on what is there now)."""
        for _ in range(5):
            namespace, name, obj = self._trainjob(ref)
            body = change(obj)
            if body is None:
                return
            body.setdefault("metadata", {})["resourceVersion"] = obj["metadata"]["resourceVersion"]
            try:
                self._wrote("trainjobs", self.api.patch("trainjobs", namespace, name, body))
                return
            except Conflict:
                continue
        raise Rejected(f"TrainJob {ref} kept changing under five attempts to update it")

    def open(self, ref: spi.ObjectRef, meta: t.CallMeta | None = None) -> None:
        """Lift the gate the way the gating strategy lifts it (``gate: open`` and ``suspend:
        false``; under Kueue, 0012 §3). Under one of our holds only the gate is lifted (the
        hold stays). Already open, running, stopped or ended: success. Rejected past
        ``meta.deadline``, judged just before each conditional patch (spec 0001, D8)."""

        def change(obj: Obj) -> Obj | None:
            if meta is not None:
                self._check(meta.deadline, f"open of {ref}")
            md = obj.get("metadata") or {}
            if md.get("deletionTimestamp") or names.STOP in (md.get("annotations") or {}):
                return None
            if _ended(obj):
                return None
            return self.gating.open(obj, meta)

        self._patch(ref, change)

    def stop(self, ref: spi.ObjectRef, reason: str) -> None:
        """Write the reason and suspend, then delete the TrainJob with background propagation.
        Until its pods are gone (the suspension deletes them) it shows running with "clean-up
        pending" in its detail; then ended, cancelled by an actor. The adapter's finalizer keeps
        the deleted TrainJob readable as the receipt, and its JobSet with it, suspended; both
        go when ``forget`` lets the TrainJob go. Already gone or stopped: success.

        Not foreground: the collector would delete the JobSet while the TrainJob still exists,
        the Trainer controller (which never looks at a deletionTimestamp) would apply it again,
        and the two went round for hours on the control plane (0010 §4)."""
        try:
            namespace, name, obj = self._trainjob(ref)
        except NotFound:
            return
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            # Deleted already (by dispatch, or by someone else, whose delete alone stops
            # nothing while the receipt holds it): make sure it is suspended, nothing more.
            if not (obj.get("spec") or {}).get("suspend") and not _ended(obj):
                self._suspend_deleted(ref, _going(self.chain(ref)))
            return
        if not _ended(obj):
            running = _going(self.chain(ref))

            def change(current: Obj) -> Obj | None:
                md = current.get("metadata") or {}
                if md.get("deletionTimestamp"):
                    return None
                # Suspended as well as deleted: a background delete leaves the JobSet while
                # the receipt's finalizer holds the TrainJob, and the suspension is what
                # deletes its pods (0010 §4).
                body: Obj = {"spec": {"suspend": True}}
                # The first stop's reason is the receipt's: a second stop racing it (the
                # supervisor's, on seeing a person's cancel committed) does not rewrite it.
                if names.STOP not in (md.get("annotations") or {}):
                    annotations = {names.STOP: reason or "stopped"}
                    if running is not None:
                        annotations[names.STOPPED_RUN] = str(running)
                    body["metadata"] = {"annotations": annotations}
                return body

            try:
                self._patch(ref, change)
            except NotFound:
                return
        self.api.delete("trainjobs", namespace, name, propagation="Background")

    def forget(self, ref: spi.ObjectRef) -> None:
        """Remove the receipt of a stopped TrainJob (its finalizer), once nothing needs it.
        Read and written with its version, again on a conflict: the collector removes its own
        finalizer from the same list meanwhile (a 409 seen on the control plane)."""

        def change(obj: Obj) -> Obj | None:
            finalizers = list(obj["metadata"].get("finalizers") or ())
            if names.FINALIZER not in finalizers:
                return None
            return {"metadata": {"finalizers": [f for f in finalizers if f != names.FINALIZER]}}

        try:
            self._patch(ref, change)
        except NotFound:
            return

    def close(self) -> None:
        if self._sentry is not None:
            self._sentry.stop()
        if self._informers is not None:
            self._informers.stop()
        self.api.close()

    # ------------------------------------------------------------------ observation

    def find(self, job: t.JobID) -> spi.Discovery:
        """Every TrainJob of ``job``: the same few reads as find_many."""
        return self.find_many([job])[job]

    def find_many(
        self, jobs: Sequence[t.JobID], states: Sequence[t.ObjectState] = ()
    ) -> Mapping[t.JobID, spi.Discovery]:
        """Every object of every job in ``jobs``. Once a supervisor follows the cluster
        (:meth:`watch` started the shared caches, module ``informers``) the caches answer and a
        poll sends no request at all; before, one LIST each of TrainJobs, JobSets, Jobs and
        Pods (and Workloads under Kueue), by selectors that name one job or none, never a list
        of them, and a GET of each node a pod is bound to when the evidence needs nodes."""
        at = self.now()
        wanted = list(dict.fromkeys(jobs))
        found: dict[t.JobID, list[spi.ObjectObs]] = {job: [] for job in wanted}
        if not wanted:
            return {}
        view = self._view()
        if view is not None:
            trainjobs = view.items("trainjobs")
        else:
            selector = names.job_selector(wanted) if len(wanted) == 1 else OBSERVED["trainjobs"]
            trainjobs, _ = self.api.list("trainjobs", self.namespace, label_selector=selector)
        trainjobs = [tj for tj in trainjobs if _labels(tj).get(names.JOB) in found]
        chains = self._chains(trainjobs, view)
        wanted_states = set(states)
        for chain in chains:
            obs = self._object(observe(chain))
            ident = obs.identity
            if ident is None or ident[0] not in found:
                continue
            if wanted_states and obs.state not in wanted_states:
                continue
            found[ident[0]].append(obs)
        return {
            job: spi.Discovery(job=job, objects=tuple(sorted(objs, key=_order)), at=at)
            for job, objs in found.items()
        }

    def _view(self) -> Informers | None:
        """The shared caches when they answer (started and listed), else None: read the API."""
        view = self._informers
        return view if view is not None and view.ready() else None

    def _chains(
        self, trainjobs: list[Obj], view: Informers | None, *, seen: Sequence[Obj] = ()
    ) -> list[Chain]:
        """The chain beneath each of ``trainjobs``, from the caches (``view``) or from one LIST
        of each kind; ``seen``: pods a watch showed, added when they are no longer there."""
        ours = [
            tj
            for tj in trainjobs
            if spi.parse_discovery_name(str((tj.get("metadata") or {}).get("name", ""))) is not None
        ]
        if not ours:
            return []
        tj_names = {str(tj["metadata"]["name"]) for tj in ours}
        if view is not None:
            jobsets, jobs, pods = view.items("jobsets"), view.items("jobs"), view.items("pods")
            listed = view.items("workloads") if "workloads" in view.kinds else None
        else:
            jobsets, jobs, pods = self._list_beneath(ours)
            listed = None
        listed_pods = {_uid(p) for p in pods}
        pods = [*pods, *(dict(p) for p in seen if _uid(p) not in listed_pods)]
        by_name: dict[str, Obj] = {
            str(js["metadata"]["name"]): js
            for js in jobsets
            if str(js["metadata"]["name"]) in tj_names
        }
        jobs_under, pods_under = _beneath(jobs, tj_names), _beneath(pods, tj_names)
        pods = [p for under in pods_under.values() for p in under]
        nodes = self._nodes(ours, pods, view)
        workloads = self.gating.workloads(self.api, self.namespace, ours, listed=listed)
        chains = [
            Chain(
                trainjob=tj,
                jobset=by_name.get(tj["metadata"]["name"]),
                jobs=jobs_under.get(tj["metadata"]["name"], []),
                pods=pods_under.get(tj["metadata"]["name"], []),
                nodes=nodes,
                workload=workloads.get(str(tj["metadata"].get("uid"))),
            )
            for tj in ours
        ]
        for chain in chains:
            self._pin(chain)
            self._tend(chain)
        return chains

    def _list_beneath(self, trainjobs: list[Obj]) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """The JobSets, Jobs and Pods beneath ``trainjobs``, one LIST each: by the one job's
        or TrainJob's label when there is one, else by the label every such object carries (a
        selector never grows with the number of jobs; the caller keeps what it asked for)."""
        if len(trainjobs) == 1:
            meta = trainjobs[0]["metadata"]
            owned = names.job_selector([str(_labels(trainjobs[0]).get(names.JOB, ""))])
            beneath = f"{names.JOBSET_NAME}={meta['name']}"
        else:
            owned, beneath = str(OBSERVED["jobsets"]), names.JOBSET_NAME
        jobsets, _ = self.api.list("jobsets", self.namespace, label_selector=owned)
        jobs, _ = self.api.list("jobs", self.namespace, label_selector=beneath)
        pods, _ = self.api.list("pods", self.namespace, label_selector=beneath)
        return jobsets, jobs, pods

    def _nodes(
        self, trainjobs: Sequence[Obj], pods: Sequence[Obj], view: Informers | None = None
    ) -> dict[str, Obj] | None:
        """The nodes the evidence needs (:func:`classify.wants_nodes`, the names from
        :func:`classify.needed_nodes`) by name, a deleted one absent; None when the evidence
        needs none, and a missing node then proves nothing. Read from the followed nodes once
        a supervisor follows them (the first need starts following), else one GET each: never
        a LIST of the cluster's nodes."""
        if not classify.wants_nodes(trainjobs, pods):
            return None
        needed = sorted(classify.needed_nodes(trainjobs, pods))
        if view is not None:
            view.follow_nodes()
            if view.ready("nodes"):
                return {n: node for n in needed if (node := view.get("nodes", n)) is not None}
        return {n: node for n in needed if (node := self.api.get("nodes", None, n)) is not None}

    def _wrote(self, kind: str, obj: Obj | None) -> None:
        """A write's reply, put in the shared caches (read-your-writes)."""
        if self._informers is not None:
            self._informers.wrote(kind, obj)

    def _pin(self, chain: Chain) -> None:
        """Write on the TrainJob what a failing pod shows, before the pod is deleted with it
        (an evicted pod was gone within 1.5 s on the control plane), and the nodes a run's pods
        are bound to, for when a node goes with its pods: the one write an observation makes,
        idempotent, and skipped (with a log line) when it cannot be made."""
        annotations = classify.pins(chain) | classify.placement_pins(chain)
        if not annotations:
            return
        meta = chain.trainjob.get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name"))
        with self._pins_lock:
            if all(self._pinned.get((uid, k)) == v for k, v in annotations.items()):
                # Written already by this backend: the poll and a watch thread read the same
                # cached object at once, or the cache has not had the write's event yet.
                return
        try:
            self._wrote(
                "trainjobs",
                self.api.patch(
                    "trainjobs",
                    str(meta.get("namespace") or self.namespace),
                    str(meta.get("name")),
                    {"metadata": {"annotations": annotations}},
                ),
            )
        except (NotFound, Conflict, Rejected, Unauthorized) as exc:
            log.info("could not pin the evidence of %s: %s", meta.get("name"), exc)
            return
        with self._pins_lock:
            for k, v in annotations.items():
                self._pinned[(uid, k)] = v
            while len(self._pinned) > PINS_REMEMBERED:
                self._pinned.popitem(last=False)

    def chain(self, ref: spi.ObjectRef) -> Chain:
        """Every object beneath one TrainJob, events included (for inspect and the tests)."""
        chain = self._read_chain(ref)
        self._pin(chain)
        self._tend(chain)
        return chain

    def _tend(self, chain: Chain) -> None:
        """What an observation does for a TrainJob someone other than dispatch deleted (a
        ``kubectl delete``, the SDK's ``delete_job``): the receipt finalizer holds it, and a
        background delete waits for it, so nothing else would ever stop its pods (they ran
        on for 21 minutes on the control plane). Suspend it, as :meth:`stop` does, writing the
        run that was going; once its pods are gone and :data:`RECEIPT_KEEP` has passed since
        the deletion, release the finalizer (spec 0010 §4). A TrainJob dispatch stopped keeps
        its receipt until ``forget``."""
        tj = chain.trainjob
        md = tj.get("metadata") or {}
        annotations = md.get("annotations") or {}
        if not md.get("deletionTimestamp") or names.STOP in annotations:
            return
        ref = names.ref_of(str(md.get("namespace") or self.namespace), str(md.get("name")))
        if not (tj.get("spec") or {}).get("suspend") and not _ended(tj):
            log.info("TrainJob %s was deleted by someone else: suspending it", ref)
            self._suspend_deleted(ref, _going(chain))
            return
        deleted = _time(md.get("deletionTimestamp"))
        if (
            names.FINALIZER in (md.get("finalizers") or ())
            and not observe(chain).pods_left
            and deleted is not None
            and self.now() - deleted >= RECEIPT_KEEP
        ):
            log.info("TrainJob %s: deleted by someone else, stopped; releasing its receipt", ref)
            self.forget(ref)

    def _suspend_deleted(self, ref: spi.ObjectRef, going: int | None) -> None:
        """Suspend a TrainJob being deleted (its pods then go), with the run that was going."""

        def change(obj: Obj) -> Obj | None:
            if (obj.get("spec") or {}).get("suspend") or _ended(obj):
                return None
            body: Obj = {"spec": {"suspend": True}}
            if going is not None and names.STOPPED_RUN not in (
                (obj.get("metadata") or {}).get("annotations") or {}
            ):
                body["metadata"] = {"annotations": {names.STOPPED_RUN: str(going)}}
            return body

        try:
            self._patch(ref, change)
        except (NotFound, Rejected, Unauthorized) as exc:
            log.info("could not suspend the deleted TrainJob %s: %s", ref, exc)

    def _read_chain(
        self, ref: spi.ObjectRef, *, events: bool = True, seen: Sequence[Mapping[str, Any]] = ()
    ) -> Chain:
        """The objects beneath one TrainJob, read now. ``seen``: pods a watch showed, added
        when the API server no longer lists them (deleted since)."""
        namespace, name, tj = self._trainjob(ref)
        beneath = f"{names.JOBSET_NAME}={name}"
        jobset = self.api.get("jobsets", namespace, name)
        jobs, _ = self.api.list("jobs", namespace, label_selector=beneath)
        pods, _ = self.api.list("pods", namespace, label_selector=beneath)
        listed = {_uid(p) for p in pods}
        pods.extend(dict(p) for p in seen if _uid(p) not in listed)
        nodes = self._nodes([tj], pods)
        found: list[Obj] = []
        if events:
            found, _ = self.api.list(
                "events", namespace, field_selector=f"involvedObject.name={name}"
            )
        workloads = self.gating.workloads(self.api, namespace, [tj])
        workload = workloads.get(str(tj["metadata"].get("uid")))
        return Chain(
            trainjob=tj,
            jobset=jobset,
            jobs=jobs,
            pods=pods,
            nodes=nodes,
            events=found,
            workload=workload,
        )

    def _pin_dying(self, pod: Mapping[str, Any]) -> None:
        """The sentinel's hand-over: pin what a dying ``pod`` shows on its TrainJob, the pod as
        the watch showed it standing in for one the API server has deleted already. Read from
        the shared caches when they answer."""
        name = str(pod["metadata"]["labels"][names.JOBSET_NAME])
        view = self._view()
        if view is not None:
            tj = view.get("trainjobs", name)
            if tj is not None:
                self._chains([tj], view, seen=[dict(pod)])
                return
        try:
            chain = self._read_chain(names.ref_of(self.namespace, name), events=False, seen=[pod])
        except NotFound:
            return
        self._pin(chain)

    def follow_dying_pods(self) -> None:
        """Start the pod sentinel now instead of at the first :meth:`watch`. A supervisor
        watches, so its adapter pins what a dying pod shows however briefly it shows it; a
        caller that only inspects (the conformance harness, a script polling :meth:`inspect`)
        sees that evidence only when a look falls in the moment the pod shows it (a preempted
        pod is deleted about a second later), and reads ``unknown`` otherwise. Stopped by
        :meth:`close`."""
        self._sentinel().start()

    def _sentinel(self) -> Sentinel:
        """The pod sentinel, following pods by itself (over an API that does not stream, or
        fed by the shared pods' follower, :meth:`_following`)."""
        with self._sentinel_lock:
            if self._sentry is None:
                self._sentry = Sentinel(self.api, self.namespace, self._pin_dying)
            return self._sentry

    def _following(self) -> Informers:
        """The shared caches, started on first use, with the pod sentinel fed by the pods'."""
        with self._sentinel_lock:
            if self._informers is None:
                kinds: tuple[str, ...] = ("trainjobs", "jobsets", "jobs", "pods")
                if self.gating.through_kueue:
                    kinds = (*kinds, "workloads")
                self._informers = Informers(self.api, self.namespace, kinds)
                if self._sentry is None:
                    self._sentry = Sentinel(self.api, self.namespace, self._pin_dying)
                sentinel = self._sentry
                self._informers.subscribe(
                    lambda kind, event: sentinel.handle(event) if kind == "pods" else None
                )
            informers = self._informers
        informers.start()
        return informers

    def inspect(self, ref: spi.ObjectRef) -> spi.ObjectObs:
        """One TrainJob now, with the events about it in the detail; NotFound when the API no
        longer has it."""
        return self._object(observe(self.chain(ref)))

    def _object(self, obs: Observation) -> spi.ObjectObs:
        return spi.ObjectObs(
            ref=names.ref_of(self.namespace, obs.name),
            name=obs.name,
            state=obs.state,
            executions=obs.executions,
            hold_instance=obs.hold_instance,
            requeue_bit=None,
            lost_nodes=obs.lost_nodes,
            detail=obs.detail,
        )

    def watch(self, job: t.JobID) -> Iterator[spi.ObjectObs]:
        """The job's objects as they are now, then again after each change of anything beneath
        them, for up to ``WATCH_WINDOW`` seconds; call it again to go on.

        Every watch of every job reads the shared caches (module ``informers``: one LIST and
        one WATCH per kind, resumed from its version, listed again only on a 410), started by
        the first call, with the pod sentinel fed by the pods' watch (module ``sentinel``: it
        pins what a dying pod shows as the API server reports it). So following a job sends no
        request of its own. Where the caches cannot be filled (the identity may not watch a
        kind), a window lists the job's TrainJobs and watches them (:meth:`_watch_listing`)."""
        if not getattr(self.api, "streams", False):
            self._sentinel().start()
            yield from self._watch_listing(job)
            return
        informers = self._following()
        if not informers.wait(self.watch_window):
            yield from self._watch_listing(job)
            return
        changes: queue.Queue[tuple[str, Event]] = queue.Queue()

        def hand(kind: str, event: Event) -> None:
            if _concerns(kind, event, job):
                changes.put((kind, event))

        unsubscribe = informers.subscribe(hand)
        deadline = time.monotonic() + self.watch_window
        try:
            yield from self._observed(job, informers)
            while (left := deadline - time.monotonic()) > 0:
                try:
                    batch = [changes.get(timeout=left)]
                except queue.Empty:
                    return
                while not changes.empty():
                    batch.append(changes.get_nowait())
                for kind, event in batch:
                    gone = isinstance(event, Changed) and event.type == "DELETED"
                    if kind == "trainjobs" and gone:
                        assert isinstance(event, Changed)
                        yield self._object(observe(Chain(trainjob=event.obj)))
                yield from self._observed(job, informers)
        finally:
            unsubscribe()

    def _observed(self, job: t.JobID, view: Informers) -> Iterator[spi.ObjectObs]:
        trainjobs = [tj for tj in view.items("trainjobs") if _labels(tj).get(names.JOB) == job]
        for chain in self._chains(trainjobs, view):
            yield self._object(observe(chain))

    def _watch_listing(self, job: t.JobID) -> Iterator[spi.ObjectObs]:
        """A window of following one job by itself: a LIST of its TrainJobs and a WATCH from
        there (the way before the shared caches, kept for an identity that cannot fill them)."""
        selector = names.job_selector([job])
        for event in list_watch(
            self.api, "trainjobs", self.namespace, selector=selector, window=self.watch_window
        ):
            if isinstance(event, Listed):
                for chain in self._chains(event.items, None):
                    yield self._object(observe(chain))
                continue
            name = str((event.obj.get("metadata") or {}).get("name", ""))
            if spi.parse_discovery_name(name) is None:
                continue
            if event.type == "DELETED":
                yield self._object(observe(Chain(trainjob=event.obj)))
                continue
            try:
                yield self.inspect(names.ref_of(self.namespace, name))
            except NotFound:
                continue

    def ceased(self, ref: spi.ObjectRef) -> spi.CessationEvidence:
        """Yes once no pod of the object can still run (none left, or all Succeeded or Failed);
        no while one can; never no of an ended object (it has none by then)."""
        try:
            chain = self.chain(ref)
        except NotFound:
            return spi.CessationEvidence(
                ceased=t.Tristate.YES, detail="the TrainJob is gone", at=self.now()
            )
        obs = observe(chain)
        if obs.pods_left and obs.state is t.ObjectState.ENDED:
            # Ended (its outcome is final) while some pods are still being deleted.
            return spi.CessationEvidence(
                ceased=t.Tristate.UNKNOWN,
                detail=f"clean-up pending: {obs.pods_left} pods remain",
                at=self.now(),
            )
        if obs.pods_left:
            return spi.CessationEvidence(
                ceased=t.Tristate.NO,
                detail=f"{obs.pods_left} pods may still run ({obs.state})",
                at=self.now(),
            )
        return spi.CessationEvidence(ceased=t.Tristate.YES, detail="no pod can run", at=self.now())

    # ------------------------------------------------------------------ holds

    def _check(self, deadline: datetime, what: str) -> None:
        refuse_past_deadline(deadline, self.now(), what)

    def hold(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Suspend the TrainJob with ``hold: <instance>`` (replacing a standing instance). Only
        an object that has not run can be held: Rejected when it runs or has ended (suspending
        a running TrainJob deletes its pods, which is a stop, not a hold), and past
        ``meta.deadline``. The gating strategy places it: under Kueue, which owns suspend, the
        hold is the annotation and ``Workload.spec.active: false`` (spec 0012 §8)."""
        self._check(meta.deadline, f"hold {meta.instance} of {ref}")
        if meta.instance < 0:
            raise Invalid(f"hold instance must be >= 0, not {meta.instance}")
        state = self.inspect(ref).state
        if state in (t.ObjectState.RUNNING, t.ObjectState.ENDED):
            raise Rejected(
                f"cannot hold {ref}: it is {state}; only an object not yet running can be"
            )

        def change(obj: Obj) -> Obj | None:
            if _ended(obj) or (obj.get("metadata") or {}).get("deletionTimestamp"):
                raise Rejected(f"cannot hold {ref}: it has ended")
            annotations = obj["metadata"].get("annotations") or {}
            if annotations.get(names.HOLD) == str(meta.instance):
                return None
            return self.gating.hold(meta.instance)

        self._patch(ref, change)
        self.gating.held(
            self.api, ref, lambda: self._check(meta.deadline, f"hold {meta.instance} of {ref}")
        )

    def release(self, ref: spi.ObjectRef, meta: t.HoldMeta) -> None:
        """Lift hold ``meta.instance`` if it is the one standing: back to the gate when the
        object was held before it was opened, else resumed. Another instance, or none: success
        with no effect. Rejected past ``meta.deadline``. The gating strategy lifts it: under
        Kueue the Workload is reactivated, and an object opened under the hold gets the open it
        was held from."""
        self._check(meta.deadline, f"release {meta.instance} of {ref}")
        released = False

        def change(obj: Obj) -> Obj | None:
            nonlocal released
            annotations = obj["metadata"].get("annotations") or {}
            if annotations.get(names.HOLD) != str(meta.instance):
                return None
            released = True
            return self.gating.release(obj, t.CallMeta(deadline=meta.deadline))

        self._patch(ref, change)
        if released:
            self.gating.released(self.api, ref)

    # ------------------------------------------------------------------ output

    def output(
        self, ref: spi.ObjectRef, *, stream: str = "stdout", follow: bool = False, rank: int = 0
    ) -> IO[bytes]:
        """The log of rank ``rank``'s pod (its completion index) in the current attempt; with
        ``follow``, a stream that looks again every half second and ends once the object has
        ended (:meth:`_log_whole` says why it does not use the server's follow). A pod
        log holds stdout and stderr together, so only ``stdout`` is asked for."""
        if stream not in ("stdout", "stderr"):
            raise Invalid(f"stream must be stdout or stderr, not {stream!r}")
        if stream == "stderr":
            raise Unsupported(f"a pod log of {ref} holds stderr within stdout; ask for stdout")
        caps = self.capabilities()
        cap = t.Capability.OUTPUT_FOLLOW if follow else t.Capability.OUTPUT_READ
        if caps[cap].answer is t.Tristate.NO:
            raise Unsupported(f"{cap} is not supported here ({caps[cap].detail})")
        if follow:
            return followed.follow(
                lambda offset: self._log_whole(ref, rank)[offset:],
                lambda: self._ended_or_gone(ref),
                lambda _offset: time.sleep(FOLLOW_POLL),
            )
        namespace, pod, container = self._log_source(ref, rank)
        return self.api.log(namespace, pod, container=container, follow=False)

    def _log_whole(self, ref: spi.ObjectRef, rank: int) -> bytes:
        """The whole log of rank ``rank``'s pod, read without following: the API server's
        own follow ends when the kubelet ends it, and kwok's never does (it tails its log file
        for ever, seen on the control plane), while a real kubelet's may outlive a deleted
        object. So a follower reads the log whole on each look and keeps only what is new."""
        try:
            namespace, pod, container = self._log_source(ref, rank)
            with self.api.log(namespace, pod, container=container, follow=False) as f:
                return f.read()
        except NotFound:
            return b""

    def _ended_or_gone(self, ref: spi.ObjectRef) -> bool:
        try:
            return self.inspect(ref).state is t.ObjectState.ENDED
        except NotFound:
            return True

    def _log_source(self, ref: spi.ObjectRef, rank: int) -> tuple[str, str, str | None]:
        """(namespace, pod, container) of rank ``rank``'s log in the current attempt."""
        chain = self.chain(ref)
        pods = [p for p in chain.pods if _rank(p) == rank]
        if not pods:
            raise NotFound(f"TrainJob {ref} has no pod of rank {rank} (yet)")
        pod = max(pods, key=lambda p: int(_labels(p).get(names.RESTART_ATTEMPT, "0") or 0))
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
        container = "node" if "node" in containers else (containers[0] if containers else None)
        return self.namespace, str(pod["metadata"]["name"]), container


def _beneath(objs: list[Obj], wanted: set[str]) -> dict[str, list[Obj]]:
    """``objs`` by the JobSet (TrainJob) name they carry, of the ``wanted`` ones only: one pass,
    so a poll of N jobs is linear in N."""
    out: dict[str, list[Obj]] = {}
    for obj in objs:
        name = _labels(obj).get(names.JOBSET_NAME)
        if name in wanted:
            out.setdefault(str(name), []).append(obj)
    return out


def _concerns(kind: str, event: Event, job: t.JobID) -> bool:
    """Whether ``event`` of ``kind`` may change what ``job``'s objects show: a change of one
    of its TrainJobs or of anything beneath them, any Workload's, a node deleted or not Ready,
    and every new list (after a 410)."""
    if isinstance(event, Listed):
        return True
    obj = event.obj
    if kind == "trainjobs":
        return _labels(obj).get(names.JOB) == job
    if kind == "workloads":
        return True
    if kind == "nodes":
        ready = [
            c.get("status")
            for c in (obj.get("status") or {}).get("conditions") or ()
            if c.get("type") == "Ready"
        ]
        return event.type == "DELETED" or ready != ["True"]
    parsed = spi.parse_discovery_name(str(_labels(obj).get(names.JOBSET_NAME, "")))
    if kind == "jobsets":
        parsed = spi.parse_discovery_name(str((obj.get("metadata") or {}).get("name", "")))
    return parsed is not None and parsed[0] == job


def _time(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name"))


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _rank(pod: Mapping[str, Any]) -> int:
    labels = _labels(pod)
    value = labels.get("batch.kubernetes.io/job-completion-index") or labels.get(
        "jobset.sigs.k8s.io/job-index", "0"
    )
    return int(value) if str(value).isdigit() else 0


def _going(chain: Chain) -> int | None:
    """The index of the execution running in ``chain``, None when none is."""
    latest = observe(chain).executions
    return latest[-1].index if latest and latest[-1].state is t.ObjectState.RUNNING else None


def _ended(obj: Mapping[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return True
    return False


def _order(obs: spi.ObjectObs) -> tuple[int, int, str]:
    ident = obs.identity
    n, k = (ident[1], ident[2]) if ident is not None else (0, 0)
    return (n, k, obs.ref.id)
