"""A rank that does what it is told: the program the local adapter's tests and conformance
driver run, so that a test can make a *running* execution fail, exit, die of a signal, run out
of memory or write output, exactly when it wants.

``python -m jobdispatch_local._puppet DIR`` reads ``DIR/<JOBDISPATCH_OBJECT>.cmd``, a file the
driver appends lines to, and acts on every new line addressed to its rank (``*`` for all)::

    * exit 3            exit with code 3
    0 signal 11         kill itself with signal 11
    * oom               allocate memory until the kernel kills it
    1 write stdout SGk= write the base64 bytes to stdout (or stderr)

It also writes ``DIR/<object>.<rank>.env`` (its environment, as JSON) when it starts, so tests
can check what a rank was given. Standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import time
from pathlib import Path

POLL = 0.02


def _act(words: list[str]) -> None:
    what = words[0]
    if what == "exit":
        sys.stdout.flush()
        os._exit(int(words[1]))
    elif what == "signal":
        sys.stdout.flush()
        os.kill(os.getpid(), int(words[1]))
        time.sleep(5)
    elif what == "oom":
        hog = []
        while True:
            hog.append(bytearray(16 << 20))  # bytearray zero-fills: the pages are touched
    elif what == "write":
        stream = sys.stderr if words[1] == "stderr" else sys.stdout
        stream.buffer.write(base64.b64decode(words[2]))
        stream.flush()


def main() -> int:
    folder = Path(sys.argv[1])
    name = os.environ.get("JOBDISPATCH_OBJECT", "unknown")
    rank = os.environ.get("RANK", "0")
    tmp = folder / f".{name}.{rank}.env.tmp"
    tmp.write_text(json.dumps(dict(os.environ)))
    tmp.rename(folder / f"{name}.{rank}.env")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    commands = folder / f"{name}.cmd"
    done = 0
    while True:
        try:
            lines = commands.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines[done:]:
            done += 1
            who, _, rest = line.partition(" ")
            if who in ("*", rank) and rest:
                _act(rest.split())
        time.sleep(POLL)


if __name__ == "__main__":
    sys.exit(main())
