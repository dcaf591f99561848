"""Triggers and escalation ids: one way to print, one way to parse, and the two agree.

The printed text is what the record holds, so these properties are what keep every record
readable: each value parses back from its text, and each text the parser (so the fold, which
reads the record through it) accepts prints back to itself, byte for byte.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobdispatch import codec
from jobdispatch.errors import Invalid, Unreadable
from jobdispatch.records import events as ev
from jobdispatch.testing import Story
from jobdispatch.triggers import (
    ESCALATION_CLASSES,
    TRIGGER_CLASSES,
    End,
    EscalationId,
    Launch,
    Requeue,
    Resubmit,
    Retry,
    RuleEscalates,
    Trigger,
    parse_escalation,
    parse_trigger,
)
from jobdispatch.types import Actor

triggers: st.SearchStrategy[Trigger] = st.from_type(Trigger)  # type: ignore[arg-type]
escalations: st.SearchStrategy[EscalationId] = st.from_type(EscalationId)  # type: ignore[arg-type]

#: Every word of the grammar, so drawn texts often start like a real one and test the fields.
_WORDS = sorted({c.word for c in (*TRIGGER_CLASSES, *ESCALATION_CLASSES)})
_pieces = st.sampled_from(["", "0", "1", "-1", "01", "-0", "7", " 1", "x", "a:b", "+1", "1e3"])
texts = st.one_of(
    st.text(max_size=30),
    st.builds(
        ":".join,
        st.lists(st.one_of(st.sampled_from(_WORDS), _pieces, st.text(max_size=4)), max_size=6),
    ),
    st.builds(str, triggers),
    st.builds(str, escalations),
)


@settings(max_examples=300, deadline=None)
@given(value=triggers)
def test_every_trigger_parses_back_from_its_text(value: Trigger) -> None:
    assert parse_trigger(str(value)) == value


@settings(max_examples=300, deadline=None)
@given(value=escalations)
def test_every_escalation_id_parses_back_from_its_text(value: EscalationId) -> None:
    assert parse_escalation(str(value)) == value


@settings(max_examples=500, deadline=None)
@given(text=texts)
def test_every_text_accepted_prints_back_to_itself(text: str) -> None:
    for parse in (parse_trigger, parse_escalation):
        refused = ""
        try:
            value: object = parse(text)
        except Invalid as exc:
            refused = exc.message
        if refused:
            assert repr(text) in refused  # refused, quoting the text
        else:
            assert str(value) == text


_AT = datetime(2026, 1, 1, tzinfo=UTC)
_BY = Actor.supervisor("sup")


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_the_record_reads_exactly_the_texts_the_parser_accepts(text: str) -> None:
    """The codec reads a recorded trigger through the parser: what it accepts folds into the
    same text when written again, and what it refuses makes the record Unreadable, naming the
    revision and the text."""
    event = ev.SubmissionAuthorized(at=_AT, by=_BY, n=1, trigger=parse_trigger("submit"))
    stored = codec.encode_event(event)
    body = stored[5:].replace(b'"trigger":"submit"', b'"trigger":' + _json(text))
    damaged = codec._seal(body)
    try:
        expected = parse_trigger(text)
    except Invalid:
        with pytest.raises(Unreadable, match=r"revision 4\b") as caught:
            codec.decode_event(damaged, revision=4, job="j")
        assert repr(text) in str(caught.value)
        return
    decoded = codec.decode_event(damaged, revision=4, job="j")
    assert isinstance(decoded, ev.SubmissionAuthorized) and decoded.trigger == expected
    assert codec.encode_event(decoded) == damaged


def _json(text: str) -> bytes:
    return json.dumps(text).encode()


def test_the_printed_forms_are_the_ones_records_hold() -> None:
    # The texts records written before these types existed hold: they must not change.
    assert str(End("o1", 0)) == "end:o1:0"
    assert str(End("default/jd-1-1", -1)) == "end:default/jd-1-1:-1"
    assert str(RuleEscalates(2, Launch(1))) == "rule:2:launch:1"
    assert str(Resubmit(7)) == "resubmit:7"
    assert parse_trigger("end:a:b:3") == End("a:b", 3)  # an id may hold ':'


def test_ids_of_different_kinds_with_the_same_fields_differ() -> None:
    assert cast(object, Resubmit(3)) != Requeue(3) and len({Resubmit(3), Requeue(3), Retry(3)}) == 3
    assert parse_trigger("requeue:3") == Requeue(3)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("end:o1:01", "index '01' is not a whole number written plainly"),
        ("end:o1", "end:REF:INDEX"),
        ("launch:-1", "submission must be a whole number from 0"),
        ("submit:", "1 field(s) follow 'submit' where the form has 0"),
        ("charge:1", "no known word (known: submit, end:REF:INDEX"),
        ("", "no known word"),
    ],
)
def test_a_bad_text_is_refused_naming_it_and_the_form(text: str, says: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_trigger(text)
    assert repr(text) in caught.value.message and says in caught.value.message


def test_a_nested_bad_trigger_names_both_texts() -> None:
    with pytest.raises(Invalid) as caught:
        parse_escalation("rule:0:charge:1")
    message = caught.value.message
    assert "'rule:0:charge:1' is not an escalation id of the form rule:RULE:TRIGGER" in message
    assert "'charge:1' is not a trigger" in message


def test_the_fold_refuses_a_trigger_used_twice_by_its_value() -> None:
    story = Story().launched(1, "o1")
    story.authorize(2, End("o1", 0)).authorize(3, End("o1", 0))
    with pytest.raises(Invalid, match="trigger 'end:o1:0' authorized twice"):
        story.fold()
