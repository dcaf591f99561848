"""The command in this process, on the local adapter: what each command prints, its JSON, and
its exit codes."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jobdispatch import Actor
from jobdispatch.records import events as ev
from jobdispatch.triggers import SUBMIT
from jobdispatch_records_lmdb import LmdbRecords

from .conftest import add_to_config

Invoke = Callable[..., Any]  # the conftest's fixture: (*args) -> Ran(code, out, err)
JobFile = Callable[..., Path]


def test_plugins_lists_the_embedded_default(invoke: Invoke) -> None:
    ran = invoke("plugins", "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert {"local", "memory"} <= {e["name"] for e in data["registries"]["adapter"]}
    assert "lmdb" in {e["name"] for e in data["registries"]["record-store"]}
    assert isinstance(data["failures"], list)
    table = invoke("plugins")
    assert table.code == 0 and "local" in table.out and "lmdb" in table.out


def test_plan_names_the_enforcer_and_submits_nothing(invoke: Invoke, job_file: JobFile) -> None:
    path = job_file(["true"], rules=[{"on": ["preempted"], "action": "resubmit", "budget": 3}])
    ran = invoke("plan", str(path), "--json")
    assert ran.code == 0, ran.err
    plan = ran.json()
    assert plan["rules"][0]["enforcer"] == "supervisor"
    assert plan["uncovered"][0] == "node-lost"
    assert plan["extra"]["out-of-memory detection"]["answer"] == "no"
    assert invoke("list", "--json").json() == []
    text = invoke("plan", str(path))
    assert "supervisor" in text.out and "uncovered" in text.out


def test_plan_shows_the_pending_deadline_and_the_rule_that_acts_on_it(
    invoke: Invoke, job_file: JobFile
) -> None:
    """The deadline is the spec's, not a field of the recorded plan: ``plan`` derives it, and
    says who stops the job, with what cause, and which rule then acts (issue 35, item 5)."""
    path = job_file(["true"], rules=[{"on": ["never-fits"], "action": "escalate"}])
    path.write_text(path.read_text() + '[pending]\nafter = "2h"\ncause = "never-fits"\n')
    text = invoke("plan", str(path))
    assert text.code == 0, text.err
    flat = " ".join(text.out.split())
    assert "pending: a submission not started 2h after it was opened ends with cause " in flat
    assert "never-fits, enforced by supervisor; then rule 0 acts: escalate (enforced by" in flat
    data = invoke("plan", str(path), "--json").json()
    assert data["pending"]["rule"] == {"after": 7200.0, "cause": "never-fits"}
    assert (data["pending"]["enforcer"], data["pending"]["acting"]["index"]) == ("supervisor", 0)
    bare = job_file(["true"], name="bare")
    bare.write_text(bare.read_text() + '[pending]\nafter = "1h"\n')
    flat = " ".join(invoke("plan", str(bare)).out.split())
    assert "ends with cause no-capacity, enforced by supervisor; no rule names no-capacity: " in (
        flat
    )
    assert invoke("plan", str(job_file(["true"], name="none")), "--json").json()["pending"] is None


def test_status_shows_the_pending_deadline_of_the_recorded_job(
    invoke: Invoke, job_file: JobFile
) -> None:
    """A submitted job's status says what ``plan`` said of its deadline, from the record."""
    path = job_file(["true"], rules=[{"on": ["never-fits"], "action": "escalate"}])
    path.write_text(path.read_text() + '[pending]\nafter = "2h"\ncause = "never-fits"\n')
    job = invoke("submit", str(path), "--json").json()["job"]
    flat = " ".join(invoke("status", job).out.split())
    assert "pending: a submission not started 2h after it was opened ends with cause " in flat
    data = invoke("status", job, "--json").json()
    assert data["pending"] == invoke("plan", str(path), "--json").json()["pending"]
    assert (data["pending"]["enforcer"], data["pending"]["acting"]["index"]) == ("supervisor", 0)
    other = invoke("submit", str(job_file(["true"], name="none")), "--json").json()["job"]
    assert invoke("status", other, "--json").json()["pending"] is None


def test_run_succeeds_and_shows_what_happened(invoke: Invoke, job_file: JobFile) -> None:
    path = job_file(["sh", "-c", "echo hello from $RANK"], nodes=2)
    ran = invoke("run", str(path), "--poll", "0.05")
    assert ran.code == 0, ran.out + ran.err
    assert "submission 1 execution 0 running" in ran.out
    assert "outcome: succeeded" in ran.out
    job = ran.out.split()[1]
    logs = invoke("logs", job, "--rank", "1")
    assert logs.code == 0 and logs.out == "hello from 1\n"
    meta = invoke("logs", job, "--json").json()
    assert (meta["object"], meta["text"]) == (f"jd-{job}-1-1", "hello from 0\n")


def test_run_exits_1_when_the_job_fails(invoke: Invoke, job_file: JobFile) -> None:
    ran = invoke("run", str(job_file(["sh", "-c", "exit 3"])), "--poll", "0.05")
    assert ran.code == 1
    assert "non-zero-exit" in ran.out and "exit 3" in ran.out
    [status] = invoke("list", "--json").json()
    assert (status["state"], status["cause"]["exit_code"]) == ("failed", 3)


def test_submitted_jobs_wait_for_a_supervisor_and_take_controls(
    invoke: Invoke, job_file: JobFile
) -> None:
    sub = invoke("--as", "alice", "submit", str(job_file(["sleep", "30"])), "--json")
    assert sub.code == 0, sub.err
    job = sub.json()["job"]
    status = invoke("status", job, "--json").json()
    assert (status["state"], status["submissions"]) == ("pending", [])
    assert invoke("--as", "alice", "hold", job, "--reason", "wait").code == 0
    held = invoke("status", job, "--json").json()
    assert held["state"] == "held" and held["hold"]["by"] == {"kind": "human", "id": "alice"}
    assert invoke("release", job).code == 0
    cancelled = invoke("--as", "bob", "cancel", job, "--reason", "changed my mind", "--json")
    assert cancelled.code == 0 and cancelled.json()["committed"] is True
    final = invoke("status", job, "--json").json()
    assert final["state"] == "cancelled"
    assert final["cause"]["actor"] == {"kind": "human", "id": "bob"}
    again = invoke("cancel", job)
    assert again.code == 0 and "cancelled already" in again.out
    listed = invoke("list")
    assert job in listed.out and "cancelled" in listed.out
    assert invoke("hold", job).code == 2  # a terminal job cannot be held


def test_supersede_replaces_a_job(invoke: Invoke, job_file: JobFile) -> None:
    job = invoke("submit", str(job_file(["sleep", "30"])), "--json").json()["job"]
    ran = invoke("supersede", job, str(job_file(["true"], name="better")), "--json")
    assert ran.code == 0, ran.err
    new = ran.json()["job"]
    assert invoke("status", job, "--json").json()["state"] == "cancelled"
    assert invoke("status", new, "--json").json()["name"] == "better"


def test_exit_codes(invoke: Invoke, job_file: JobFile, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('command = ["x"]\nnodes = 0\n')
    ran = invoke("submit", str(bad))
    assert ran.code == 2
    assert f"{bad}:2: nodes: must be at least 1, got 0" in ran.err
    assert invoke("status", "nosuchjob").code == 3
    image = job_file(["true"], image="busybox:1.36")
    refused = invoke("plan", str(image))
    assert refused.code == 4 and "container-image" in refused.err
    assert invoke("--cluster", "nowhere", "list").code == 3
    assert invoke("status").code == 2  # a missing argument is a usage error


def test_status_draws_a_timeline_and_an_svg(
    invoke: Invoke, job_file: JobFile, tmp_path: Path
) -> None:
    path = job_file(["sh", "-c", "exit 4"], rules=[])
    job = invoke("run", str(path), "--poll", "0.05").out.split()[1]
    text = invoke("status", job, "--timeline")
    assert text.code == 0 and "sub 1" in text.out and "non-zero-exit" in text.out
    svg = tmp_path / "t.svg"
    assert invoke("status", job, "--svg", str(svg)).code == 0
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "submission 1" in texts
    assert any("non-zero-exit" in t for t in texts)


def test_config_errors_name_the_key_and_line(invoke: Invoke, home: Path) -> None:
    config = home / "config" / "jobdispatch" / "config.toml"
    config.write_text(
        'default_cluster = "fast"\n[clusters.fast]\nadapter = "local"\ngracee = 2\n'
        '[clusters.odd]\nadapter = "slrum"\n'
    )
    ran = invoke("list")
    assert ran.code == 2
    assert f"{config}:4: clusters.fast.gracee: unknown key" in ran.err
    assert "clusters.odd" not in ran.err  # another cluster's problem is told where it is used
    listed = invoke("clusters")
    assert f"{config}:4: clusters.fast.gracee: unknown key" in listed.err
    assert f"{config}:6: clusters.odd.adapter: no adapter named 'slrum'" in listed.err


def test_clusters_and_the_local_group_on_another_adapter(invoke: Invoke, home: Path) -> None:
    pytest.importorskip("jobdispatch_slurm")
    add_to_config(home, '[clusters.hpc]\nadapter = "slurm"\n')
    data = invoke("clusters", "--json").json()
    assert {c["name"]: c["adapter"] for c in data["clusters"]} == {
        "local": "local",
        "hpc": "slurm",
    }
    ran = invoke("--cluster", "hpc", "local", "preempt", "jd-abc-1-1")
    assert ran.code == 4 and "local cluster only" in ran.err
    assert invoke("local", "preempt", "nosuchjob").code == 3


def test_capabilities_show_unknown_and_the_oom_answer(invoke: Invoke) -> None:
    data = invoke("capabilities", "--json").json()
    assert data["capabilities"]["hold"]["answer"] == "yes"
    assert data["extra"]["out-of-memory detection"]["answer"] == "no"


@pytest.mark.parametrize("command", ["status", "list", "plan", "plugins", "logs", "capabilities"])
def test_every_read_command_takes_json(invoke: Invoke, command: str) -> None:
    ran = invoke(command, "--help")
    assert ran.code == 0 and "--json" in ran.out


def test_watch_returns_once_the_job_has_settled(invoke: Invoke, job_file: JobFile) -> None:
    job = invoke("run", str(job_file(["true"])), "--poll", "0.05").out.split()[1]
    ran = invoke("watch", job, "--every", "0.05")
    assert ran.code == 0 and "succeeded" in ran.out


def test_logs_follow_until_the_end_and_stderr(invoke: Invoke, job_file: JobFile) -> None:
    path = job_file(["sh", "-c", "echo out; echo err >&2"])
    job = invoke("run", str(path), "--poll", "0.05").out.split()[1]
    assert invoke("logs", job, "-f").out == "out\n"
    assert invoke("logs", job, "--stderr").out == "err\n"
    assert invoke("logs", job, "--rank", "5").code == 3
    assert invoke("logs", job, "-f", "--json").code == 2


def test_controls_that_make_no_sense_are_refused(invoke: Invoke, job_file: JobFile) -> None:
    job = invoke("submit", str(job_file(["sleep", "30"])), "--json").json()["job"]
    not_held = invoke("release", job)
    assert not_held.code == 2 and "is not held" in not_held.err
    assert invoke("hold", job, "--for", "soon").code == 2
    assert invoke("hold", job, "--for", "1h").code == 0
    until = invoke("status", job, "--json").json()["hold"]["until"]
    assert until is not None
    assert invoke("resubmit", job).code == 0
    assert invoke("give-up", job, "--reason", "not needed").code == 0
    assert invoke("cancel", job).code == 0
    assert invoke("status", "--help").code == 0


def test_a_timeline_of_a_job_that_has_not_started(invoke: Invoke, job_file: JobFile) -> None:
    job = invoke("submit", str(job_file(["true"])), "--json").json()["job"]
    ran = invoke("status", job, "--timeline")
    assert ran.code == 0 and "pending" in ran.out
    assert invoke("cancel", job).code == 0


def _records(home: Path) -> LmdbRecords:
    return LmdbRecords(str(home / "state" / "jobdispatch" / "records" / "local"))


def _last_event(home: Path, job: str) -> ev.AnyEvent:
    """The newest event of ``job``'s record, read from the store the commands wrote."""
    store = _records(home)
    try:
        return store.read(job).events[-1]
    finally:
        store.close()


def test_requeue_is_recorded_as_the_person_asked(
    invoke: Invoke, job_file: JobFile, home: Path
) -> None:
    job = invoke("submit", str(job_file(["sleep", "30"])), "--json").json()["job"]
    ran = invoke("--as", "alice", "requeue", job, "--reason", "pick up the new node")
    assert ran.code == 0 and "requeue asked for" in ran.out
    last = _last_event(home, job)
    assert isinstance(last, ev.RequeueRequested)
    assert last.by == Actor.human("alice") and last.reason == "pick up the new node"
    assert invoke("cancel", job).code == 0
    assert invoke("requeue", job).code == 2  # terminal: nothing to requeue


def _attempted_without_reply(home: Path, job: str, *, attempts: int) -> None:
    """Submission 1 of ``job`` authorized and ``attempts`` Start calls made for it, none with a
    reply: what a supervisor killed inside Start leaves, committed under its lease."""
    store = _records(home)
    try:
        lease = store.acquire(job, "sup", timedelta(seconds=30))
        me = Actor.supervisor("sup")
        now = datetime.now(UTC)
        events: list[ev.AnyEvent] = [ev.SubmissionAuthorized(at=now, by=me, n=1, trigger=SUBMIT)]
        events += [
            ev.AttemptStarted(at=now, by=me, submission=1, attempt=k)
            for k in range(1, attempts + 1)
        ]
        store.append(job, events, expect_revision=store.read(job).revision, owner=lease)
        store.release(lease)
    finally:
        store.close()


def test_abandon_closes_an_attempt_that_was_made_and_only_that(
    invoke: Invoke, job_file: JobFile, home: Path
) -> None:
    job = invoke("submit", str(job_file(["true"])), "--json").json()["job"]
    # A supervisor's launch that never heard back from Start: authorized and attempted, no reply.
    _attempted_without_reply(home, job, attempts=1)
    assert invoke("abandon", job, "1", "2").code == 3  # never made
    assert invoke("abandon", job, "0", "1").code == 2  # not a submission number
    ran = invoke("--as", "bob", "abandon", job, "1", "1", "--reason", "checked: no such job")
    assert ran.code == 0 and "abandoned attempt 1.1" in ran.out
    last = _last_event(home, job)
    assert isinstance(last, ev.AbandonRequested)
    assert (last.submission, last.attempt, last.by) == (1, 1, Actor.human("bob"))
    assert invoke("cancel", job).code == 0


def test_a_launch_whose_attempts_were_abandoned_fails_as_the_persons_doing(
    invoke: Invoke, job_file: JobFile, home: Path
) -> None:
    # Reliability D9: a supervisor killed inside Start three times left three attempts with no
    # reply; once a person abandoned them the job failed "start refused", which nothing did.
    from jobdispatch_local import LocalBackend
    from jobdispatch_local.config import Settings
    from jobdispatch_supervise import Supervisor

    job = invoke("submit", str(job_file(["true"])), "--json").json()["job"]
    _attempted_without_reply(home, job, attempts=3)
    for k in ("1", "2", "3"):
        ran = invoke("--as", "bob", "abandon", job, "1", k, "--reason", "no such object")
        assert ran.code == 0, ran.err
    store = _records(home)
    try:
        backend = LocalBackend(Settings(state_dir=home / "state" / "local"))
        Supervisor(backend, store, poll=0.02).run(job)
    finally:
        store.close()
    data = invoke("status", job, "--json").json()
    assert (data["state"], data["committed"]) == ("failed", True)
    cause = data["cause"]
    assert (cause["kind"], cause["provenance"]) == ("launch-failed", "actor")
    assert "refused" not in cause["detail"]
    assert (
        "attempt 1.3: Start never answered, abandoned by human:bob (no such object)"
        in (cause["detail"])
    )
    assert "by human:bob" in invoke("status", job).out


def test_status_marks_an_ended_run_the_supervisor_has_not_committed(
    invoke: Invoke, job_file: JobFile, home: Path
) -> None:
    # Issue 14.6: between a run's end and the supervisor's outcome commit, status showed
    # "pending" with cause "none". It shows the run's end, marked as not yet committed.
    from jobdispatch import Cause, CauseKind, ObjectRef, ObjectState, Provenance
    from jobdispatch.spi import ExecutionObs, ObjectObs, discovery_name

    job = invoke("submit", str(job_file(["true"])), "--json").json()["job"]
    ref = ObjectRef(f"jd-{job}-1-1")
    failed = Cause(CauseKind.NON_ZERO_EXIT, Provenance.APPLICATION, exit_code=3)
    now = datetime.now(UTC)
    run = ExecutionObs(index=0, state=ObjectState.ENDED, cause=failed, started_at=now, ended_at=now)
    obs = ObjectObs(
        ref=ref, name=discovery_name(job, 1, 1), state=ObjectState.ENDED, executions=(run,)
    )
    store = _records(home)
    try:
        lease = store.acquire(job, "sup", timedelta(seconds=30))
        me = Actor.supervisor("sup")
        store.append(
            job,
            [
                ev.SubmissionAuthorized(at=now, by=me, n=1, trigger=SUBMIT),
                ev.AttemptStarted(at=now, by=me, submission=1, attempt=1),
                ev.AttemptReplied(
                    at=now, by=me, submission=1, attempt=1, reply=ev.Reply.CREATED, ref=ref
                ),
                ev.CanonicalChosen(at=now, by=me, submission=1, ref=ref, attempt=1),
                ev.OpenDecided(at=now, by=me, submission=1, ref=ref),
                ev.Observed(at=now, by=me, obs=obs),
            ],
            expect_revision=store.read(job).revision,
            owner=lease,
        )
        store.release(lease)
    finally:
        store.close()
    shown = invoke("status", job)
    assert shown.code == 0, shown.err
    assert "state    ended  (not yet committed)" in shown.out
    assert "cause    non-zero-exit (application, exit 3)  (the run's" in shown.out
    data = invoke("status", job, "--json").json()
    assert (data["state"], data["committed"]) == ("ended", False)
    assert (data["cause"]["kind"], data["cause"]["exit_code"]) == ("non-zero-exit", 3)
    listed = invoke("list")
    assert "ended" in listed.out and "uncommitted" in listed.out
    assert invoke("list", "--json").json()[0]["committed"] is False


def test_escalations_reach_the_configured_sinks(
    invoke: Invoke, job_file: JobFile, home: Path
) -> None:
    got = home / "escalations.jsonl"
    script = f"import sys; open({str(got)!r}, 'a').write(sys.stdin.read() + '\\n')"
    config = home / "config" / "jobdispatch" / "config.toml"
    argv = json.dumps([sys.executable, "-c", script])
    config.write_text(
        config.read_text() + f'[escalations.pager]\nsink = "command"\nargv = {argv}\n'
    )
    path = job_file(["false"], rules=[{"on": ["non-zero-exit"], "action": "escalate"}])
    ran = invoke("run", str(path), "--poll", "0.05")
    assert ran.code == 1, ran.err
    [message] = [json.loads(line) for line in got.read_text().splitlines()]
    job = message["job"]
    assert message["id"].startswith("rule:0:") and "escalates non-zero-exit" in message["detail"]
    escalations = invoke("status", job, "--json").json()["escalations"]
    assert [sorted(e["delivered"]) for e in escalations] == [["log", "pager"]]


def test_escalation_sink_errors_name_the_key_and_line(invoke: Invoke, home: Path) -> None:
    config = home / "config" / "jobdispatch" / "config.toml"
    base = config.read_text()
    n = base.count("\n")  # the fixture's own lines come first
    config.write_text(
        base
        + '[escalations.pager]\nsink = "command"\ntimeout = 0\n'
        + '[escalations.log]\nsink = "command"\nargv = ["x"]\n'
        + '[escalations.chat]\nsink = "discord"\n'
        + '[escalations.named]\nsink = "command"\nargv = ["x"]\nname = "other"\n'
    )
    ran = invoke("list")
    assert ran.code == 2
    err = ran.err
    assert f"{config}:{n + 1}: escalations.pager: 'argv' is a required property" in err
    assert f"{config}:{n + 3}: escalations.pager.timeout: 0 is less than" in err
    assert f"{config}:{n + 4}: escalations.log: the log sink always runs" in err
    assert f"{config}:{n + 8}: escalations.chat.sink: no escalation-sink named 'discord'" in err
    assert f"{config}:{n + 12}: escalations.named.name: the sink's name is its table's" in err


def test_plan_shows_the_stall_rule_its_enforcer_and_no_advance_budgets(
    invoke: Invoke, tmp_path: Path
) -> None:
    path = tmp_path / "stall.toml"
    path.write_text(
        'name = "hangs"\ncommand = ["true"]\n'
        '[progress]\nroot = "/tmp/ckpt"\n'
        '[stall]\nafter = "20m"\nstartup_grace = "1h"\nmode = "observe"\n'
        '[[recovery.rules]]\non = ["stalled", "preempted"]\naction = "resubmit"\nbudget = 2\n'
        'charge = "no-advance"\n'
    )
    ran = invoke("plan", str(path), "--json")
    assert ran.code == 0, ran.err
    plan = ran.json()
    assert plan["stall"]["enforcer"] == "supervisor" and plan["stall"]["root"] == "/tmp/ckpt"
    assert plan["stall"]["rule"]["mode"] == "observe"
    assert plan["rules"][0]["rule"]["charge"] == "no-advance"
    text = invoke("plan", str(path)).out
    assert "observe after 20m without progress" in text and "observe only" in text
    assert "no-advance" in text
    # Too short for the local adapter's poll (0.5 s): refused, naming the field.
    path.write_text(path.read_text().replace('after = "20m"', 'after = "0.1"'))
    refused = invoke("plan", str(path))
    assert refused.code != 0 and "stall.after" in refused.err + refused.out
