"""The web dashboard in a real browser: Debian's headless Chromium driven by Selenium, over
``jobdispatch dashboard`` serving a real supervisor's LMDB store of jobs run by the local
adapter (real processes), one of them preempted and recovered while the page watches.

The browser tests skip with a reason when chromium or chromedriver is missing
(``tools/browser/up`` installs both), and fail instead under JOBDISPATCH_REQUIRE_SERVICES=1,
as CI runs. Screenshots go to $JOBDISPATCH_SCREENSHOTS when set, else to a folder under
pytest's temporary directory (its path is printed).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch.errors import Unavailable
from jobdispatch.testing import eventually
from jobdispatch.types import ObjectState
from jobdispatch_local.testing import make_backend
from test_cli_end_to_end import Home, train_job

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PATIENCE = 90.0


def _browser_or_skip() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if not missing:
        return
    problem = f"no {' or '.join(missing)}: run tools/browser/up (Debian's chromium)"
    if os.environ.get("JOBDISPATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"JOBDISPATCH_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Straight to loopback, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, token: str | None = None, method: str = "GET") -> int:
    """The status a request gets; 0 while nothing listens."""
    request = urllib.request.Request(url, method=method, data=b"{}" if method != "GET" else None)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _DIRECT.open(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:
        return 0


class Site:
    """A supervisor and the dashboard over one private home; two jobs: ``train`` (waits to be
    preempted, then recovers by its rule) and ``crash`` (exits 3, no rule)."""

    def __init__(self, home: Home) -> None:
        self.home = home
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        job_file = train_job(home, steps=12, step_seconds=0.05, wait_at=4, budget=2)
        self.train = home.json("submit", str(job_file))["job"]
        crash = home.job_file(
            "crash.toml",
            f'name = "crash"\ncommand = ["{sys.executable}", "-c", "raise SystemExit(3)"]\n',
        )
        self.crash = home.json("submit", str(crash))["job"]
        home.start("supervise", "--poll", "0.1", "--lease-ttl", "3s", log="supervisor.log")
        self.dashboard = home.start(
            "dashboard",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--refresh",
            "0.3",
            log="dashboard.log",
        )
        self.backend = make_backend(home.local)
        self.preempted = False
        eventually(lambda: _get(self.url + "/") == 200, "the dashboard to answer", within=PATIENCE)

    def running(self) -> Any:
        objects = self.backend.find(self.train).objects
        found = [o for o in objects if o.state is ObjectState.RUNNING]
        return found[0] if found else None

    def preempt(self) -> None:
        """Preempt the first submission once it runs (as a scheduler would), once."""
        if self.preempted:
            return
        running = eventually(self.running, "the first submission to run", within=PATIENCE)
        for _ in range(100):
            try:
                self.backend.preempt(running.ref)
                break
            except Unavailable:  # the supervisor was looking at it: try again
                time.sleep(0.05)
        self.preempted = True

    def log(self) -> str:
        return (self.home.root / "dashboard.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    _browser_or_skip()
    home = Home(tmp_path_factory.mktemp("dashboard-home"))
    try:
        yield Site(home)
    finally:
        home.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("JOBDISPATCH_SCREENSHOTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {folder}")
    return folder


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",  # the dashboard is on loopback
    ):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _text(browser: Any, css: str) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return str(browser.find_element("css selector", css).text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def _all(browser: Any, css: str, what: str) -> list[str]:
    """``what`` (a property path such as ``innerText`` or ``dataset.cause``) of every element
    ``css`` matches, read in one script: the live part may be swapped between two calls."""
    script = (
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(e => String(arguments[1].split('.').reduce((o, k) => o[k], e)))"
    )
    return [str(v) for v in browser.execute_script(script, css, what)]


def _rows(browser: Any) -> list[str]:
    """The job ids the list shows now."""
    return _all(browser, "#jobs tr[data-job]", "dataset.job")


def _shows(browser: Any, what: str, jobs: list[str]) -> None:
    """Wait until the list shows exactly ``jobs`` (in any order)."""
    eventually(
        lambda: sorted(_rows(browser)), what, within=PATIENCE, holds=lambda r: r == sorted(jobs)
    )


def test_a_job_page_follows_the_job_from_running_to_recovered_without_reloading(
    site: Site, browser: Any, shots: Path
) -> None:
    eventually(site.running, "the first submission to run", within=PATIENCE)
    browser.get(f"{site.url}/jobs/local/{site.train}")
    eventually(
        lambda: _text(browser, "#job-state"),
        "the page to show running",
        within=PATIENCE,
        holds=lambda s: s == "running",
    )
    browser.save_screenshot(str(shots / "job-running-1280.png"))
    # A mark a reload would wipe: it must survive the whole recovery.
    browser.execute_script("window.stillTheSamePage = true")
    site.preempt()
    eventually(
        lambda: _text(browser, "#job-state"),
        "the page to show the job succeeded",
        within=PATIENCE,
        holds=lambda s: s == "succeeded",
    )
    assert browser.execute_script("return window.stillTheSamePage === true"), "the page reloaded"
    first = _all(browser, '#submissions tr[data-submission="1"]', "dataset.cause")
    assert first == ["preempted"]
    second = _all(browser, '#submissions tr[data-submission="2"]', "innerText")
    assert second and "rule 0" in second[0]
    plan = _all(browser, '#plan tr[data-rule="0"]', "innerText")[0].split()
    assert plan[:7] == ["0", "preempted", "resubmit", "supervisor", "2", "1", "1"]
    assert browser.find_elements("css selector", ".timeline svg")
    browser.save_screenshot(str(shots / "job-recovered-1280.png"))


def test_the_list_shows_the_jobs_and_their_causes_and_filters_them(
    site: Site, browser: Any, shots: Path
) -> None:
    from selenium.webdriver.support.ui import Select

    site.preempt()
    browser.get(site.url + "/")
    eventually(
        lambda: set(_rows(browser)),
        "both jobs listed",
        within=PATIENCE,
        holds=lambda s: s == {site.train, site.crash},
    )
    crash = f'#jobs tr[data-job="{site.crash}"]'
    eventually(
        lambda: _text(browser, crash),
        "the crash's cause",
        within=PATIENCE,
        holds=lambda t: "failed" in t and "non-zero-exit" in t,
    )
    Select(browser.find_element("id", "filter-cause")).select_by_value("non-zero-exit")
    browser.find_element("id", "filter-apply").click()
    _shows(browser, "the cause filter", [site.crash])
    browser.get(site.url + "/")
    browser.find_element("id", "filter-q").send_keys(site.train[:4])
    browser.find_element("id", "filter-apply").click()
    _shows(browser, "the id prefix search", [site.train])
    browser.get(site.url + "/?state=succeeded")
    _shows(browser, "the state filter", [site.train])
    browser.get(site.url + "/")
    _shows(browser, "both jobs listed", [site.crash, site.train])
    browser.save_screenshot(str(shots / "jobs-1280.png"))


@pytest.mark.parametrize("width", [1280, 390])
def test_the_pages_fit_a_desk_and_a_phone(
    site: Site, browser: Any, shots: Path, width: int
) -> None:
    site.preempt()
    browser.set_window_size(width, 900)
    try:
        for name, path in (
            ("jobs", "/"),
            ("job", f"/jobs/local/{site.train}"),
            ("clusters", "/clusters"),
        ):
            browser.get(site.url + path)
            eventually(lambda: _text(browser, "#live"), f"the {name} page", within=PATIENCE)
            overflow = browser.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"
            )
            assert overflow <= 1, f"the {name} page is {overflow}px wider than {width}px"
            browser.save_screenshot(str(shots / f"{name}-{width}.png"))
        assert _all(browser, "#cluster-local .capabilities tr", "innerText")
    finally:
        browser.set_window_size(1280, 900)


def test_the_command_serves_nothing_but_get_and_logs_no_token(site: Site) -> None:
    """Through the running command: writes refused; and a second server, with a token, asks
    for it and never writes it into its log."""
    for method in ("POST", "PUT", "DELETE"):
        assert _get(site.url + "/", method=method) == 405
    token = "dashboard-token-" + "x" * 24
    token_file = site.home.root / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    site.home.start(
        "dashboard",
        "--listen",
        f"127.0.0.1:{port}",
        "--token-file",
        str(token_file),
        log="dashboard-token.log",
    )
    eventually(
        lambda: _get(url),
        "the second dashboard to answer",
        within=PATIENCE,
        holds=lambda code: code == 401,
    )
    assert _get(url, token) == 200
    assert _get(url, "not-" + token) == 401
    log = (site.home.root / "dashboard-token.log").read_text(errors="replace")
    assert "GET / HTTP/1.1" in log
    assert token not in log
    assert token not in site.log()
