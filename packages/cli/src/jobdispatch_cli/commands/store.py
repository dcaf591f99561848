"""``jobdispatch store``: what the administrator of a shared PostgreSQL store does, as the role
that owns its schema: create or migrate it, and give the role supervisors connect as only the
rights they need (spec 0013 D3). Everyone else's commands never migrate a schema they do not
own."""

from __future__ import annotations

from typing import Any

import click
from jobdispatch.errors import Unsupported
from rich.text import Text

from jobdispatch_cli.commands import pass_app
from jobdispatch_cli.context import App

__all__ = ["register"]


def _shared(app: App) -> Any:
    """The store, when it is a shared one with roles; Unsupported for an LMDB directory."""
    if app.shared_store() is None:
        raise Unsupported(
            f"the store {app.store_label} is an LMDB directory, which has no schema to migrate "
            "and no database roles; `jobdispatch store` acts on a PostgreSQL store"
        )
    return app.store()


def register(group: click.Group) -> None:
    @group.group()
    def store() -> None:
        """Administer a shared PostgreSQL store, as the role that owns its schema."""

    @store.command()
    @pass_app
    def migrate(app: App) -> None:
        """Create the store's schema, or migrate it to this version. Run it with the owner's
        credentials after installing a new version: other roles never migrate."""
        _shared(app)  # opening the store as its owner creates or migrates its schema
        app.console.print(Text(f"{app.store_label} is ready"))

    @store.command()
    @click.argument("roles", nargs=-1, required=True, metavar="ROLE...")
    @pass_app
    def grant(app: App, roles: tuple[str, ...]) -> None:
        """Give each database ROLE what supervisors and other commands need on the store, and
        nothing more: it can read, create jobs, append events and take leases, but cannot
        rewrite or delete a record nor alter the guards. Migrates the store first. The role
        must exist (CREATE ROLE ... LOGIN, by whoever administers the database)."""
        shared = _shared(app)
        for role in roles:
            shared.grant(role)
            app.console.print(Text(f"granted {role} a client's rights on {app.store_label}"))
