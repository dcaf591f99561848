"""The one cattrs converter for every dispatch type, and the record's JSON encoding.

Datetimes are ISO 8601 with their UTC offset (naive datetimes are refused: a record outlives the
machine's timezone), durations are seconds, enums their words. Events and spec extensions carry
a ``type`` tag; every event also carries the schema version ``v`` it was written with, and a
record holding an unknown tag or a newer version is refused with :class:`Unreadable` (an
:class:`Invalid`) naming the revision, never skipped.

A stored value is the JSON behind a 5-byte frame: a frame version byte (``0x01``) and the
CRC-32 of the JSON, big-endian. Decoding checks the CRC first, so a stored value that changed
after it was written (a flipped bit, a torn page) is reported as :class:`Unreadable` instead of
decoding into a different record. A value that starts with ``{`` was written before values had
a frame; it is still read, unchecked (docs/specs/0002-record.md, D3).
"""

from __future__ import annotations

import json
import struct
import zlib
from datetime import datetime, timedelta
from functools import cache
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from jobdispatch.errors import Invalid, Unreadable
from jobdispatch.records import events as ev
from jobdispatch.structurers import Declined, Structurer, compile_structurer
from jobdispatch.triggers import (
    ESCALATION_CLASSES,
    TRIGGER_CLASSES,
    EscalationId,
    Trigger,
    parse_escalation,
    parse_trigger,
)
from jobdispatch.types import (
    EXTENSIONS,
    Actor,
    ActorKind,
    AdapterValue,
    Extension,
    JobSpec,
    Plan,
    RecoveryPolicy,
    Resources,
    Rule,
    RuleAssignment,
    StallAssignment,
)

T = TypeVar("T")

__all__ = [
    "converter",
    "decode_event",
    "decode_header",
    "encode_event",
    "encode_header",
    "output_converter",
]


def _unstructure_datetime(value: datetime) -> str:
    if value.tzinfo is None:
        msg = f"naive datetime {value.isoformat()} cannot be recorded; give it a timezone"
        raise Invalid(msg)
    return value.isoformat()


def _structure_datetime(value: Any, _: type) -> datetime:
    if not isinstance(value, str):
        msg = f"expected an ISO 8601 time, got {value!r}"
        raise ValueError(msg)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        msg = f"time {value!r} has no UTC offset"
        raise ValueError(msg)
    return parsed


def _structure_timedelta(value: Any, _: type) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"expected a duration in seconds, got {value!r}"
        raise ValueError(msg)
    return timedelta(seconds=value)


def _structure_adapter_value(value: Any, _: Any) -> AdapterValue:
    if isinstance(value, str | int | bool):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    msg = f"expected a string, number, true/false or list of strings, got {value!r}"
    raise ValueError(msg)


def _structure_actor(value: Any, _: type) -> Actor:
    """An actor as recorded, through :meth:`Actor.recorded`: a record written before actor ids
    were checked (``human:`` with an empty id) still reads; only new actors are checked."""
    if not isinstance(value, dict) or set(value) != {"kind", "id"}:
        msg = f"an actor must be an object with a kind and an id, got {value!r}"
        raise ValueError(msg)
    if not isinstance(value["id"], str):
        msg = f"an actor's id must be a string, got {value['id']!r}"
        raise ValueError(msg)
    return Actor.recorded(ActorKind(value["kind"]), value["id"])


def _keyword_dodged(cls: Any) -> bool:
    """An attrs class with a field named ``for_`` or ``from_``: a trailing underscore that only
    dodges a Python keyword."""
    return attrs.has(cls) and any(a.name.endswith("_") for a in attrs.fields(cls))


def _unstructure_as_written(c: cattrs.Converter) -> Any:
    """A hook factory unstructuring ``for_`` as ``for``, ``from_`` as ``from``."""

    def factory(cls: Any) -> Any:
        renamed: dict[str, Any] = {
            a.name: override(rename=a.name.rstrip("_"))
            for a in attrs.fields(cls)
            if a.name.endswith("_")
        }
        return make_dict_unstructure_fn(cls, c, **renamed)

    return factory


def _make(*, written_names: bool = False) -> cattrs.Converter:
    c = cattrs.Converter(forbid_extra_keys=True)
    if written_names:
        # First, so that every hook generated below (JobSpec's, the events') binds to these.
        c.register_unstructure_hook_factory(_keyword_dodged, _unstructure_as_written(c))
    c.register_structure_hook(Actor, _structure_actor)
    c.register_unstructure_hook(datetime, _unstructure_datetime)
    c.register_structure_hook(datetime, _structure_datetime)
    c.register_unstructure_hook(timedelta, lambda d: d.total_seconds())
    c.register_structure_hook(timedelta, _structure_timedelta)

    tags = {cls: tag for tag, cls in EXTENSIONS.items()}

    def unstructure_extension(value: Any) -> dict[str, Any]:
        body = plain_ext[type(value)](value)
        return {"type": tags[type(value)], **body}

    def structure_extension(value: Any, _: type) -> Any:
        if not isinstance(value, dict) or value.get("type") not in EXTENSIONS:
            msg = f"unknown spec extension {value!r} (known: {', '.join(EXTENSIONS)})"
            raise ValueError(msg)
        cls = EXTENSIONS[value["type"]]
        body = {k: v for k, v in value.items() if k != "type"}
        return plain_ext_s[cls](body, cls)

    plain_ext: dict[type, Any] = {cls: make_dict_unstructure_fn(cls, c) for cls in tags}
    plain_ext_s: dict[type, Any] = {
        cls: make_dict_structure_fn(cls, c, _cattrs_forbid_extra_keys=True) for cls in tags
    }
    for cls in tags:
        c.register_unstructure_hook(cls, unstructure_extension)
        c.register_structure_hook(cls, structure_extension)
    # The union a spec's extensions are typed as: each value by its own tag.
    c.register_structure_hook_func(lambda t: t == Extension, structure_extension)
    c.register_unstructure_hook_func(lambda t: t == Extension, unstructure_extension)

    # A spec that asks for no resources is written as it was before resources existed, and a
    # resources table holds only what was asked: records stay small and old ones read the same.
    c.register_unstructure_hook(
        Resources, make_dict_unstructure_fn(Resources, c, _cattrs_omit_if_default=True)
    )
    # Fields added after records existed (a rule's charge, a spec's progress source, stall rule
    # and pending deadline, a plan's stall assignment, a rule's charged count) are written only
    # when set, so a
    # record that does not use them is byte for byte what it was before they existed.
    omit = override(omit_if_default=True)
    rule_fields: dict[str, Any] = {}
    if written_names:
        rule_fields["for_"] = override(rename="for")
    else:
        rule_fields["charge"] = omit
    c.register_unstructure_hook(Rule, make_dict_unstructure_fn(Rule, c, **rule_fields))
    if not written_names:
        # What commands print (``--json``) shows every key, so its shape is fixed (a plan's
        # ``stall`` is null, a rule's ``charged`` 0); only records leave them out.
        c.register_unstructure_hook(
            RuleAssignment, make_dict_unstructure_fn(RuleAssignment, c, charged=omit)
        )
    # Before JobSpec's, which binds the hook of each of its fields when it is made.
    c.register_unstructure_hook(
        RecoveryPolicy,
        make_dict_unstructure_fn(RecoveryPolicy, c, exclude_suspects_for=omit),
    )
    c.register_unstructure_hook(
        JobSpec,
        make_dict_unstructure_fn(
            JobSpec, c, resources=omit, progress=omit, stall=omit, pending=omit
        ),
    )
    if not written_names:
        # Before Plan's, which binds its fields' hooks when it is made.
        c.register_unstructure_hook(
            StallAssignment,
            make_dict_unstructure_fn(StallAssignment, c, output_growth=omit),
        )
        c.register_unstructure_hook(Plan, make_dict_unstructure_fn(Plan, c, stall=omit))
    c.register_structure_hook_func(lambda t: t == AdapterValue, _structure_adapter_value)
    # Triggers and escalation ids are recorded as the text they print, and read back through
    # their one parser: a text it refuses makes the record Unreadable, naming the revision.
    for id_cls in (*TRIGGER_CLASSES, *ESCALATION_CLASSES):
        c.register_unstructure_hook(id_cls, str)
    c.register_structure_hook_func(lambda t: t == Trigger, lambda v, _: parse_trigger(v))
    c.register_structure_hook_func(lambda t: t == EscalationId, lambda v, _: parse_escalation(v))

    # A firing's ``charged`` is said only under ``no-advance``; unsaid, it is left out, so the
    # events of other rules are written as they were before it existed.
    said: dict[type, dict[str, Any]] = {
        ev.SubmissionAuthorized: {"charged": omit, "exclude": omit, "exclude_until": omit},
        ev.RecoveryDecided: {"charged": omit},
    }
    plain = {
        cls: make_dict_unstructure_fn(cls, c, **said.get(cls, {}))
        for cls in ev.EVENT_TYPES.values()
    }
    plain_s = {
        cls: make_dict_structure_fn(cls, c, _cattrs_forbid_extra_keys=True)
        for cls in ev.EVENT_TYPES.values()
    }

    def unstructure_event(value: ev.Event) -> dict[str, Any]:
        return {"type": value.kind, "v": ev.SCHEMA_VERSION, **plain[type(value)](value)}

    def structure_event(value: Any, _: type) -> ev.Event:
        if not isinstance(value, dict):
            msg = f"an event must be an object, got {type(value).__name__}"
            raise ValueError(msg)
        tag = value.get("type")
        version = value.get("v")
        if not isinstance(version, int) or version > ev.SCHEMA_VERSION or version < 1:
            msg = (
                f"event schema version {version!r} is not one this version reads "
                f"(1 to {ev.SCHEMA_VERSION})"
            )
            raise ValueError(msg)
        cls = ev.EVENT_TYPES.get(tag) if isinstance(tag, str) else None
        if cls is None:
            msg = f"unknown event type {tag!r}"
            raise ValueError(msg)
        body = {k: v for k, v in value.items() if k not in ("type", "v")}
        return plain_s[cls](body, cls)

    for cls in ev.EVENT_TYPES.values():
        c.register_unstructure_hook(cls, unstructure_event)
        c.register_structure_hook(cls, structure_event)
    c.register_unstructure_hook(ev.Event, unstructure_event)
    c.register_structure_hook(ev.Event, structure_event)
    return c


#: The converter every package uses for dispatch's types.
converter = _make()


@cache
def output_converter() -> cattrs.Converter:
    """The converter for what commands print as JSON (``--json``): the record's, except that a
    field named with a trailing underscore only to dodge a Python keyword is printed by the
    name the job file and the docs use (a rule's ``for``, a transition's ``from``). Records
    keep the names they were written with; this converter only unstructures. Built on first
    use, so commands that print no JSON do not pay for it."""
    return _make(written_names=True)


#: What decoding bad bytes can raise, all turned into the codec's typed error. RecursionError:
#: JSON nested deeper than the interpreter's stack (json.loads recurses per level).
_DECODE_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    RecursionError,
    OverflowError,
    Invalid,  # a value type's own check, raised while structuring
    cattrs.BaseValidationError,
)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc)) or str(exc)
    return str(exc)


#: The first byte of a framed value: frame version 1, a CRC-32 of the JSON that follows.
_FRAME_CRC32 = 0x01
_CRC = struct.Struct(">I")
_FRAME_LEN = 1 + _CRC.size
#: How a value written before frames existed starts: it is bare JSON, and always an object.
_LEGACY_START = ord("{")


def _seal(body: bytes) -> bytes:
    return bytes((_FRAME_CRC32,)) + _CRC.pack(zlib.crc32(body)) + body


def _unseal(data: bytes, *, job: str, revision: int) -> bytes:
    """The JSON inside a stored value, checked against its CRC; a legacy value (bare JSON,
    from before frames) as it is. Anything else is Unreadable, naming the value."""
    first = data[0] if data else None
    if first == _FRAME_CRC32 and len(data) >= _FRAME_LEN:
        body = data[_FRAME_LEN:]
        if _CRC.unpack_from(data, 1)[0] == zlib.crc32(body):
            return body
    elif first == _LEGACY_START:
        return data
    raise _unsealing_error(data, job=job, revision=revision)


def _where(job: str, revision: int) -> str:
    """How an error names a stored value: its record and revision (0: the header)."""
    if revision == 0:
        return f"record {job or '?'} revision 0 (header)"
    return f"record {job or '?'} revision {revision}"


def _unsealing_error(data: bytes, *, job: str, revision: int) -> Unreadable:
    """What is wrong with a stored value :func:`_unseal` refused, said in words (apart, so the
    path every healthy value takes builds no message)."""
    where = _where(job, revision)
    if not data:
        msg = f"{where}: the stored value is empty"
    elif data[0] != _FRAME_CRC32:
        msg = (
            f"{where}: the stored value starts with byte 0x{data[0]:02x}, which no version of "
            "this store writes: it is damaged, or a newer version wrote it"
        )
    elif len(data) < _FRAME_LEN:
        msg = f"{where}: the stored value is cut short ({len(data)} bytes)"
    else:
        (stored,) = _CRC.unpack_from(data, 1)
        actual = zlib.crc32(data[_FRAME_LEN:])
        msg = (
            f"{where}: the stored value is damaged: its checksum is {actual:08x}, "
            f"{stored:08x} was written"
        )
    return Unreadable(msg, job=job or None, revision=revision)


def encode_header(header: ev.Header) -> bytes:
    """The header as compact UTF-8 JSON, framed with its CRC-32 (what a store keeps)."""
    body = json.dumps(converter.unstructure(header), separators=(",", ":"), sort_keys=True)
    return _seal(body.encode())


def decode_header(data: bytes, *, job: str = "") -> ev.Header:
    """A header from its stored value; Unreadable names the job and what is wrong."""
    body = _unseal(data, job=job, revision=0)
    try:
        return _fast_header_of(_loads(body))
    except Exception:  # noqa: S110 (anything the fast path does not take: see below)
        pass
    # The converter decides whatever the compiled structurer declined, and says what is wrong.
    try:
        raw = json.loads(body)
        if (
            isinstance(raw, dict)
            and isinstance(raw.get("schema"), int)
            and raw["schema"] > ev.SCHEMA_VERSION
        ):
            msg = (
                f"written by a newer version (schema {raw['schema']}, "
                f"this reads {ev.SCHEMA_VERSION})"
            )
            raise ValueError(msg)
        return converter.structure(raw, ev.Header)
    except _DECODE_ERRORS as exc:
        msg = f"{_where(job, 0)}: {_describe(exc)}"
        raise Unreadable(msg, job=job or None, revision=0) from exc


def encode_event(event: ev.Event) -> bytes:
    """One event as compact UTF-8 JSON, tagged with its type and the schema version, framed
    with its CRC-32 (what a store keeps)."""
    body = json.dumps(converter.unstructure(event, ev.Event), separators=(",", ":"), sort_keys=True)
    return _seal(body.encode())


def decode_event(data: bytes, *, revision: int, job: str = "") -> ev.AnyEvent:
    """One event from its stored value; Unreadable names the job and the revision."""
    body = _unseal(data, job=job, revision=revision)
    try:
        return _fast_event_of(_loads(body))  # type: ignore[return-value]
    except Exception:  # noqa: S110 (anything the fast path does not take: see below)
        pass
    # The converter decides whatever the compiled structurer declined, and says what is wrong.
    try:
        event = converter.structure(json.loads(body), ev.Event)
    except _DECODE_ERRORS as exc:
        msg = f"{_where(job, revision)}: {_describe(exc)}"
        raise Unreadable(msg, job=job or None, revision=revision) from exc
    return event  # type: ignore[return-value]


#: The fast path's JSON parser (a few times the standard library's speed). It refuses what the
#: standard library's reads (NaN, infinities, a lone surrogate): that goes to the converter's
#: path, which parses with the standard library's, the judge of what a record may hold, as it
#: always was. It reads an integer past 64 bits as a float: the structurers check every number
#: to be exactly an int, and decline any float (``jobdispatch.structurers``), so such a value
#: takes the converter's path too.
_loads = orjson.loads

#: The keys an event's JSON holds beside its fields: its type's tag and its schema version.
_EVENT_TAGS = frozenset({"type", "v"})


def _fast_datetime(value: Any) -> datetime:
    """:func:`_structure_datetime` for the fast path: a time as written, else declined."""
    if value.__class__ is not str:
        raise Declined(value)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise Declined(value)
    return parsed


def _fast_timedelta(value: Any) -> timedelta:
    """:func:`_structure_timedelta` for the fast path: seconds as written, else declined. (A
    float orjson made of an integer past 64 bits is more seconds than a timedelta holds: an
    OverflowError, so declined, as the converter refuses it.)"""
    if value.__class__ is not float and value.__class__ is not int:
        raise Declined(value)
    return timedelta(seconds=value)


#: Actors read so far, by their kind's word and id. An actor is immutable and a record names a
#: few (its supervisor on every observation), so each is structured once and then shared.
_actors: dict[tuple[str, str], Actor] = {}
_ACTORS_KEPT = 4096


def _fast_actor(value: Any) -> Actor:
    """:func:`_structure_actor`, each actor structured once (:data:`_actors`)."""
    if value.__class__ is not dict or len(value) != 2:
        raise Declined(value)
    key = (value["kind"], value["id"])
    actor = _actors.get(key)
    if actor is None:
        actor = _structure_actor(value, Actor)
        if len(_actors) < _ACTORS_KEPT:
            _actors[key] = actor
    return actor


#: The fast path's own functions for types the converter has a hook for (the others' hooks are
#: called as they are): each returns what the hook would, or declines.
_DIRECT: dict[Any, Structurer[Any]] = {
    datetime: _fast_datetime,
    timedelta: _fast_timedelta,
    Actor: _fast_actor,
}


def _fast_header_of(raw: Any) -> ev.Header:
    """A header's parsed JSON structured by the fast path, which declines any schema but this
    version's (the converter's path then names a newer one)."""
    if raw["schema"] != ev.SCHEMA_VERSION:
        raise Declined(raw["schema"])
    return _fast_header()(raw)


def _fast_event_of(raw: Any) -> ev.Event:
    """An event's parsed JSON structured by the fast path, which declines a schema version
    this version does not read (the converter's path then names it) and an unknown type."""
    version = raw["v"]
    if version.__class__ is not int or not 1 <= version <= ev.SCHEMA_VERSION:
        raise Declined(version)
    return _fast_event(raw["type"])(raw)


@cache
def _fast_header() -> Structurer[ev.Header]:
    """The compiled structurer of a header, made on first use (module import stays cheap)."""
    return compile_structurer(converter, ev.Header, direct=_DIRECT)


@cache
def _fast_event(tag: str) -> Structurer[ev.Event]:
    """The compiled structurer of the event type tagged ``tag``, made on its first read."""
    return compile_structurer(converter, ev.EVENT_TYPES[tag], also_keys=_EVENT_TAGS, direct=_DIRECT)


def structure(data: Any, cls: type[T]) -> T:
    """``converter.structure`` with errors turned into :class:`Invalid`."""
    try:
        return converter.structure(data, cls)
    except (ValueError, TypeError, KeyError, cattrs.BaseValidationError) as exc:
        msg = f"{cls.__name__}: {_describe(exc)}"
        raise Invalid(msg) from exc
