"""Durations as people write them in job files and on the command line: ``90s``, ``10m``,
``1h30m``, ``2d``, or a bare number of seconds.

Every duration is bounded by the core's :data:`~jobdispatch.validate.MAX_DURATION`, so a typo
such as ``99999999999d`` (past what a ``timedelta`` holds) or ``inf`` is told as a bad value
here rather than overflowing later, and ``--lease-ttl`` or ``hold --for`` get the same bound as
a job file's ``time_limit``.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from jobdispatch.validate import MAX_DURATION

__all__ = ["format_duration", "parse_duration"]

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([dhms])")
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def _bounded(seconds: float, value: object) -> timedelta:
    """``seconds`` as a timedelta, refusing NaN, infinities and anything past MAX_DURATION."""
    if math.isnan(seconds):
        raise ValueError(f"not a duration: {value!r} (use 90s, 10m, 1h30m or 2d)")
    if abs(seconds) > MAX_DURATION.total_seconds():
        raise ValueError(
            f"duration {value!r} is too long: at most {MAX_DURATION.days}d (100 years)"
        )
    return timedelta(seconds=seconds)


def parse_duration(value: object) -> timedelta:
    """A duration of at most MAX_DURATION; ValueError naming the accepted forms otherwise.
    (Zero and negative values are read; whoever uses one says whether it may be.)"""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r} (use 90s, 10m, 1h30m or 2d)")
    if isinstance(value, int | float):
        try:
            return _bounded(float(value), value)
        except OverflowError:  # an int too large for a float
            return _bounded(math.inf, value)
    if not isinstance(value, str):
        raise ValueError(f"not a duration: {value!r} (use 90s, 10m, 1h30m or 2d)")
    text = value.strip().lower().replace(" ", "")
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return _bounded(seconds, value)
    pos, total, seen = 0, 0.0, ""
    for m in _PART.finditer(text):
        if (
            m.start() != pos
            or m[2] in seen
            or (seen and "dhms".index(m[2]) < "dhms".index(seen[-1]))
        ):
            break
        total += float(m[1]) * _UNITS[m[2]]
        seen += m[2]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"not a duration: {value!r} (use 90s, 10m, 1h30m or 2d)")
    return _bounded(total, value)


def format_duration(value: timedelta | float) -> str:
    """``1h30m``, ``45s``, ``2.5s``: the shortest form :func:`parse_duration` reads back."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole == 0:
        return "0s"
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, whole = divmod(whole, size)
        if n:
            out += f"{n}{unit}"
    return out
