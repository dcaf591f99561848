"""How the store reaches its database: the settings, their JSON Schema, and the password.

Settings are either a DSN (``postgresql://user@host:port/dbname?sslmode=...``) or the same
fields one by one; the fields given beside a DSN override its parts. A password is never part
of the settings: a DSN carrying one is refused, and the password comes from a file
(``password_file``) or an environment variable (``password_env``), read each time a connection
is opened (so a rotated password is picked up by the next connection, and none sits in a
long-lived object). Nothing here puts the password into a repr, a log line or an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.config import validate_config
from jobdispatch.errors import Invalid

__all__ = ["CONFIG_SCHEMA", "DEFAULT_SCHEMA", "Settings"]

#: The PostgreSQL schema (namespace) the store's tables live in unless told otherwise.
DEFAULT_SCHEMA = "jobdispatch"
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: The configuration the ``postgresql`` record store accepts (the CLI's ``[store]`` table).
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "dsn": {
            "type": "string",
            "pattern": "^postgres(ql)?://",
            "description": "postgresql://user@host:port/dbname?sslmode=...; no password in it",
        },
        "host": {"type": "string", "minLength": 1, "description": "server host name or address"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "dbname": {"type": "string", "minLength": 1},
        "user": {"type": "string", "minLength": 1},
        "password_file": {
            "type": "string",
            "minLength": 1,
            "description": "a file holding the password (first line), read at each connection",
        },
        "password_env": {
            "type": "string",
            "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
            "description": "an environment variable holding the password, read at each connection",
        },
        "sslmode": {
            "enum": ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"],
            "description": "libpq's sslmode; verify-full checks the server's name and CA",
        },
        "sslrootcert": {"type": "string", "minLength": 1, "description": "the CA certificate"},
        "sslcert": {"type": "string", "minLength": 1, "description": "a client certificate"},
        "sslkey": {"type": "string", "minLength": 1, "description": "the client key"},
        "schema": {
            "type": "string",
            "pattern": _NAME.pattern,
            "description": f"the schema the tables live in (default {DEFAULT_SCHEMA})",
        },
        "pool_size": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100,
            "description": "most connections this process keeps open (default 4)",
        },
        "connect_timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 3600,
            "description": "seconds to wait for a connection before Unavailable (default 10)",
        },
        "stalled_transaction_timeout": {
            "type": "number",
            "minimum": 0.1,
            "maximum": 3600,
            "description": "seconds after which the server ends a session of this store that "
            "went silent inside a transaction, so its row locks do not outlive a client cut "
            "off from the network (default 10)",
        },
        "call_timeout": {
            "type": "number",
            "minimum": 1,
            "maximum": 3600,
            "description": "seconds a call may wait for the database's answer before its "
            "connection is given up as cut off, and the call fails as unavailable (default 30)",
        },
    },
    "not": {"required": ["password_file", "password_env"]},
}

#: libpq keywords a DSN may carry besides those above. Anything else (a password, options
#: that change what a session does) is refused rather than passed to libpq unchecked.
_DSN_PARAMS = frozenset(
    {"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}
)


@attrs.frozen(repr=False)
class Settings:
    """Where the database is and how to log in, validated; the password is only named."""

    conninfo: dict[str, str]
    password_file: Path | None = None
    password_env: str | None = None
    schema: str = DEFAULT_SCHEMA
    pool_size: int = 4
    connect_timeout: float = 10.0
    stalled_transaction_timeout: float = 10.0
    call_timeout: float = 30.0
    #: Sessions that may not write (``default_transaction_read_only``): the database itself
    #: refuses any write, for a reader such as the metrics endpoint. Not a setting of the
    #: configuration file: the reader that wants it asks for it.
    read_only: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """Check ``config`` against :data:`CONFIG_SCHEMA` (ValidationError naming the key) and
        against what a schema cannot say (a DSN with a password in it, no host at all)."""
        validate_config(dict(config), CONFIG_SCHEMA, subject="record store postgresql")
        conninfo: dict[str, str] = {}
        if "dsn" in config:
            conninfo.update(_parse_dsn(config["dsn"]))
        for key in (
            "host",
            "port",
            "dbname",
            "user",
            "sslmode",
            "sslrootcert",
            "sslcert",
            "sslkey",
        ):
            if key in config:
                conninfo[key] = str(config[key])
        if "host" not in conninfo:
            msg = "record store postgresql: no host (give dsn, or host)"
            raise Invalid(msg)
        conninfo.setdefault("application_name", "jobdispatch")
        password_file = config.get("password_file")
        return cls(
            conninfo=conninfo,
            password_file=Path(password_file).expanduser() if password_file else None,
            password_env=config.get("password_env"),
            schema=config.get("schema", DEFAULT_SCHEMA),
            pool_size=config.get("pool_size", 4),
            connect_timeout=float(config.get("connect_timeout", 10.0)),
            stalled_transaction_timeout=float(config.get("stalled_transaction_timeout", 10.0)),
            call_timeout=float(config.get("call_timeout", 30.0)),
        )

    def password(self) -> str | None:
        """The password, read now from its file or variable; None when none is configured.
        Invalid (naming the file or variable, never its content) when it cannot be read: a
        configuration to fix, not a database to wait for."""
        if self.password_file is not None:
            try:
                text = self.password_file.read_text(encoding="utf-8")
            except OSError as exc:
                msg = f"cannot read the database password file {self.password_file}: {exc.strerror}"
                raise Invalid(msg) from None
            lines = text.splitlines()
            if not lines or not lines[0]:
                msg = f"the database password file {self.password_file} is empty"
                raise Invalid(msg)
            return lines[0]
        if self.password_env is not None:
            value = os.environ.get(self.password_env)
            if not value:
                msg = f"the database password variable ${self.password_env} is not set"
                raise Invalid(msg)
            return value
        return None

    def connect_kwargs(self) -> dict[str, Any]:
        """What a new connection is opened with (the password read now).

        The session asks the server to end it once it has sat idle inside a transaction for
        ``stalled_transaction_timeout`` (``idle_in_transaction_session_timeout``): a client
        cut off from the network in the middle of a write still holds the row locks of its
        jobs on the server, whose TCP connection stays open (a partition sends no reset), and
        without this every other supervisor's next write of those jobs would wait on them
        for as long as the partition lasts, long after the lease expired."""
        kwargs: dict[str, Any] = dict(self.conninfo)
        kwargs["connect_timeout"] = max(1, round(self.connect_timeout))
        stalled_ms = max(1, round(self.stalled_transaction_timeout * 1000))
        kwargs["options"] = f"-c idle_in_transaction_session_timeout={stalled_ms}"
        if self.read_only:
            kwargs["options"] += " -c default_transaction_read_only=on"
        password = self.password()
        if password is not None:
            kwargs["password"] = password
        return kwargs

    def where(self) -> str:
        """The database named for messages: user@host:port/dbname, schema; no secret."""
        c = self.conninfo
        user = f"{c['user']}@" if "user" in c else ""
        port = f":{c['port']}" if "port" in c else ""
        return f"postgresql://{user}{c['host']}{port}/{c.get('dbname', '')} (schema {self.schema})"

    def __repr__(self) -> str:
        secret = (
            f"password_file={str(self.password_file)!r}"
            if self.password_file
            else f"password_env={self.password_env!r}"
            if self.password_env
            else "no password"
        )
        return f"Settings({self.where()!r}, {secret})"


def _parse_dsn(dsn: str) -> dict[str, str]:
    """The parts of a ``postgresql://`` DSN; Invalid for one with a password or a parameter
    this store does not allow (the message shows the DSN with any password masked)."""
    from psycopg.conninfo import conninfo_to_dict

    shown = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    try:
        parts = conninfo_to_dict(dsn)
    except Exception as exc:  # psycopg.ProgrammingError: a DSN libpq cannot parse
        msg = f"record store postgresql: dsn {shown!r} does not parse"
        raise Invalid(msg) from exc
    if "password" in parts:
        msg = (
            f"record store postgresql: dsn {shown!r} carries a password; give password_file "
            "or password_env instead, so that it is never part of a configuration"
        )
        raise Invalid(msg)
    out: dict[str, str] = {}
    for key, value in parts.items():
        if key in ("host", "port", "dbname", "user") or key in _DSN_PARAMS:
            out[key] = str(value)
        else:
            msg = f"record store postgresql: dsn {shown!r}: parameter {key!r} is not allowed"
            raise Invalid(msg)
    # What the configuration's own keys are held to (CONFIG_SCHEMA), held here too: libpq
    # would only refuse these when connecting, where they read as a database that is away.
    for port in out.get("port", "").split(",") if "port" in out else ():
        if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            msg = f"record store postgresql: dsn {shown!r}: port {port!r} is not 1 to 65535"
            raise Invalid(msg)
    sslmodes = CONFIG_SCHEMA["properties"]["sslmode"]["enum"]
    if "sslmode" in out and out["sslmode"] not in sslmodes:
        msg = (
            f"record store postgresql: dsn {shown!r}: sslmode {out['sslmode']!r} is not one "
            f"of {', '.join(sslmodes)}"
        )
        raise Invalid(msg)
    return out
