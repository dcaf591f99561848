"""The environment handle: what happens *to* the memory scheduler, as opposed to what a host asks
of it.

A test, the tutorial or the simulator uses it to play the cluster's part: let an object run,
preempt it, lose a node, kill it for memory, let its time run out, finish it, lose a Start reply.
Every call takes the cluster's lock, so it may come from another thread while a supervisor polls.
An operation that makes no sense for the object's state (preempting an object that is not
running) raises :class:`~jobdispatch.Invalid` rather than doing nothing, so a test can never
pass because its fault silently missed.
"""

from __future__ import annotations

import signal as signals
from collections import Counter

from jobdispatch.errors import Invalid
from jobdispatch.memory.cluster import Cluster
from jobdispatch.memory.history import History
from jobdispatch.memory.objects import describe
from jobdispatch.spi import ObjectObs, ObjectRef
from jobdispatch.types import Cause, CauseKind, JobID, ObjectState, Provenance, Tristate

__all__ = ["MemoryEnv"]

#: How a process killed by the kernel's OOM killer shows: SIGKILL, so exit code 128 + 9.
OOM_SIGNAL = int(signals.SIGKILL)


class MemoryEnv:
    """Drives one :class:`~jobdispatch.memory.MemoryBackend`'s scheduler."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    @property
    def history(self) -> History:
        """Everything the backend did, in order (see :mod:`jobdispatch.memory.history`)."""
        return self._cluster.history

    @property
    def calls(self) -> Counter[str]:
        """SPI calls made so far, per method name (``find``, ``find_many``, ``start``...)."""
        return self._cluster.calls

    @property
    def objects(self) -> list[ObjectRef]:
        """Every object ever created, in creation order."""
        with self._cluster.lock:
            return list(self._cluster.objects)

    def objects_of(self, job: JobID) -> list[ObjectRef]:
        """The objects created under ``job``'s discovery names, found or not."""
        with self._cluster.lock:
            return [o.ref for o in self._cluster.by_job.get(job, ())]

    def describe(self, ref: ObjectRef) -> str:
        """What the scheduler holds of the object, in the form ``preview`` prints it."""
        with self._cluster.lock:
            obj = self._cluster.get(ref)
            return describe(obj.name, obj.spec, obj.native)

    def observe(self, job: JobID) -> list[ObjectObs]:
        """What the scheduler holds of each of ``job``'s objects, without counting as an SPI
        call or consuming a fault: the truth a test or the simulator plays the job's side by
        (its runs marking progress, say)."""
        with self._cluster.lock:
            c = self._cluster
            return [c.observe(o) for o in c.by_job.get(job, ())]

    def shows(self, ref: ObjectRef) -> ObjectObs:
        """What the scheduler holds of one object, as ``observe`` (no SPI call, no fault)."""
        with self._cluster.lock:
            c = self._cluster
            return c.observe(c.get(ref))

    def state(self, ref: ObjectRef) -> ObjectState:
        """The object's state, without counting as an SPI call or consuming a fault."""
        with self._cluster.lock:
            return self._cluster.get(ref).state

    # ------------------------------------------------------------------ running and endings

    def run(self, ref: ObjectRef) -> int:
        """Start the next execution of a pending object (past its gate, not held); its index."""
        with self._cluster.lock:
            return self._cluster.begin(self._cluster.get(ref)).index

    def end(self, ref: ObjectRef, cause: Cause) -> None:
        """End the running execution with any cause; the shape's native policy then applies."""
        with self._cluster.lock:
            obj, execution = self._cluster.running(ref, f"end ({cause.kind})")
            self._cluster.end_execution(obj, execution, cause)

    def preempt(self, ref: ObjectRef) -> None:
        """The scheduler preempts the running execution for higher-priority work."""
        self.end(
            ref,
            Cause(CauseKind.PREEMPTED, Provenance.SCHEDULER, "preempted by higher-priority work"),
        )

    def lose_node(self, ref: ObjectRef, node: str | None = None) -> str:
        """A node under the running execution goes down (one picked by the seed when not
        named); the execution ends node-lost and the object shows the node as lost. Returns
        the node."""
        with self._cluster.lock:
            obj, execution = self._cluster.running(ref, "lose a node of")
            if node is None:
                node = self._cluster.rng.choice(execution.nodes)
            elif node not in execution.nodes:
                msg = f"object {ref} does not run on {node} (it runs on {execution.nodes})"
                raise Invalid(msg)
            cause = Cause(CauseKind.NODE_LOST, Provenance.SCHEDULER, f"{node} stopped responding")
            self._cluster.end_execution(obj, execution, cause, lost_nodes=(node,))
            return node

    def oom(self, ref: ObjectRef) -> None:
        """The kernel's OOM killer kills the execution: SIGKILL, exit code 137."""
        self.end(
            ref,
            Cause(
                CauseKind.OUT_OF_MEMORY,
                Provenance.APPLICATION,
                "killed by the kernel's OOM killer",
                exit_code=128 + OOM_SIGNAL,
                signal=OOM_SIGNAL,
            ),
        )

    def time_out(self, ref: ObjectRef) -> None:
        """The execution reaches its time limit and the scheduler ends it."""
        self.end(ref, Cause(CauseKind.TIME_LIMIT, Provenance.SCHEDULER, "time limit reached"))

    def complete(self, ref: ObjectRef) -> None:
        """The application exits 0."""
        self.end(ref, Cause(CauseKind.NONE, Provenance.NONE, exit_code=0))

    def fail(self, ref: ObjectRef, code: int = 1) -> None:
        """The application exits with a non-zero ``code``."""
        if code == 0:
            msg = "fail needs a non-zero exit code; use complete for exit 0"
            raise Invalid(msg)
        self.end(ref, Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, exit_code=code))

    def signal(self, ref: ObjectRef, signo: int) -> None:
        """The application dies of signal ``signo`` (a segfault, say): exit code 128 + signo."""
        self.end(
            ref,
            Cause(
                CauseKind.NON_ZERO_EXIT,
                Provenance.APPLICATION,
                f"killed by signal {signo}",
                exit_code=128 + signo,
                signal=signo,
            ),
        )

    def launch_fail(self, ref: ObjectRef) -> None:
        """The launcher cannot start the processes. A pending object gets an execution that
        ends at once; a running one ends. (:meth:`remove_program` makes every execution of a
        spec naming one program fail like this as it begins.)"""
        with self._cluster.lock:
            obj = self._cluster.get(ref)
            if obj.state is ObjectState.PENDING:
                self._cluster.begin(obj)
            self.end(
                ref,
                Cause(CauseKind.LAUNCH_FAILED, Provenance.SCHEDULER, "the launcher failed"),
            )

    def remove_program(self, program: str) -> None:
        """The nodes have no ``program``: every execution of a spec whose command starts with
        it fails to launch as it begins (``launch-failed``, scheduler), as a real launcher's
        failed exec does. An application's own exit of 126 or 127 is :meth:`fail`'s: it stays
        ``non-zero-exit``."""
        with self._cluster.lock:
            self._cluster.faults.missing_programs.add(program)

    # ------------------------------------------------------------------ faults

    def lose_next_start_reply(self) -> None:
        """The next Start creates its object, yet raises OutcomeUnknown."""
        with self._cluster.lock:
            self._cluster.faults.lose_start_reply += 1

    def refuse_next_start(self, reason: str = "refused by the scheduler") -> None:
        """The next Start raises Rejected and creates nothing."""
        with self._cluster.lock:
            self._cluster.faults.refuse_start.append(reason)

    def drop_next_observation(self, job: JobID | None = None) -> None:
        """The next find (or find_many) covering ``job`` (any job when None) shows none of its
        objects, once: a stale or partial answer that still claims to be complete."""
        with self._cluster.lock:
            self._cluster.faults.drop_observation.append(job)

    def delay_next_object(self) -> None:
        """The next object Start creates shows up in find only from the second find on."""
        with self._cluster.lock:
            self._cluster.faults.delay_object += 1

    def set_reachable(self, reachable: bool) -> None:
        """While False, every SPI call raises Unreachable (a network partition)."""
        with self._cluster.lock:
            self._cluster.faults.reachable = reachable

    def set_authorized(self, authorized: bool) -> None:
        """While False, every SPI call raises Unauthorized (expired credentials)."""
        with self._cluster.lock:
            self._cluster.faults.authorized = authorized

    # ------------------------------------------------------------------ object settings

    def set_requeue_bit(self, ref: ObjectRef, value: bool = True) -> None:
        """Force the Slurm-shape requeue bit, as an operator or a crash between steps would.

        While set, a preemption or a lost node requeues the object even with no budget offered;
        ``restore_requeue_bit`` clears it.
        """
        with self._cluster.lock:
            self._cluster.force_bit(self._cluster.get(ref), value, by="env")

    def set_ceased(self, ref: ObjectRef, ceased: Tristate) -> None:
        """What the site's cessation signal says of a live object's processes."""
        with self._cluster.lock:
            obj = self._cluster.get(ref)
            obj.ceased = Tristate(ceased)
            self._cluster.touch(obj)

    def write_output(
        self, ref: ObjectRef, data: bytes | str, stream: str = "stdout", rank: int = 0
    ) -> None:
        """Append to the object's output, as its rank ``rank`` would print."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self._cluster.lock:
            obj = self._cluster.get(ref)
            obj.output.setdefault((stream, rank), bytearray()).extend(raw)
            self._cluster.touch(obj)
