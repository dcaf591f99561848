"""Notices from the command line: sinks and the heartbeat configured in the config file, checked
before use with errors naming their key, shown and probed by ``plan``, and a ``run`` whose
job's notices reach a real receiver on loopback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobdispatch_supervise.testing import Receiver

from .conftest import Invoke


def _config(home: Path) -> Path:
    return home / "config" / "jobdispatch" / "config.toml"


def test_plan_shows_and_probes_each_sink_with_what_it_gets(
    invoke: Invoke, home: Path, job_file: Callable[..., Path], tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("k3y")
    with Receiver() as hook:
        config = _config(home)
        config.write_text(
            config.read_text()
            + f'[escalations.hook]\nsink = "webhook"\nurl = "{hook.url}"\n'
            + f'secret_file = "{secret}"\nnotify = ["settled"]\n'
            + '[escalations.down]\nsink = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
        )
        path = job_file(["true"], notify=["ended"], notify_sinks=["hook", "absent"])
        ran = invoke("plan", str(path), "--json")
        assert ran.code == 0, ran.err
        data = ran.json()
        sinks = {s["name"]: s for s in data["sinks"]}
        assert sinks["hook"]["gets"] == ["ended", "escalated", "settled"]
        assert sinks["hook"]["reachable"] is True and sinks["hook"]["configured"] is True
        assert str(secret) in sinks["hook"]["detail"] and "k3y" not in ran.out
        assert sinks["down"]["gets"] == ["escalated"] and sinks["down"]["reachable"] is False
        assert sinks["log"]["gets"] == ["escalated"]
        assert data["unknown_sinks"] == ["absent"]
        shown = invoke("plan", str(path))
        assert shown.code == 0 and "notices" in shown.out and "unreachable" in shown.out


def test_a_sink_that_cannot_work_is_an_error_naming_its_key(
    invoke: Invoke, home: Path, job_file: Callable[..., Path], tmp_path: Path
) -> None:
    config = _config(home)
    config.write_text(
        config.read_text()
        + '[escalations.hook]\nsink = "webhook"\nurl = "https://example.org/x"\n'
        + f'secret_file = "{tmp_path}/missing"\n'
    )
    ran = invoke("plan", str(job_file(["true"])))
    assert ran.code == 2
    assert "escalations.hook.secret_file:" in ran.err and "does not exist" in ran.err


def test_config_errors_for_cluster_sinks_and_the_heartbeat_name_their_keys(
    invoke: Invoke, home: Path
) -> None:
    config = _config(home)
    config.write_text(
        config.read_text().replace("grace = 0.3\n", 'grace = 0.3\nsinks = ["nowhere"]\n')
        + '[heartbeat]\nurl = "ftp://monitor/x"\n'
    )
    ran = invoke("list")
    assert ran.code == 2
    assert "clusters.local.sinks: names no sink 'nowhere'" in ran.err
    assert "heartbeat.url: must be an http:// or https:// URL" in ran.err
    config.write_text(config.read_text().replace('url = "ftp://monitor/x"', "timeout = 3"))
    ran = invoke("list")
    assert "heartbeat: give exactly one of url and url_file" in ran.err


def test_run_delivers_the_notices_a_job_asks_for_and_pings_the_heartbeat(
    invoke: Invoke, home: Path, job_file: Callable[..., Path], tmp_path: Path
) -> None:
    with Receiver() as hook, Receiver() as monitor:
        url = tmp_path / "deadman"
        url.write_text(monitor.url + "/token")
        config = _config(home)
        config.write_text(
            config.read_text()
            + f'[escalations.hook]\nsink = "webhook"\nurl = "{hook.url}"\n'
            + f'[heartbeat]\nurl_file = "{url}"\n'
        )
        path = job_file([sys.executable, "-c", "pass"], notify=["started", "ended", "settled"])
        ran = invoke("run", str(path), "--poll", "0.05", "--no-timeline")
        assert ran.code == 0, ran.err
        got = hook.wait_for(lambda a: any(x.json()["kind"] == "settled" for x in a), 60)
        kinds = [a.json()["kind"] for a in got]
        assert kinds == ["started", "ended", "settled"]
        assert all(a.json()["cluster"] == "local" for a in got)
        assert monitor.wait_for(lambda a: len(a) >= 1, 60)
        job = got[0].json()["job"]
        status = invoke("status", job, "--json").json()
        assert status["state"] == "succeeded"


def test_notices_link_their_jobs_page_when_a_dashboard_url_is_set(
    invoke: Invoke, home: Path, job_file: Callable[..., Path]
) -> None:
    with Receiver() as hook:
        config = _config(home)
        config.write_text(
            'dashboard_url = "https://dispatch.example.org/"\n'
            + config.read_text()
            + f'[escalations.hook]\nsink = "webhook"\nurl = "{hook.url}"\n'
        )
        path = job_file([sys.executable, "-c", "pass"], notify=["settled"])
        ran = invoke("run", str(path), "--poll", "0.05", "--no-timeline")
        assert ran.code == 0, ran.err
        [settled] = hook.wait_for(lambda a: len(a) >= 1, 60)
        body = settled.json()
        assert body["link"] == f"https://dispatch.example.org/jobs/{body['job']}"


def test_a_dashboard_url_with_credentials_or_no_scheme_is_refused(
    invoke: Invoke, home: Path
) -> None:
    config = _config(home)
    original = config.read_text()
    for bad, why in (
        ("https://ada:pw@dispatch.example.org", "must not carry a user name or password"),
        ("dispatch.example.org", "must be an http:// or https:// URL"),
    ):
        config.write_text(f'dashboard_url = "{bad}"\n' + original)
        ran = invoke("list")
        assert ran.code == 2 and f"dashboard_url: {why}" in ran.err, ran.err
        assert "pw@" not in ran.err
