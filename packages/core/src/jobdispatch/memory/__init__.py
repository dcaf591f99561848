"""The memory adapter: an in-process scheduler in two shapes, Slurm-like and Kubeflow-like.

It implements the whole adapter SPI and every optional protocol, deterministically given its
seed and injected clock, and comes with an environment handle (``backend.env``) that plays the
cluster's part: run, preempt, lose a node, OOM, time out, complete, fail, lose a Start reply.
The tutorial, the conformance suite's self-test and the simulator all run on it.

    >>> from jobdispatch.memory import MemoryBackend, Shape
    >>> backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    >>> backend.name
    'memory'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobdispatch._lazy import lazy

if TYPE_CHECKING:
    from jobdispatch.memory import history
    from jobdispatch.memory.backend import MemoryBackend
    from jobdispatch.memory.config import CONFIG_SCHEMA
    from jobdispatch.memory.env import MemoryEnv
    from jobdispatch.memory.history import History
    from jobdispatch.memory.shape import Shape

__all__ = ["CONFIG_SCHEMA", "History", "MemoryBackend", "MemoryEnv", "Shape", "history"]

__getattr__, __dir__ = lazy(__name__, __file__)
