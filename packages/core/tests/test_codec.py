"""One converter for every type: each value type and each event round-trips through it."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import attrs
import jobdispatch
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch import codec
from jobdispatch import types as t
from jobdispatch.records import events as ev
from jobdispatch.spi import (
    CessationEvidence,
    Discovery,
    ExecutionObs,
    NativeOffer,
    ObjectObs,
    ObjectRef,
    StartRequest,
    StopReport,
)
from jobdispatch.testing import Story
from jobdispatch.triggers import ESCALATION_CLASSES, TRIGGER_CLASSES

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
durations = st.integers(1, 10**7).map(lambda s: timedelta(seconds=s))
text = st.text(max_size=20)
names = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
actors = st.builds(t.Actor, kind=st.sampled_from(t.ActorKind), id=names)
causes = st.builds(
    t.Cause,
    kind=st.sampled_from(t.CauseKind),
    provenance=st.sampled_from(t.Provenance),
    detail=text,
    exit_code=st.none() | st.integers(-255, 255),
    signal=st.none() | st.integers(1, 64),
    actor=st.none() | actors,
)
rules = st.builds(
    t.Rule,
    on=st.lists(st.sampled_from(jobdispatch.RECOVERABLE), max_size=3),
    action=st.sampled_from(t.Action),
    budget=st.integers(0, 9),
    for_=st.none() | durations,
    charge=st.sampled_from(t.Charge),
)
stall_rules = st.builds(
    t.StallRule,
    after=durations,
    startup_grace=st.none() | durations,
    mode=st.sampled_from(t.StallMode),
    blind_after=durations,
)
specs = st.builds(
    t.JobSpec,
    command=st.lists(text, min_size=1, max_size=3),
    name=names,
    nodes=st.integers(1, 64),
    procs_per_node=st.integers(1, 8),
    image=st.none() | names,
    working_dir=st.none() | text,
    env=st.dictionaries(names.map(str.upper), text, max_size=3),
    time_limit=st.none() | durations,
    output=st.none() | text,
    extensions=st.lists(
        st.just(t.SharedCheckpoint())
        | st.builds(
            t.Notify,
            events=st.lists(st.sampled_from(t.NoticeKind), max_size=3),
            sinks=st.lists(names, max_size=2),
        ),
        max_size=2,
    ),
    recovery=st.builds(t.RecoveryPolicy, rules=st.lists(rules, max_size=3)),
    progress=st.none() | st.builds(t.ProgressSource, root=names, record_every=durations),
    stall=st.none() | stall_rules,
)
supports = st.builds(
    t.Support, answer=st.sampled_from(t.Tristate), source=st.sampled_from(t.Source), detail=text
)
refs = st.builds(ObjectRef, id=names)
executions = st.builds(
    ExecutionObs,
    index=st.integers(0, 5),
    state=st.sampled_from(t.ObjectState),
    cause=st.none() | causes,
    started_at=st.none() | times,
    ended_at=st.none() | times,
    nodes=st.lists(names, max_size=2).map(tuple),
)
observations = st.builds(
    ObjectObs,
    ref=refs,
    name=names,
    state=st.sampled_from(t.ObjectState),
    executions=st.lists(executions, max_size=3).map(tuple),
    hold_instance=st.none() | st.integers(1, 9),
    requeue_bit=st.none() | st.booleans(),
    lost_nodes=st.lists(names, max_size=2).map(tuple),
    detail=text,
)
assignments = st.builds(
    t.RuleAssignment,
    index=st.integers(0, 5),
    rule=rules,
    effective=rules,
    enforcer=st.sampled_from(jobdispatch.Enforcer),
    support=st.builds(t.RuleSupport, native=supports, perform=supports),
    firings=st.integers(0, 5),
    accepted=text,
    charged=st.integers(0, 5),
)
plans = st.builds(
    t.Plan,
    job=st.none() | names,
    rules=st.lists(assignments, max_size=2).map(tuple),
    uncovered=st.lists(st.sampled_from(jobdispatch.RECOVERABLE)).map(tuple),
    checkpoint=st.sampled_from(jobdispatch.CheckpointMode),
    unmatched=st.sampled_from(jobdispatch.UnmatchedPolicy),
    capabilities=st.dictionaries(st.sampled_from(t.Capability), supports),
    identity_weakened=text,
    supervised=st.booleans(),
    stall=st.none()
    | st.builds(
        t.StallAssignment,
        rule=stall_rules,
        enforcer=st.sampled_from(jobdispatch.Enforcer),
        root=text,
        note=text,
    ),
)
holds = st.builds(
    t.Hold, kind=st.sampled_from(t.HoldKind), by=actors, reason=text, until=st.none() | times
)

VALUES = {
    t.Cause: causes,
    t.Actor: actors,
    t.Rule: rules,
    t.JobSpec: specs,
    t.Support: supports,
    ObjectRef: refs,
    ExecutionObs: executions,
    ObjectObs: observations,
    t.Plan: plans,
    t.Hold: holds,
    t.RuleAssignment: assignments,
    t.HoldMeta: st.builds(
        t.HoldMeta,
        instance=st.integers(1, 9),
        deadline=times,
        by=st.none() | actors,
        reason=text,
        until=st.none() | times,
    ),
    t.CallMeta: st.builds(t.CallMeta, deadline=times, by=st.none() | actors, reason=text),
    Discovery: st.builds(
        Discovery,
        job=names,
        objects=st.lists(observations, max_size=2).map(tuple),
        at=st.none() | times,
        complete=st.booleans(),
    ),
    StopReport: st.builds(
        StopReport,
        stopped=st.lists(refs, max_size=2).map(tuple),
        live=st.lists(refs, max_size=2).map(tuple),
    ),
    CessationEvidence: st.builds(
        CessationEvidence, ceased=st.sampled_from(t.Tristate), detail=text, at=st.none() | times
    ),
    NativeOffer: st.builds(
        NativeOffer,
        rules=st.lists(st.integers(0, 3)).map(tuple),
        remaining=st.dictionaries(st.integers(0, 3), st.integers(0, 5)),
        settings=st.dictionaries(names, text),
    ),
    StartRequest: st.builds(
        StartRequest, job=names, submission=st.integers(1, 9), attempt=st.integers(1, 9), spec=specs
    ),
    ev.Options: st.builds(
        ev.Options,
        supervised=st.booleans(),
        submit_retries=st.integers(0, 5),
        unresolved_age=durations,
        cleanup_deadline=durations,
        unmatched=st.sampled_from(jobdispatch.UnmatchedPolicy),
    ),
    ev.Header: st.builds(
        ev.Header,
        job=names,
        spec=specs,
        plan=plans,
        created_by=actors,
        created_at=times,
        idempotency_key=text,
        supersedes=names,
    ),
}


@pytest.mark.parametrize("cls", list(VALUES), ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_value_types_round_trip_through_json(cls: type[Any], data: st.DataObject) -> None:
    value = data.draw(VALUES[cls])
    raw = json.loads(json.dumps(codec.converter.unstructure(value)))
    assert codec.converter.structure(raw, cls) == value


def _printed_id(cls: type[Any]) -> st.SearchStrategy[Any]:
    """A trigger or escalation id of ``cls``: its numbers from 0 (what its checks take; left to
    inference, a draw of -1 fails the build), a trigger it names of any trigger class."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in attrs.fields(cls):
        if f.type is int:
            fields[f.name] = st.integers(0, 99)
        elif f.name == "trigger":
            fields[f.name] = st.one_of([_printed_id(c) for c in TRIGGER_CLASSES if c is not cls])
    return st.builds(cls, **fields)


triggers = st.one_of([_printed_id(c) for c in TRIGGER_CLASSES])
escalation_ids = st.one_of([_printed_id(c) for c in ESCALATION_CLASSES])


def _event_strategy(cls: type[ev.Event]) -> st.SearchStrategy[ev.Event]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in attrs.fields(cls):
        if f.name in ("at",):
            fields[f.name] = times
        elif f.name == "by":
            fields[f.name] = actors
        elif f.name == "token":
            fields[f.name] = st.integers(1, 99) if cls.cls is ev.EventClass.DECISION else st.none()
    overrides: dict[str, st.SearchStrategy[Any]] = {
        "find_at": times,
        "marked_at": times,
        "resumed_at": times,
        "origin": st.sampled_from(ev.Origin),
        "deadline": times,
        "until": times,
        "obs": observations,
        "ref": refs,
        "cause": causes,
        "hold": holds,
        "evidence": VALUES[CessationEvidence],
        "reply": st.sampled_from(ev.Reply),
        "op": st.sampled_from(ev.CallOp),
        "state": st.sampled_from(t.State),
        "trigger": triggers,
        "escalation": escalation_ids,
        "id": escalation_ids,  # an Escalated's
    }
    for f in attrs.fields(cls):
        if f.name in fields:
            continue
        if f.name in overrides:
            strategy = overrides[f.name]
            fields[f.name] = st.none() | strategy if "None" in str(f.type) else strategy
    return st.builds(cls, **fields)


@pytest.mark.parametrize("cls", list(ev.EVENT_TYPES.values()), ids=lambda c: c.kind)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_event_round_trips_with_its_tag_and_version(
    cls: type[Any], data: st.DataObject
) -> None:
    event = data.draw(_event_strategy(cls))
    raw = codec.encode_event(event)
    body = json.loads(raw[5:])  # after the frame: a version byte and the CRC-32
    assert body["type"] == cls.kind and body["v"] == ev.SCHEMA_VERSION
    assert codec.decode_event(raw, revision=1) == event


def test_unknown_types_and_newer_versions_are_refused_naming_the_revision() -> None:
    with pytest.raises(jobdispatch.Invalid, match="revision 7: unknown event type 'teleported'"):
        codec.decode_event(b'{"type":"teleported","v":1}', revision=7, job="j")
    with pytest.raises(jobdispatch.Invalid, match="revision 3: event schema version 9"):
        codec.decode_event(
            b'{"type":"settled","v":9,"at":"2026-01-01T00:00:00+00:00"}', revision=3, job="j"
        )
    with pytest.raises(jobdispatch.Invalid, match=r"revision 0 .*newer version"):
        codec.decode_header(b'{"schema": 99}', job="j")


def test_naive_times_are_refused() -> None:
    with pytest.raises(jobdispatch.Invalid, match="naive datetime"):
        codec.encode_event(ev.Settled(at=datetime(2026, 1, 1), by=t.Actor.human("x"), token=1))


def test_enums_print_as_their_kebab_case_words() -> None:
    assert str(t.CauseKind.NODE_LOST) == "node-lost"
    assert str(t.CauseKind.OUT_OF_MEMORY) == "out-of-memory"
    assert str(t.State.RECOVERING) == "recovering"
    assert f"{t.Action.RESUBMIT}" == "resubmit"
    assert list(jobdispatch.RECOVERABLE) == [
        t.CauseKind(w)
        for w in (
            "preempted",
            "node-lost",
            "out-of-memory",
            "time-limit",
            "non-zero-exit",
            "launch-failed",
            "no-capacity",
            "never-fits",
            "requeued",
            "stalled",
            "unknown",
        )
    ]


# ------------------------------------------------------------- stored values: frame and damage

_stored = st.one_of(
    VALUES[ev.Header].map(lambda h: (codec.encode_header(cast(ev.Header, h)), h)),
    st.sampled_from(list(ev.EVENT_TYPES.values()))
    .flatmap(_event_strategy)
    .map(lambda e: (codec.encode_event(e), e)),
)


def _decode(raw: bytes, like: object) -> object:
    if isinstance(like, ev.Header):
        return codec.decode_header(raw, job="j")
    return codec.decode_event(raw, revision=4, job="j")


@settings(max_examples=15, deadline=None)
@given(stored=_stored)
def test_no_single_bit_flip_of_a_stored_value_decodes_into_a_changed_record(
    stored: tuple[bytes, Any],
) -> None:
    # Every bit of the value, frame included: each flip is reported (the CRC-32 catches every
    # single-bit error) or, were it ever harmless, decodes to the very value written.
    raw, value = stored
    reported = 0
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            decoded = _decode(bytes(flipped), value)
        except jobdispatch.Unreadable as exc:
            where = (exc.job, exc.revision)
        else:
            assert decoded == value, f"bit {bit} changed the record"
            continue
        assert where == ("j", 0 if isinstance(value, ev.Header) else 4)
        reported += 1
    assert reported == len(raw) * 8


def test_a_damaged_value_is_reported_naming_the_record_and_revision() -> None:
    event = ev.Settled(at=datetime(2026, 1, 1, tzinfo=UTC), by=t.Actor.human("x"), token=1)
    raw = bytearray(codec.encode_event(event))
    raw[-3] ^= 0x04
    with pytest.raises(jobdispatch.Unreadable, match=r"record j revision 7: .* damaged") as got:
        codec.decode_event(bytes(raw), revision=7, job="j")
    assert isinstance(got.value, jobdispatch.Invalid)  # an Invalid, so old callers still cope
    with pytest.raises(jobdispatch.Unreadable, match="starts with byte 0x02"):
        codec.decode_event(b"\x02" + bytes(raw[1:]), revision=7, job="j")
    with pytest.raises(jobdispatch.Unreadable, match="cut short"):
        codec.decode_event(bytes(raw[:3]), revision=7, job="j")
    with pytest.raises(jobdispatch.Unreadable, match="empty"):
        codec.decode_header(b"", job="j")


@settings(max_examples=20, deadline=None)
@given(stored=_stored)
def test_values_written_before_frames_are_still_read(stored: tuple[bytes, Any]) -> None:
    # Stores written before checksums hold bare JSON: it decodes as it always did.
    raw, value = stored
    legacy = raw[5:]
    assert legacy.startswith(b"{")
    assert _decode(legacy, value) == value


# ------------------------------------------------------------------------ fuzzing the decoder

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)


def _only_typed_errors(raw: bytes) -> None:
    """Decoding ``raw`` as a header and as an event either works or raises Unreadable."""
    for decode in (
        lambda: codec.decode_header(raw, job="j"),
        lambda: codec.decode_event(raw, revision=2, job="j"),
    ):
        with contextlib.suppress(jobdispatch.Unreadable):  # anything else fails the test
            decode()


def _framed(body: bytes) -> bytes:
    """``body`` behind a frame whose CRC matches, so the decoder gets past the check."""
    import zlib

    return b"\x01" + zlib.crc32(body).to_bytes(4, "big") + body


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_the_typed_error(raw: bytes) -> None:
    _only_typed_errors(raw)
    _only_typed_errors(_framed(raw))
    _only_typed_errors(b"{" + raw)


@settings(max_examples=200, deadline=None)
@given(stored=_stored, data=st.data())
def test_mutated_encodings_raise_only_the_typed_error(
    stored: tuple[bytes, Any], data: st.DataObject
) -> None:
    raw, _ = stored
    body = bytearray(raw[5:])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body)))
        how = data.draw(st.sampled_from(("replace", "insert", "delete")))
        byte = data.draw(st.integers(0, 255))
        if how == "replace" and at < len(body):
            body[at] = byte
        elif how == "insert":
            body.insert(at, byte)
        elif at < len(body):
            del body[at]
    # As a legacy value (no frame, so nothing stops it before the JSON) and behind a good frame.
    _only_typed_errors(bytes(body))
    _only_typed_errors(_framed(bytes(body)))


@settings(max_examples=200, deadline=None)
@given(stored=_stored, data=st.data())
def test_structurally_changed_encodings_raise_only_the_typed_error(
    stored: tuple[bytes, Any], data: st.DataObject
) -> None:
    # Well-formed JSON with one field's value (or a new field) replaced by any JSON value.
    raw, _ = stored
    body = json.loads(raw[5:])
    key = data.draw(st.sampled_from([*sorted(body), "extra"]))
    body[key] = data.draw(_json)
    _only_typed_errors(_framed(json.dumps(body).encode()))


def test_deeply_nested_json_is_the_typed_error_not_a_recursion_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(jobdispatch.Unreadable, match="revision 0"):
        codec.decode_header(_framed(deep), job="j")
    with pytest.raises(jobdispatch.Unreadable, match="revision 3"):
        codec.decode_event(b'{"a":' + deep + b"}", revision=3, job="j")


@pytest.mark.parametrize(
    "bad", ["", "   ", "a\nb", "tab\there", "nul\x00", "line\u2028sep", "\udcff", "x" * 513]
)
def test_an_actor_id_that_cannot_be_shown_on_one_line_is_refused(bad: str) -> None:
    with pytest.raises(jobdispatch.Invalid, match="an actor's id"):
        t.Actor.human(bad)
    with pytest.raises(jobdispatch.Invalid, match="an actor's id"):
        t.Actor(t.ActorKind.SUPERVISOR, bad)


def test_a_record_written_before_actor_ids_were_checked_still_reads() -> None:
    raw = (
        b'{"type":"cancel-requested","v":1,"at":"2026-01-01T00:00:00+00:00",'
        b'"by":{"kind":"human","id":""},"reason":"","superseded_by":""}'
    )
    event = codec.decode_event(raw, revision=3, job="j")
    assert isinstance(event, ev.CancelRequested)
    assert event.by.kind is t.ActorKind.HUMAN and event.by.id == ""
    assert codec.decode_event(codec.encode_event(event), revision=3) == event


# ---------------------------------------------- the fast path (jobdispatch.structurers) and orjson


class _Refused:
    """What a decoding path answered when it took no value (raised anything)."""

    def __repr__(self) -> str:
        return "refused"


REFUSED = _Refused()


def _by_converter(body: bytes, header: bool) -> object:
    """The converter's path alone: the standard library's parser and cattrs."""
    try:
        raw = json.loads(body)
        return codec.converter.structure(raw, ev.Header if header else ev.Event)
    except Exception:
        return REFUSED


def _by_fast_path(body: bytes, header: bool) -> object:
    """The compiled structurers alone, on orjson's parse; REFUSED when they decline."""
    try:
        raw = orjson.loads(body)
        return codec._fast_header_of(raw) if header else codec._fast_event_of(raw)
    except Exception:
        return REFUSED


@settings(max_examples=60, deadline=None)
@given(stored=_stored)
def test_every_value_written_is_read_by_the_fast_path_as_the_converter_reads_it(
    stored: tuple[bytes, Any],
) -> None:
    # The fast path never declines what this version writes (else reads silently slow down),
    # and gives the very value the converter gives, down to each field's type.
    raw, value = stored
    header = isinstance(value, ev.Header)
    assert _decode(raw, value) == value
    if not _orjson_reads_alike(raw[5:]):
        return  # an integer past 64 bits, which orjson reads as a float: declined, see below
    fast = _by_fast_path(raw[5:], header)
    assert fast == value
    assert repr(fast) == repr(_by_converter(raw[5:], header))


def _orjson_reads_alike(body: bytes) -> bool:
    try:
        return repr(orjson.loads(body)) == repr(json.loads(body))
    except orjson.JSONDecodeError:
        return False


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**30])
def test_an_integer_past_64_bits_is_read_as_the_converter_reads_it(big: int) -> None:
    # orjson reads it as a float; the fast path declines it wherever it is (a field typed as a
    # number, text a hook makes of it: an env value, a notice sink), so it reads as before.
    event = ev.AbandonRequested(
        at=datetime(2026, 1, 1, tzinfo=UTC), by=t.Actor.human("x"), submission=1, attempt=big
    )
    with contextlib.suppress(orjson.JSONDecodeError):  # read as a float, or (some day) refused
        assert not isinstance(orjson.loads(str(big)), int)
    assert codec.decode_event(codec.encode_event(event), revision=2) == event
    body = json.loads(codec.encode_header(Story().header)[5:])
    body["spec"]["env"] = {"BIG": big}
    body["spec"]["extensions"] = [{"type": "notify", "events": [], "sinks": [big]}]
    changed = json.dumps(body).encode()
    assert _by_fast_path(changed, True) is REFUSED
    try:
        decoded: object = codec.decode_header(_framed(changed), job="j")
    except jobdispatch.Unreadable:
        decoded = REFUSED
    assert repr(decoded) == repr(_by_converter(changed, True))


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each key of each object, each item of each list."""
    found = [at] if at else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


def _change(body: Any, path: tuple[Any, ...], how: str, new: Any) -> None:
    *parents, last = path
    holder = body
    for step in parents:
        holder = holder[step]
    if how == "delete":
        del holder[last]
    elif how == "add" and isinstance(holder, dict):
        holder[f"{last}_extra"] = new
    else:
        holder[last] = new


@settings(max_examples=300, deadline=None)
@given(stored=_stored, data=st.data())
def test_a_changed_value_the_fast_path_takes_is_the_converters_value(
    stored: tuple[bytes, Any], data: st.DataObject
) -> None:
    # Any place in the JSON (however deep) given any JSON value, deleted, or joined by an extra
    # key: the fast path declines, or gives exactly what the converter gives, and decode_event
    # / decode_header answer the converter's value or Unreadable.
    raw, value = stored
    header = isinstance(value, ev.Header)
    body = json.loads(raw[5:])
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(body)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        how = data.draw(st.sampled_from(("replace", "delete", "add")))
        _change(body, path, how, data.draw(_json))
    changed = json.dumps(body).encode()
    fast, slow = _by_fast_path(changed, header), _by_converter(changed, header)
    assert fast is REFUSED or repr(fast) == repr(slow), (fast, slow)
    try:
        decoded: object = _decode(_framed(changed), value)
    except jobdispatch.Unreadable:
        decoded = REFUSED
    assert repr(decoded) == repr(slow)


def test_json_only_the_standard_library_reads_is_still_read() -> None:
    # orjson refuses NaN, integers past 64 bits and lone surrogates; the standard library's
    # parser reads them, as before, and the converter decides (here: a detail holding a lone
    # surrogate, a field orjson cannot parse).
    at, by = datetime(2026, 1, 1, tzinfo=UTC), t.Actor.human("x")
    event = ev.HoldLifted(at=at, by=by, token=1, instance=2)
    body = json.loads(codec.encode_event(event)[5:])
    body["reason"] = "\udcff"
    raw = json.dumps(body).encode()
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(raw)
    assert codec.decode_event(raw, revision=2) == attrs.evolve(event, reason="\udcff")


def test_actors_read_again_are_shared_yet_each_keeps_its_kind() -> None:
    base = ev.Settled(at=datetime(2026, 1, 1, tzinfo=UTC), by=t.Actor.supervisor("s1"), token=1)
    other = attrs.evolve(base, by=t.Actor.human("s1"))
    first, second, third = (
        codec.decode_event(codec.encode_event(e), revision=1) for e in (base, base, other)
    )
    assert first.by is second.by  # structured once, then shared (an Actor is immutable)
    assert third.by == t.Actor.human("s1") and third.by != first.by
