"""Serving the dashboard: where it may listen, its token, and the uvicorn server.

Loopback is the default and needs nothing more. Bound to any other address the pages would be
open to the network, so it refuses to start without a token (``--token-file``), which every
request must then carry. Each check fails before anything listens, naming the option and the
value at fault.
"""

from __future__ import annotations

import ipaddress
import logging
import stat
import sys
from pathlib import Path

import uvicorn
from jobdispatch.errors import Invalid
from jobdispatch.listen import parse_listen

from jobdispatch_dashboard.app import make_app
from jobdispatch_dashboard.board import Board

__all__ = ["DEFAULT_LISTEN", "is_loopback", "read_token", "server"]

#: Where the dashboard listens unless told: loopback, on the port the issue gave it.
DEFAULT_LISTEN = "127.0.0.1:8765"
#: The loggers whose lines the server writes (each through the redacting filter).
LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "jobdispatch")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts; any other name does not:
    what it resolves to is not ours to trust)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: Path) -> str:
    """The token in ``path`` (its first line). Invalid, naming the file, when it is missing,
    empty, or readable by others than its owner (a token anyone may read protects nothing)."""
    where = f"--token-file {path}"
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Invalid(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Invalid(f"{where}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise Invalid(f"{where}: others than its owner may read it: chmod 600 {path}")
    token = text.splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise Invalid(f"{where}: holds no token of at least 16 characters on its first line")
    return token


def server(
    board: Board,
    listen: str = DEFAULT_LISTEN,
    *,
    token_file: Path | None = None,
    refresh_seconds: float = 2.0,
) -> uvicorn.Server:
    """A uvicorn server of ``board`` on ``listen``, checked (Invalid before anything
    listens); ``.run()`` serves until SIGINT or SIGTERM. It leaves logging alone: the command
    that runs it sends the log through the redactor first (:func:`log_through`), so building
    one, as the tests do, changes no process-wide logger."""
    host, port = parse_listen(listen, example=DEFAULT_LISTEN)
    token = read_token(token_file) if token_file is not None else None
    if token is None and not is_loopback(host):
        msg = (
            f"--listen {listen}: not a loopback address, so the dashboard would be open to "
            "the network: give --token-file with a token every request must carry"
        )
        raise Invalid(msg)
    if not refresh_seconds > 0:
        raise Invalid(f"--refresh {refresh_seconds}: give a number of seconds above 0")
    if token is not None:
        board.redactor.add(token)
    app = make_app(board, token=token, refresh_seconds=refresh_seconds)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=True, server_header=False
    )
    return uvicorn.Server(config)


def log_through(board: Board) -> None:
    """Every server and dashboard log line to standard error, secrets blanked: the process's
    loggers are changed for good, so only the command serving the dashboard calls it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(board.redactor.filter())
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        logger.setLevel(logging.INFO)
