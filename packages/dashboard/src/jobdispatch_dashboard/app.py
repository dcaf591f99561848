"""The web application: three pages, their live parts, and the guards in front of them.

Each page is a template whose live part (``<div id="live">``) is also served alone when the
request carries ``X-Dashboard-Part: live``: the page's own script asks for it every few seconds
and swaps it in, so a page follows its jobs without reloading and without any script but ours.

In front of every route: only GET and HEAD (the dashboard reads; nothing it serves changes
anything, and every other method is refused with 405 before routing), the bearer token when
one is set, and headers that keep pages out of caches and frames and scripts to our own.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from jobdispatch.errors import DispatchError, NotFound
from jobdispatch.types import CauseKind, JobID, State
from jobdispatch_cli.render import age, when
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from jobdispatch_dashboard.board import Board
from jobdispatch_dashboard.rows import Query, select

__all__ = ["LIVE_HEADER", "READ_METHODS", "make_app"]

#: The request header that asks for a page's live part alone.
LIVE_HEADER = "X-Dashboard-Part"
#: The only methods served.
READ_METHODS = frozenset({"GET", "HEAD"})
#: The most jobs the list shows at once (the filter narrows it; the count says how many match).
PAGE_ROWS = 500

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # Our script and stylesheet only; the timeline's SVG carries style attributes.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
}


def make_app(board: Board, *, token: str | None = None, refresh_seconds: float = 2.0) -> Starlette:
    """The dashboard of ``board``: pages answered only to GET and HEAD, and only with
    ``token`` when one is given. ``refresh_seconds``: how often a page refreshes its live
    part."""
    redactor = board.redactor
    env = Environment(
        loader=PackageLoader("jobdispatch_dashboard", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=redactor,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        age=age,
        when=when,
        states=[str(s) for s in State],
        causes=[str(c) for c in CauseKind],
        clusters=list(board.sources),
        refresh_ms=int(refresh_seconds * 1000),
    )

    def page(request: Request, name: str, code: int = 200, **context: Any) -> Response:
        live = request.headers.get(LIVE_HEADER) == "live"
        template = env.get_template(f"_{name}.html" if live else f"{name}.html")
        context.update(now=datetime.now(UTC), path=request.url.path)
        return HTMLResponse(template.render(**context), status_code=code)

    def jobs(request: Request) -> Response:
        params = request.query_params
        query = Query(
            state=params.get("state", ""),
            cause=params.get("cause", ""),
            cluster=params.get("cluster", ""),
            search=params.get("q", "").strip(),
        )
        board.refresh()
        rows = select(board.rows(), query)
        return page(
            request,
            "jobs",
            query=query,
            rows=rows[:PAGE_ROWS],
            matched=len(rows),
            problems=dict(board.problems),
            unreadable=board.unreadable(),
        )

    def job(request: Request) -> Response:
        cluster = request.path_params["cluster"]
        job_id = JobID(request.path_params["job"])
        board.refresh()
        try:
            shown = board.job(cluster, job_id)
        except NotFound as exc:
            return page(request, "missing", 404, problem=str(exc))
        except DispatchError as exc:
            return page(request, "missing", 503, problem=str(exc))
        return page(request, "job", job=shown, status=shown.status)

    def clusters(request: Request) -> Response:
        board.refresh()
        return page(request, "clusters", rows=board.clusters())

    static = StaticFiles(directory=str(files("jobdispatch_dashboard") / "static"))
    app = Starlette(
        routes=[
            Route("/", jobs, name="jobs", methods=["GET"]),
            Route("/jobs/{cluster}/{job}", job, name="job", methods=["GET"]),
            Route("/clusters", clusters, name="clusters", methods=["GET"]),
            Mount("/static", static, name="static"),
        ]
    )
    app.add_middleware(_Guard, token=token)
    return app


class _Guard:
    """Refuses every method but GET and HEAD, then every request without ``token`` (when
    one is set), and adds :data:`_HEADERS` to every answer."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal: Response | None = None
        if request.method not in READ_METHODS:
            refusal = PlainTextResponse(
                "the dashboard is read-only: only GET and HEAD are served\n",
                status_code=405,
                headers={"Allow": "GET, HEAD"},
            )
        elif self.token is not None and not self._authorized(request):
            refusal = PlainTextResponse(
                "this dashboard needs its token: Authorization: Bearer TOKEN\n",
                status_code=401,
                headers={
                    "WWW-Authenticate": 'Basic realm="jobdispatch dashboard", charset="UTF-8"'
                },
            )

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        sender: Callable[[Any], Awaitable[None]] = send_with_headers
        if refusal is not None:
            await refusal(scope, receive, sender)
        else:
            await self.app(scope, receive, sender)

    def _authorized(self, request: Request) -> bool:
        """The token as a bearer token, or as the password of HTTP Basic (what a browser's
        login prompt sends; the user name is not checked)."""
        assert self.token is not None
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = b""
        if scheme.lower() == "bearer":
            given = value.strip().encode()
        elif scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip(), validate=True).partition(b":")[2]
            except (binascii.Error, ValueError):
                return False
        return bool(given) and hmac.compare_digest(given, self.token)
