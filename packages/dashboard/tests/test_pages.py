"""The pages over a scripted run, through Starlette's TestClient: what each shows, the
filters, the live parts, and the guards (read-only, the token, no secret)."""

from __future__ import annotations

import base64
import logging
import re

import attrs
import pytest
from dashboard_fleet import SECRET, URL_PASSWORD, Fleet
from jobdispatch.errors import Unavailable
from jobdispatch_dashboard import Board, Redactor, make_app
from jobdispatch_dashboard.app import LIVE_HEADER
from jobdispatch_dashboard.serve import LOGGERS, log_through
from jobdispatch_records_lmdb import LmdbRecords
from starlette.testclient import TestClient


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', html)


def test_the_list_shows_every_job_with_its_state_and_cause(
    client: TestClient, fleet: Fleet
) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert set(_rows(page.text)) == {fleet.recovered, fleet.quick, fleet.doomed}
    doomed = re.search(rf'<tr data-job="{fleet.doomed}".*?</tr>', page.text, re.S)
    assert doomed is not None
    assert "failed" in doomed.group(0) and "preempted" in doomed.group(0)
    assert "3 jobs" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert "script-src 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("state=succeeded", {"recovered", "quick"}),
        ("state=failed", {"doomed"}),
        ("state=running", set()),
        ("cluster=lab", {"recovered", "quick", "doomed"}),
        ("cluster=elsewhere", set()),
        ("q=quick", {"quick"}),
        ("cause=preempted", {"doomed"}),
        ("cause=preempted&state=succeeded", set()),
    ],
)
def test_the_filters_narrow_the_list(
    client: TestClient, fleet: Fleet, query: str, expect: set[str]
) -> None:
    names = {fleet.recovered: "recovered", fleet.quick: "quick", fleet.doomed: "doomed"}
    shown = {names[j] for j in _rows(client.get(f"/?{query}").text)}
    assert shown == expect


def test_search_takes_an_id_prefix_as_the_command_line_does(
    client: TestClient, fleet: Fleet
) -> None:
    assert _rows(client.get(f"/?q={fleet.recovered[:5]}").text) == [fleet.recovered]


def test_the_job_page_shows_plan_runs_causes_budgets_timeline_goodput_and_output(
    client: TestClient, fleet: Fleet
) -> None:
    page = client.get(f"/jobs/lab/{fleet.recovered}")
    assert page.status_code == 200
    text = page.text
    # Submission 1's execution preempted (scheduler), submission 2 by rule 0.
    assert re.search(r'data-submission="1" data-cause="preempted"', text)
    assert "rule 0" in text
    # The plan: rule 0 resubmits on preempted, enforced by the supervisor; one of 2 spent.
    plan = re.search(r'<tr data-rule="0">(.*?)</tr>', text, re.S)
    assert plan is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", plan.group(1))
    assert cells[:7] == ["0", "preempted", "resubmit", "supervisor", "2", "1", "1"]
    assert "<svg" in text  # the CLI's timeline picture
    assert 'id="goodput"' in text
    assert "<h3>rank 0</h3>" in text


def test_an_unknown_job_or_cluster_is_a_404_page(client: TestClient) -> None:
    assert client.get("/jobs/lab/nosuchjob").status_code == 404
    assert client.get("/jobs/nowhere/nosuchjob").status_code == 404


def test_the_live_part_comes_alone(client: TestClient, fleet: Fleet) -> None:
    part = client.get("/", headers={LIVE_HEADER: "live"})
    assert "<html" not in part.text and 'id="jobs"' in part.text
    whole = client.get(f"/jobs/lab/{fleet.quick}", headers={LIVE_HEADER: "live"})
    assert "<html" not in whole.text and fleet.quick in whole.text


def test_the_clusters_page_shows_the_adapters_answers(client: TestClient) -> None:
    page = client.get("/clusters")
    assert page.status_code == 200
    assert 'id="cluster-lab"' in page.text
    assert re.search(r'class="answer answer-(yes|no|unknown)"', page.text)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"])
@pytest.mark.parametrize("path", ["/", "/clusters", "/jobs/lab/x", "/static/dashboard.js", "/x"])
def test_every_method_but_get_and_head_is_refused(
    client: TestClient, fleet: Fleet, method: str, path: str
) -> None:
    before = fleet.scripted.store.survey().revisions
    answer = client.request(method, path, content=b"{}")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"
    assert fleet.scripted.store.survey().revisions == before


def test_head_is_served(client: TestClient) -> None:
    assert client.head("/").status_code == 200


def test_with_a_token_every_request_needs_it(board: Board) -> None:
    token = "t" * 20 + "-dashboard"
    client = TestClient(make_app(board, token=token))
    for path in ("/", "/clusters", "/static/dashboard.js"):
        assert client.get(path).status_code == 401
    refused = client.get("/", headers={"Authorization": "Bearer wrong-token-wrong-token"})
    assert refused.status_code == 401
    assert "basic" in refused.headers["www-authenticate"].lower()
    assert client.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    assert client.get("/", headers={"Authorization": f"Basic {basic}"}).status_code == 200
    assert client.get("/", headers={"Authorization": "Basic !!"}).status_code == 401


def test_no_secret_reaches_a_page_or_a_log_line(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store label quoting a URL with a password, an inline secret of the configuration, and
    a store that fails with both in its message: pages and log lines show neither."""
    leaky = f"postgresql://ops:{URL_PASSWORD}@db.example/records ({SECRET})"

    def failing() -> LmdbRecords:
        raise Unavailable(f"cannot reach {leaky}")

    good = fleet.source("lab", label=leaky)
    bad = attrs.evolve(fleet.source("down", label=leaky), open_store=failing)
    board = Board([good, bad], redactor=Redactor([SECRET]))
    saved = {n: (logging.getLogger(n).handlers, logging.getLogger(n).propagate) for n in LOGGERS}
    log_through(board)  # as the server logs: to standard error, through the redactor
    try:
        client = TestClient(make_app(board))
        pages = [client.get(p).text for p in ("/", "/clusters", f"/jobs/lab/{fleet.recovered}")]
    finally:
        for name, (handlers, propagate) in saved.items():
            logging.getLogger(name).handlers = handlers
            logging.getLogger(name).propagate = propagate
    logged = capsys.readouterr().err
    assert "cluster down: the record store did not answer" in logged  # it is logged...
    assert "did not answer" in pages[0]  # ...and shown...
    for text in [*pages, logged]:
        assert SECRET not in text
        assert URL_PASSWORD not in text  # ...without what it must not show
    assert "ops:***@db.example" in pages[1]
