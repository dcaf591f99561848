"""What the ``jobdispatch`` command's exit status means, so scripts can branch on it.

=====  ==============================================================================
code   meaning
=====  ==============================================================================
0      done: the command did what was asked (``run``: the job succeeded)
1      the job did not succeed: ``run`` saw it fail or be cancelled
2      usage or input: a bad option, job file or configuration (the message names it), or
       a JOB word that names several jobs (the matches are listed)
3      not found: no such job, object, cluster, adapter or file
4      refused: unsupported by the cluster, rejected by the plan, or the store is read-only
5      unreachable or unavailable: the cluster or the store could not answer; try again
6      unauthorized: the cluster refused the credentials
7      conflict: the job's record kept moving under the command; try again
8      unreadable: a record or the store is damaged, or a newer version wrote it
130    interrupted (Ctrl-C); for ``run`` the job goes on, unsupervised
=====  ==============================================================================

Bad input never ends any other way: every mistake in a file, an option or a path is told with
one of these codes and a message naming it (see the documentation's errors reference).
"""

from __future__ import annotations

from jobdispatch.errors import (
    AlreadyRegistered,
    Conflict,
    DispatchError,
    Invalid,
    NotFound,
    OutcomeUnknown,
    ReadOnly,
    Rejected,
    Unauthorized,
    Unavailable,
    Unreachable,
    Unreadable,
    Unsupported,
)

__all__ = [
    "CONFLICT",
    "INTERRUPTED",
    "JOB_FAILED",
    "NOT_FOUND",
    "OK",
    "REFUSED",
    "UNAUTHORIZED",
    "UNREACHABLE",
    "UNREADABLE",
    "USAGE",
    "code_for",
]

OK = 0
JOB_FAILED = 1
USAGE = 2
NOT_FOUND = 3
REFUSED = 4
UNREACHABLE = 5
UNAUTHORIZED = 6
CONFLICT = 7
UNREADABLE = 8
INTERRUPTED = 130

_BY_TYPE: tuple[tuple[type[DispatchError], int], ...] = (
    (NotFound, NOT_FOUND),
    (Unreadable, UNREADABLE),  # an Invalid, but about stored data, not the command's input
    (Invalid, USAGE),
    (Unsupported, REFUSED),
    (Rejected, REFUSED),
    (ReadOnly, REFUSED),
    (AlreadyRegistered, REFUSED),
    (Unreachable, UNREACHABLE),
    (Unavailable, UNREACHABLE),
    (OutcomeUnknown, UNREACHABLE),
    (Unauthorized, UNAUTHORIZED),
    (Conflict, CONFLICT),
)


def code_for(exc: DispatchError) -> int:
    """The exit status for an error the command reports."""
    for kind, code in _BY_TYPE:
        if isinstance(exc, kind):
            return code
    return USAGE
