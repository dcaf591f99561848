"""Checking, before a job is accepted, that a store can keep checkpoints isolated.

Isolation rests on three behaviours a store could lack without saying so: a create-only write
that really refuses an existing key (S3's ``If-None-Match: *``; ``link`` on POSIX), requests
signed with a wrong secret being refused (a store that ignores signatures would accept anyone's
writes), and listings that honour prefix, delimiter and continuation (resolve and prune page
through them). The probe exercises each under a scratch prefix it removes afterwards, and any
store that fails one is refused. It never trusts an answer it can check: after the second
create-only write it reads the key back, so a store that overwrote silently *and* reported
success is caught as well as one that overwrote and said so.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from jobdispatch.errors import DispatchError, Unauthorized

from jobdispatch_publish.store import Exists, Store

__all__ = ["Check", "probe"]


@attrs.frozen
class Check:
    name: str
    ok: bool | None  # None: not applicable to this store
    detail: str


def _list(store: Store, prefix: str) -> list[str]:
    # A tiny page size, where the store has one, so continuation is exercised too.
    lister: Any = store.keys
    try:
        return list(lister(prefix, page=2))
    except TypeError:
        return list(store.keys(prefix))


def _children(store: Store, prefix: str) -> Iterator[str]:
    lister: Any = store.children
    try:
        return iter(list(lister(prefix, page=2)))
    except TypeError:
        return store.children(prefix)


def _create_only(store: Store, base: str) -> Check:
    key = base + "create-only"
    store.create(key, b"first")
    try:
        store.create(key, b"second")
    except Exists:
        held = store.read(key)
        if held != b"first":
            return Check("create-only write", False, f"refused the second write but holds {held!r}")
        return Check("create-only write", True, "a second write to the same key was refused")
    held = store.read(key)
    if held == b"first":
        return Check(
            "create-only write",
            False,
            "a second create-only write was acknowledged though the key existed "
            "(If-None-Match ignored?)",
        )
    return Check(
        "create-only write",
        False,
        "the store silently overwrote an existing key (If-None-Match ignored)",
    )


def _listing(store: Store, base: str) -> Check:
    folder = base + "list/"
    expected = []
    for i in range(5):
        for name in ("a", "b"):
            key = f"{folder}d{i}/{name}"
            store.write(key, b"x")
            expected.append(key)
    store.write(folder + "top", b"x")
    expected.append(folder + "top")
    keys = _list(store, folder)
    if keys != sorted(expected):
        return Check(
            "listing", False, f"listed {len(keys)} keys, expected {len(expected)} in order"
        )
    limited = list(store.keys(folder, limit=3))
    if limited != sorted(expected)[:3]:
        return Check("listing", False, "a limited listing did not return the first keys in order")
    children = list(_children(store, folder))
    if children != [f"{folder}d{i}/" for i in range(5)]:
        return Check("listing", False, f"listed folders {children}, expected d0/ to d4/")
    other = list(store.keys(folder + "d3/"))
    if other != [f"{folder}d3/a", f"{folder}d3/b"]:
        return Check("listing", False, "a prefix listing returned keys outside the prefix")
    return Check("listing", True, "prefix, delimiter, order and continuation are honoured")


def _signatures(wrong: Callable[[], Store] | None, base: str) -> Check:
    if wrong is None:
        return Check("signatures", None, "not applicable (no request signing on this store)")
    try:
        held = wrong().read(base + "create-only")
    except Unauthorized as exc:
        return Check(
            "signatures", True, f"a request signed with a wrong secret was refused ({exc.message})"
        )
    return Check(
        "signatures",
        False,
        f"a request signed with a wrong secret was accepted (read {'data' if held else 'nothing'})",
    )


def probe(store: Store, *, signed_wrongly: Callable[[], Store] | None = None) -> list[Check]:
    """Run every check under a scratch prefix of the root; the checks, in order."""
    base = f".jobdispatch-probe/{secrets.token_hex(6)}/"
    checks: list[Check] = []
    try:
        runs: list[Callable[[], Check]] = [
            lambda: _create_only(store, base),
            lambda: _listing(store, base),
            lambda: _signatures(signed_wrongly, base),
        ]
        for run in runs:
            try:
                checks.append(run())
            except DispatchError as exc:
                if isinstance(exc, Unauthorized):
                    raise
                checks.append(Check("error", False, str(exc)))
    finally:
        store.delete(list(store.keys(base)))
    return checks
