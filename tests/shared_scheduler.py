"""One memory scheduler shared by supervisor processes, as two hosts would share a cluster.

The tests of several supervisor processes keep the memory adapter in the test process, where
they drive it (preempt, complete, look for overlapping executions), and serve it over a
multiprocessing manager. :func:`serve` starts that server; :data:`REMOTE_BACKEND` is the start
of each child's script: it connects to the server named by ``JD_SCHEDULER`` and defines
``Remote``, a backend whose every call is the served one's. The child's own lines (its store,
its supervisor) follow it.
"""

from __future__ import annotations

import contextlib
import textwrap
import threading
from multiprocessing.managers import BaseManager
from typing import cast

from jobdispatch.memory import MemoryBackend

__all__ = ["AUTHKEY", "REMOTE_BACKEND", "Served", "serve"]

AUTHKEY = b"jobdispatch-test"

REMOTE_BACKEND = textwrap.dedent(f"""
    import json, os, sys, time
    from datetime import timedelta
    from multiprocessing.managers import BaseManager
    from jobdispatch_supervise import Supervisor

    class M(BaseManager):
        pass

    M.register("backend")
    host, port = os.environ["JD_SCHEDULER"].split(":")
    m = M(address=(host, int(port)), authkey={AUTHKEY!r})
    m.connect()
    proxy = m.backend()

    class Remote:
        name = "memory"
        def capabilities(self, spec=None): return proxy.capabilities(spec)
        def rules(self, spec, policy): return proxy.rules(spec, policy)
        def start(self, request): return proxy.start(request)
        def open(self, ref, meta=None): return proxy.open(ref, meta)
        def find(self, job): return proxy.find(job)
        def inspect(self, ref): return proxy.inspect(ref)
        def stop(self, ref, reason): return proxy.stop(ref, reason)
        def hold(self, ref, meta): return proxy.hold(ref, meta)
        def release(self, ref, meta): return proxy.release(ref, meta)
        def requeue(self, ref, meta): return proxy.requeue(ref, meta)
        def restore_requeue_bit(self, ref, meta): return proxy.restore_requeue_bit(ref, meta)
        def close(self): pass
""")


class _Manager(BaseManager):
    pass


class Served:
    """A backend served from a daemon thread: where it listens, and how to stop it."""

    def __init__(self, backend: MemoryBackend, host: str) -> None:
        _Manager.register("backend", callable=lambda: backend)
        self._server = _Manager(address=(host, 0), authkey=AUTHKEY).get_server()
        self.host, self.port = cast(tuple[str, int], self._server.address)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        with contextlib.suppress(SystemExit):  # the server exits its thread when stopped
            self._server.serve_forever()

    def stop(self) -> None:
        self._server.stop_event.set()  # type: ignore[attr-defined]  # the manager's Server has one


def serve(backend: MemoryBackend, host: str) -> Served:
    """Serve ``backend`` on ``host`` (the port chosen by the system) until stopped."""
    return Served(backend, host)
