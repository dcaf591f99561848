"""The conformance driver for the local adapter: what a test can make this machine do.

Ranks run :mod:`jobdispatch_local._puppet`, so a test can end a *running* execution the way it
wants: preempt it through the runner (SIGTERM, then SIGKILL), shorten its time limit, have a
rank exit with a code, run it out of memory under a cgroup limit (where this machine has a
writable memory controller), or kill its runner as a lost node. Imports the conformance
package, so it needs the ``testing`` extra: ``pip install jobdispatch-local[testing]``.
"""

from __future__ import annotations

import base64

import attrs
from jobdispatch.spi import Backend, ObjectRef
from jobdispatch.types import Capability, JobSpec, Resources, Tristate
from jobdispatch_conformance.adapter.driver import CannotDrive, Driver

from jobdispatch_local.backend import LocalBackend
from jobdispatch_local.layout import ObjectDir, describe_launch
from jobdispatch_local.testing import Puppets

__all__ = ["LocalDriver"]


class LocalDriver(Driver):
    """Drives a :class:`~jobdispatch_local.LocalBackend` through its runner and puppet ranks."""

    def __init__(self, backend: Backend, puppets: Puppets) -> None:
        if not isinstance(backend, LocalBackend):
            raise CannotDrive("anything", f"{backend!r} is not a local backend")
        self.backend = backend
        self.puppets = puppets

    def base_spec(self) -> JobSpec:
        return JobSpec(command=self.puppets.command(), nodes=1)

    def unknown_ref(self) -> ObjectRef:
        return ObjectRef("jd-conformance-1-1")

    def created(self, ref: ObjectRef) -> str:
        """The launch the runner will read, from the object's record on disk."""
        obj = ObjectDir(self.backend.root / ref.id)
        return describe_launch(obj.read_object(), obj.path)

    def resource_spec(self) -> JobSpec:
        """Two nodes with GPUs where the site declared enough of them, and memory where a
        cgroup enforces it."""
        caps = self.backend.capabilities()
        gpus = len(self.backend.settings.gpus) // 2
        memory = caps[Capability.MEMORY_LIMIT].answer is Tristate.YES
        return attrs.evolve(
            self.base_spec(),
            nodes=2,
            procs_per_node=2,
            resources=Resources(gpus_per_node=gpus, memory_per_node_mib=64 if memory else None),
        )

    def missing_program(self) -> JobSpec:
        return self.spec_without_program()

    def preempt(self, ref: ObjectRef) -> None:
        self.backend.preempt(ref, wait=False)

    def lose_node(self, ref: ObjectRef) -> None:
        if not self.backend.kill_runner(ref):
            raise CannotDrive("lose_node", f"{ref} has no live runner to kill")

    def time_out(self, ref: ObjectRef) -> None:
        self.backend.set_time_limit(ref, 0.001)

    def oom(self, ref: ObjectRef) -> None:
        support = self.backend.memory_support()
        if str(support.answer) != "yes":
            raise CannotDrive("oom", support.detail)
        self.puppets.tell(ref, "oom")

    def fail(self, ref: ObjectRef, code: int) -> None:
        self.puppets.tell(ref, f"exit {code}")

    def complete(self, ref: ObjectRef) -> None:
        self.puppets.tell(ref, "exit 0")

    def launch_fail(self, ref: ObjectRef) -> None:
        raise CannotDrive(
            "launch_fail",
            "a running local object has launched already; a spec whose program cannot be "
            "started ends launch-failed (the local adapter's own tests show it)",
        )

    def lose_next_start_reply(self) -> None:
        self.backend.lose_next_start_reply()

    def set_requeue_bit(self, ref: ObjectRef) -> None:
        raise CannotDrive("set_requeue_bit", "the local scheduler has no requeue bit")

    def emit_output(
        self, ref: ObjectRef, data: bytes, stream: str = "stdout", rank: int = 0
    ) -> None:
        self.puppets.tell(ref, f"write {stream} {base64.b64encode(data).decode()}", rank)
