"""Memory sizes as people write them, read the same way in a job file and in a configuration.

``64G``, ``64Gi``, ``64GB``, ``64GiB`` and ``64g`` all mean 64 GiB: every unit is binary
(K = 1024), as Slurm reads ``--mem=64G`` and as the kernel reads a cgroup's ``memory.max``.
Kubernetes users write ``64Gi``, which is accepted and means the same. Kubernetes alone reads
``64G`` as 10^9 bytes; here it is 64 GiB, so a job file means one amount on every cluster.
A bare number (``480`` or ``"480"``) is MiB, as Slurm reads ``--mem=480``. Fractions are
allowed (``1.5T``) and rounded up, never down, so a job is never given less than it asked for.
"""

from __future__ import annotations

import math
import re

__all__ = ["MIB", "SIZE_FORMS", "SIZE_PATTERN", "parse_bytes", "parse_mib"]

MIB = 1 << 20
#: A size as text; the JSON Schemas of the job file and of configurations use it as written.
SIZE_PATTERN = r"^\s*([0-9]+)(?:\.([0-9]+))?\s*(?:([KkMmGgTt])[Ii]?[Bb]?)?\s*$"
#: What to tell someone whose size was not one.
SIZE_FORMS = "use a number with K, M, G or T, all binary (64G, 64Gi, 64GB), or a number of MiB"

_SIZE = re.compile(SIZE_PATTERN)
_UNIT = {"": MIB, "k": 1 << 10, "m": MIB, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(value: object) -> int:
    """Bytes from a size (``64G``, ``1.5Ti``, ``512MiB``) or a whole number of MiB, rounded up.

    Raises:
        ValueError: naming the value and the forms accepted.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        msg = f"must be a size such as 512M or 64G, or a whole number of MiB; got {value!r}"
        raise ValueError(msg)
    if isinstance(value, int):
        return value * MIB
    m = _SIZE.match(value)
    if m is None:
        msg = f"not a size: {value!r} ({SIZE_FORMS})"
        raise ValueError(msg)
    whole: str = m[1]
    fraction: str = m[2] or ""
    unit: str = (m[3] or "").lower()
    # In whole numbers: 1.1G as a float would come out a byte more than it says.
    scaled = int(whole + fraction) * _UNIT[unit]
    denominator: int = 10 ** len(fraction)
    return -(-scaled // denominator)


def parse_mib(value: object) -> int:
    """MiB from a size or a whole number of MiB, rounded up (``1K`` is 1 MiB)."""
    return math.ceil(parse_bytes(value) / MIB)
