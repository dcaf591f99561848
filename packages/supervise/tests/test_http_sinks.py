"""The HTTP notice sinks against a real server on loopback: what arrives (the documented body,
its signature, Slack's and PagerDuty's payloads), bad configurations refused naming their key,
and receivers that fail (unreachable, refused TLS, a 500, too slow) retried, never blocking."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobdispatch import Action, CauseKind, JobSpec, RecoveryPolicy, Rule
from jobdispatch.errors import Invalid
from jobdispatch.notices import delivered, notices
from jobdispatch.records import events as ev
from jobdispatch.testing import eventually
from jobdispatch.types import Actor, NoticeKind, Notify
from jobdispatch_supervise.http_sinks import (
    SIGNATURE_HEADER,
    DeliveryFailed,
    PagerDutySink,
    SlackSink,
    WebhookSink,
)
from jobdispatch_supervise.messages import NoticeMessage
from jobdispatch_supervise.outbox import Outbox
from jobdispatch_supervise.testing import Receiver

from .conftest import Scenario

SECRET = "s3cr3t-signing-key-never-printed"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    return path


def preempted_twice(scenario: Scenario, notify: Notify | None = None) -> ev.View:
    """A real record: preempted three times under a budget of two (ends, recoveries, budget
    low, an escalation, the settling)."""
    scenario.submit(
        JobSpec(
            command=["train"],
            name="finetune",
            recovery=RecoveryPolicy(
                rules=[Rule(on=[CauseKind.PREEMPTED], action=Action.RESUBMIT, budget=2)]
            ),
            extensions=[notify] if notify else [],
        )
    )
    for n in (1, 2, 3):
        scenario.on(scenario.running(n), scenario.preempting(n))
    scenario.run()
    return scenario.store.read(scenario.job)


def outbox(scenario: Scenario, *sinks: Any) -> Outbox:
    return Outbox(
        scenario.store, list(sinks), by=Actor.supervisor("test"), clock=scenario.clock, cluster="c1"
    )


def verify(secret: str, body: bytes, header: str) -> bool:
    """What the how-to tells a receiver to do, in as many lines."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


def test_the_webhook_posts_every_notice_signed_and_records_each_delivery_once(
    scenario: Scenario, receiver: Receiver, secret_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    everything = [str(k) for k in NoticeKind]
    view = preempted_twice(scenario)
    hook = WebhookSink(receiver.url, secret_file=str(secret_file), name="hook", events=everything)
    box = outbox(scenario, hook)
    box.offer(view)
    expected = notices(view)
    got = receiver.wait_for(lambda a: len(a) >= len(expected), timeout=60)
    assert box.flush(60)
    box.close()
    bodies = [a.json() for a in got]
    assert [b["id"] for b in bodies] == [n.id for n in expected]  # one lane: in record order
    for arrival, body in zip(got, bodies, strict=True):
        assert verify(SECRET, arrival.body, arrival.headers[SIGNATURE_HEADER])
        assert not verify("another secret", arrival.body, arrival.headers[SIGNATURE_HEADER])
        assert body["schema"] == "jobdispatch.notice/1" and body["cluster"] == "c1"
        assert body["key"] == f"{scenario.job}/{body['id']}"
        assert arrival.headers["X-Jobdispatch-Key"] == body["key"]
        assert body["text"].startswith(f"[c1] finetune ({scenario.job[:8]}): ")
    recovered = next(b for b in bodies if b["kind"] == "recovered")
    assert recovered["rule"] == {
        "index": 0,
        "action": "resubmit",
        "enforcer": "supervisor",
        "budget_left": 1,
        "budget": 2,
    }
    assert recovered["cause"]["kind"] == "preempted"
    assert bodies[-1]["kind"] == "settled" and bodies[-1]["outcome"] == "failed"
    # Every delivery recorded, once; offering the record again sends nothing more.
    after = scenario.store.read(scenario.job)
    assert delivered(after) == {(n.id, "hook") for n in expected}
    again = outbox(scenario, hook)
    again.offer(after)
    assert again.flush(10) and len(receiver.arrivals) == len(expected)
    again.close()
    # The secret never reaches a log line.
    assert SECRET not in caplog.text


def test_a_job_asks_for_its_notices_of_every_sink_or_of_one_by_name(
    scenario: Scenario, receiver: Receiver
) -> None:
    view = preempted_twice(scenario, Notify(events=["ended"], sinks=["other"]))  # type: ignore[list-item]  # sinks: see Notify
    chosen = WebhookSink(receiver.url, name="other")
    left_out = WebhookSink(receiver.url, name="hook")
    box = outbox(scenario, chosen, left_out)
    box.offer(view)
    assert box.flush(60)
    box.close()
    kinds = [(a.json()["kind"], a.headers["X-Jobdispatch-Key"]) for a in receiver.arrivals]
    ended = [k for k, _ in kinds if k == "ended"]
    escalated = [k for k, _ in kinds if k == "escalated"]
    # The three ends to the sink the job names; the escalation to both; nothing else.
    assert len(ended) == 3 and len(escalated) == 2 and len(kinds) == 5


def test_slack_and_pagerduty_payloads(
    scenario: Scenario, receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # urllib3's own level too: jobdispatch-publish's command quiets it to WARNING, and its tests
    # run it in-process before these when one process runs every package (the lowest session).
    caplog.set_level(logging.DEBUG, logger="urllib3")
    view = preempted_twice(scenario)
    key = tmp_path / "routing-key"
    key.write_text("R0UT1NG")
    url_file = tmp_path / "slack-url"
    url_file.write_text(receiver.url + "/slack")
    kinds = ["ended", "recovered", "settled"]
    slack = SlackSink(url_file=str(url_file), name="team", events=kinds)
    pager = PagerDutySink(routing_key_file=str(key), url=receiver.url + "/pd", events=kinds)
    box = outbox(scenario, slack, pager)
    box.offer(view)
    assert box.flush(60)
    box.close()
    by_path: dict[str, list[Any]] = {}
    for a in receiver.arrivals:
        by_path.setdefault(a.path, []).append(a.json())
    texts = [p["text"] for p in by_path["/hook/slack"]]
    assert any("preempted" in t and t.startswith(":rotating_light: [c1] finetune") for t in texts)
    pd = by_path["/hook/pd"]
    triggers = [e for e in pd if e["event_action"] == "trigger"]
    resolves = [e for e in pd if e["event_action"] == "resolve"]
    assert all(e["routing_key"] == "R0UT1NG" for e in pd)
    # Each preemption pages; each recovery resolves the page of the end it recovered; the
    # third end and the escalation stay open (the job failed: a person must look).
    assert len(triggers) == 4 and len(resolves) == 2
    assert {r["dedup_key"] for r in resolves} < {t["dedup_key"] for t in triggers}
    assert triggers[0]["payload"]["severity"] == "error"
    assert triggers[0]["dedup_key"].startswith(scenario.job + "/ended:")
    # Slack's URL is a secret (its path is the token): not even urllib3's debug lines show it;
    # nor does the routing key reach a log.
    assert "/hook/slack" not in caplog.text and "R0UT1NG" not in caplog.text
    assert "/hook/pd" in caplog.text  # the lines are there, the secret path only is hidden


def test_bad_configurations_are_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(Invalid, match=r"escalations.hook.secret_file: .* does not exist"):
        WebhookSink("https://example.org/x", secret_file=str(tmp_path / "nope"), name="hook")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(Invalid, match=r"escalations.hook.secret_file: .* is empty"):
        WebhookSink("https://example.org/x", secret_file=str(empty), name="hook")
    with pytest.raises(Invalid, match=r"escalations.hook.url: must be an http"):
        WebhookSink("ftp://example.org/x", name="hook")
    with pytest.raises(Invalid, match=r"escalations.hook.url: the URL names no host"):
        WebhookSink("https:///x", name="hook")
    with pytest.raises(Invalid, match=r"escalations.team: give exactly one of url and url_file"):
        SlackSink(name="team")
    with pytest.raises(Invalid, match=r"escalations.hook.notify: 'finished' is not a notice kind"):
        WebhookSink("https://example.org/x", name="hook", events=["finished"])
    with pytest.raises(Invalid, match=r"escalations.pd.routing_key_file"):
        PagerDutySink(routing_key_file=str(tmp_path / "nope"), name="pd")
    key = tmp_path / "k"
    key.write_text("k")
    with pytest.raises(Invalid, match=r"escalations.pd.severity"):
        PagerDutySink(routing_key_file=str(key), name="pd", severity="loud")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _message(scenario: Scenario) -> NoticeMessage:
    view = preempted_twice(scenario)
    return NoticeMessage(notice=notices(view)[0], cluster="c1")


def test_an_unreachable_receiver_and_refused_tls_are_clear_failures(
    scenario: Scenario, receiver: Receiver
) -> None:
    message = _message(scenario)
    down = WebhookSink(f"http://127.0.0.1:{_closed_port()}/token-in-path", name="down", timeout=5)
    with pytest.raises(DeliveryFailed) as failed:
        down.send(message)
    assert "did not answer" in str(failed.value) and "token-in-path" not in str(failed.value)
    probe = down.probe()
    assert probe.configured and probe.reachable is False and "not reachable" in probe.detail
    # https to a server that speaks plain HTTP: the handshake fails.
    tls = WebhookSink(f"https://127.0.0.1:{receiver.port}/hook", name="tls", timeout=5)
    with pytest.raises(DeliveryFailed, match="did not answer"):
        tls.send(message)
    assert tls.probe().reachable is False and "TLS refused" in tls.probe().detail
    assert WebhookSink(receiver.url, name="up").probe().reachable is True


def test_a_500_is_retried_with_backoff_until_it_is_taken(
    scenario: Scenario, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jobdispatch_supervise.outbox as outbox_module

    monkeypatch.setattr(outbox_module, "RETRY_BASE", 0.05)
    view = preempted_twice(scenario)
    receiver.answer(status=500)
    hook = WebhookSink(receiver.url, name="hook", cooldown=0)
    box = outbox(scenario, hook)
    box.offer(view)
    lane = box.lanes[0]
    eventually(lambda: lane.stats.failed, "three retried 500s", holds=lambda n: n >= 3)
    assert delivered(scenario.store.read(scenario.job)) == frozenset()
    receiver.answer(status=200)
    assert box.flush(60)
    box.close()
    # Taken once by the receiver (it keeps only what it answered 2xx), recorded once.
    [arrival] = receiver.arrivals
    assert arrival.json()["kind"] == "escalated"
    assert delivered(scenario.store.read(scenario.job)) == {(arrival.json()["id"], "hook")}


def test_a_slow_receiver_times_out_and_blocks_neither_the_offer_nor_another_sink(
    scenario: Scenario, receiver: Receiver
) -> None:
    view = preempted_twice(scenario)
    with Receiver(delay=30) as slow:
        stuck = WebhookSink(slow.url, name="stuck", timeout=20)
        quick = WebhookSink(receiver.url, name="quick")
        box = outbox(scenario, stuck, quick)
        box.offer(view)  # returns while the slow receiver holds its request
        receiver.wait_for(lambda a: len(a) == 1, timeout=60)
        assert box.lanes[1].flush_wait(60)
        assert box.lanes[0].pending() == 1  # still sending (or to be tried again)
        assert delivered(scenario.store.read(scenario.job)) == {(notices(view)[-2].id, "quick")}
        for lane in box.lanes:
            lane.stop()


def test_the_body_is_compact_sorted_json(scenario: Scenario) -> None:
    message = _message(scenario)
    body = message.encoded()
    assert json.loads(body) == message.body()
    assert body == json.dumps(message.body(), sort_keys=True, separators=(",", ":")).encode()
