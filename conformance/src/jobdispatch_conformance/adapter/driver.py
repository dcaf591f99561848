"""The environment driver: what the harness can do *to* the scheduler, beside the SPI.

The SPI is what a host may do; a conformance check also needs the cluster to do things (preempt
an execution, lose a node, let a time limit pass). Which of those a harness can cause differs:
the memory adapter can do all of them at once, a test Slurm cluster some of them slowly, a
production cluster almost none. So every operation is optional. The default raises
:class:`CannotDrive`, and a check whose scenario needs an operation the driver cannot do is
skipped with that reason: never passed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
from jobdispatch.spi import Backend, ObjectRef
from jobdispatch.types import JobSpec

__all__ = ["MISSING_PROGRAM", "OPERATIONS", "CannotDrive", "Driver", "Timeouts"]

#: A program no cluster has, for the check that a program which cannot start is launch-failed.
MISSING_PROGRAM = "/nonexistent/jobdispatch-conformance/no-such-program"


class CannotDrive(Exception):
    """The driver cannot make the scheduler do this; the check that needed it is skipped."""

    def __init__(self, operation: str, why: str = "") -> None:
        self.operation = operation
        self.why = why or "the driver does not implement it"
        super().__init__(f"cannot drive {operation}: {self.why}")


@attrs.frozen
class Timeouts:
    """How long the harness waits, from a fixture: milliseconds for memory, minutes for Slurm.

    Every wait is a poll: ``settle`` bounds a wait for something to happen, ``poll`` is the
    interval between looks, and ``quiet`` is how long the harness keeps looking to be sure that
    something does *not* happen (a gated object starting to run).
    """

    settle: float = 300.0
    poll: float = 2.0
    quiet: float = 10.0


class Driver:
    """The operations a harness may have the scheduler perform. Subclass and override the ones
    the cluster at hand can do; leave the rest, and their checks are skipped.

    Each ending operation (``preempt``, ``lose_node``, ``time_out``, ``oom``, ``fail``,
    ``complete``, ``launch_fail``) acts on a running object and must end its running execution
    the way the scheduler would. None of them may act on another object.
    """

    def now(self) -> datetime:
        """The backend's idea of now, for deadlines (the memory backend's injected clock)."""
        return datetime.now(UTC)

    def base_spec(self) -> JobSpec:
        """The spec every check starts from: something that runs until it is ended."""
        return JobSpec(command=("sleep", "3600"), nodes=1)

    def ending_spec(self, operation: str) -> JobSpec:
        """The spec the object that ``operation`` (an ending) is driven on starts from: the
        base spec, or one that carries what the cluster needs at submission to cause that
        ending by itself (a short time limit it enforces; a GPU a preemptor can displace)."""
        return self.base_spec()

    def unknown_ref(self) -> ObjectRef:
        """A ref the backend never issued, in its format."""
        return ObjectRef("jd-conformance-no-such-object")

    def missing_program(self) -> JobSpec:
        """A spec whose program the cluster's nodes do not have. For a real cluster
        :meth:`spec_without_program` is enough; a model (the memory adapter) must also be told
        that the program is missing, which is why the default cannot assume it."""
        raise CannotDrive("missing_program")

    def spec_without_program(self) -> JobSpec:
        """The base spec with its command replaced by :data:`MISSING_PROGRAM` (what a real
        cluster's driver returns from :meth:`missing_program`)."""
        return attrs.evolve(self.base_spec(), command=(MISSING_PROGRAM, "--flag"))

    def run(self, ref: ObjectRef) -> None:
        """Give a pending object its chance to run. A scheduler that starts pending objects by
        itself needs nothing: the default does nothing. It must never make a gated or held
        object run."""

    # endings of the running execution

    def preempt(self, ref: ObjectRef) -> None:
        raise CannotDrive("preempt")

    def lose_node(self, ref: ObjectRef) -> None:
        raise CannotDrive("lose_node")

    def time_out(self, ref: ObjectRef) -> None:
        raise CannotDrive("time_out")

    def oom(self, ref: ObjectRef) -> None:
        raise CannotDrive("oom")

    def fail(self, ref: ObjectRef, code: int) -> None:
        raise CannotDrive("fail")

    def complete(self, ref: ObjectRef) -> None:
        raise CannotDrive("complete")

    def launch_fail(self, ref: ObjectRef) -> None:
        raise CannotDrive("launch_fail")

    # faults and settings

    def lose_next_start_reply(self) -> None:
        """Make the next Start create its object yet raise OutcomeUnknown."""
        raise CannotDrive("lose_next_start_reply")

    def set_requeue_bit(self, ref: ObjectRef) -> None:
        """Leave the object's requeue bit set, as an operator or a crash would."""
        raise CannotDrive("set_requeue_bit")

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        """Have the running object's rank ``rank`` write ``data`` to ``stream``."""
        raise CannotDrive("emit_output")

    def created(self, ref: ObjectRef) -> str:
        """What the scheduler holds of the object ``start`` created, read back from the
        scheduler itself (Slurm's stored batch script, the local runner's command lines), in
        the form the adapter's ``preview`` prints: the dry run is checked against it."""
        raise CannotDrive("created")

    def resource_spec(self) -> JobSpec:
        """A spec asking for resources this cluster has (GPUs, memory, a queue where it has
        them), for the dry-run check; by default the base spec."""
        return self.base_spec()

    def unreachable_backend(self) -> Backend:
        """A backend of this adapter that cannot reach its cluster."""
        raise CannotDrive("unreachable_backend")

    def unauthorized_backend(self) -> Backend:
        """A backend of this adapter whose credentials the cluster refuses."""
        raise CannotDrive("unauthorized_backend")

    def can(self, operation: str) -> bool:
        """Whether this driver overrides ``operation`` (it may still raise CannotDrive)."""
        return getattr(type(self), operation) is not getattr(Driver, operation)


#: Every optional operation, for the summary of what a driver can do.
OPERATIONS: tuple[str, ...] = (
    "preempt",
    "lose_node",
    "time_out",
    "oom",
    "fail",
    "complete",
    "launch_fail",
    "missing_program",
    "lose_next_start_reply",
    "set_requeue_bit",
    "emit_output",
    "created",
    "unreachable_backend",
    "unauthorized_backend",
)
