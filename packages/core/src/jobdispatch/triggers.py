"""Triggers and escalation ids: what caused a decision, and which escalation a person gets.

Both are written into the durable record as text (``end:o1:0``, ``rule:2:launch:1``). Here they
are values: a closed set of frozen classes, each with one way to print (``str``) and one way to
parse (:func:`parse_trigger`, :func:`parse_escalation`), so no reader splits strings of its own
and a misspelt trigger is a type error, not a record nobody can match. The codec prints and
parses them at the record's edge, so every event, fold and checker holds the value.

The grammar: a word, then the fields of its class in order, joined by ``:``. Numbers are
written in their one canonical decimal form (no sign, no leading zero, ``-1`` only where a class
allows it), so every text parse accepts prints back to itself and every value parses back to
itself. At most one field takes free text (an object id, or a nested trigger): it takes what
the numbers around it leave, so an object id may itself contain ``:``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Generic, TypeVar, cast

import attrs

from jobdispatch.errors import Invalid

__all__ = [
    "CLEANUP",
    "ESCALATION_CLASSES",
    "SUBMIT",
    "TRIGGER_CLASSES",
    "Blind",
    "BudgetSpent",
    "Cleanup",
    "End",
    "EscalationId",
    "HoldExpired",
    "Launch",
    "NativeSpent",
    "Release",
    "Requeue",
    "RequeueFailed",
    "Resubmit",
    "Retry",
    "RuleEscalates",
    "Submit",
    "Trigger",
    "Unenforced",
    "Unresolved",
    "parse_escalation",
    "parse_trigger",
]


def _whole(least: int) -> Any:
    """A validator: an int (not a bool, which would print as a word) of at least ``least``."""

    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not int or value < least:
            msg = f"{attribute.name} must be a whole number from {least}, got {value!r}"
            raise ValueError(msg)

    return check


_COUNT = _whole(0)


def _text(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        msg = f"{attribute.name} must be text, got {value!r}"
        raise TypeError(msg)


#: A canonical decimal integer: what ``str(int)`` prints, and nothing else.
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _fields(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    """The fields of a trigger or escalation class, in their printed order."""
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(cast("type[attrs.AttrsInstance]", cls))
    return fields


class _Id:
    """Shared by every trigger and escalation id: the one way to print one."""

    #: The first word of the printed form; it names the class.
    word: ClassVar[str]

    def __str__(self) -> str:
        return ":".join([self.word, *(str(getattr(self, f.name)) for f in _fields(type(self)))])


@attrs.frozen
class _OfSubmission(_Id):
    """An id that names a submission; the shared field, never a value of its own."""

    submission: int = attrs.field(validator=_COUNT)


@attrs.frozen
class _AtRevision(_Id):
    """An id that names the record's revision of a request or a call."""

    revision: int = attrs.field(validator=_COUNT)


@attrs.frozen
class _OfInstance(_Id):
    """An id that names a hold instance."""

    instance: int = attrs.field(validator=_COUNT)


# ------------------------------------------------------------------ triggers


@attrs.frozen
class Submit(_Id):
    """The job's first submission (``submit``)."""

    word: ClassVar[str] = "submit"


@attrs.frozen
class End(_Id):
    """The end of run ``index`` of object ``ref`` (``end:REF:INDEX``); ``index`` is -1 for an
    object that ended with no run the backend showed. A rule fires at most once per end."""

    word: ClassVar[str] = "end"
    ref: str = attrs.field(validator=_text)
    index: int = attrs.field(validator=_whole(-1))


@attrs.frozen
class Launch(_OfSubmission):
    """Every attempt of submission ``submission`` was refused or abandoned (``launch:N``)."""

    word: ClassVar[str] = "launch"


@attrs.frozen
class Resubmit(_AtRevision):
    """A person's resubmit request, committed at revision ``revision`` (``resubmit:REV``)."""

    word: ClassVar[str] = "resubmit"


@attrs.frozen
class Release(_OfInstance):
    """The release of rule hold ``instance`` with a resume (``release:INSTANCE``)."""

    word: ClassVar[str] = "release"


@attrs.frozen
class Requeue(_AtRevision):
    """A person's requeue request, committed at revision ``revision`` (``requeue:REV``)."""

    word: ClassVar[str] = "requeue"


@attrs.frozen
class Retry(_AtRevision):
    """Another requeue call after the one issued at revision ``revision`` showed no effect
    (``retry:REV``)."""

    word: ClassVar[str] = "retry"


#: The one first-submission trigger (every ``Submit()`` equals it).
SUBMIT = Submit()

#: What caused a submission, a recovery or a requeue call.
Trigger = Submit | End | Launch | Resubmit | Release | Requeue | Retry
TRIGGER_CLASSES: tuple[type[Trigger], ...] = (
    Submit,
    End,
    Launch,
    Resubmit,
    Release,
    Requeue,
    Retry,
)


# ------------------------------------------------------------------ escalation ids


def _is_trigger(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, TRIGGER_CLASSES):
        msg = f"{attribute.name} must be a trigger, got {value!r}"
        raise TypeError(msg)


@attrs.frozen
class _RuleOf(_Id):
    """An escalation id that names a rule and the trigger it was asked to act on."""

    rule: int = attrs.field(validator=_COUNT)
    trigger: Trigger = attrs.field(validator=_is_trigger)


@attrs.frozen
class RuleEscalates(_RuleOf):
    """Rule ``rule`` escalates the end ``trigger`` (its action, or no object to act on)
    (``rule:N:TRIGGER``)."""

    word: ClassVar[str] = "rule"


@attrs.frozen
class Unenforced(_RuleOf):
    """Rule ``rule`` covered ``trigger`` but nobody enforces it (``unenforced:N:TRIGGER``)."""

    word: ClassVar[str] = "unenforced"


@attrs.frozen
class NativeSpent(_RuleOf):
    """The backend enforces rule ``rule`` and did not rerun ``trigger``
    (``native-spent:N:TRIGGER``)."""

    word: ClassVar[str] = "native-spent"


@attrs.frozen
class BudgetSpent(_Id):
    """Rule ``rule`` has spent its budget (``budget:N``)."""

    word: ClassVar[str] = "budget"
    rule: int = attrs.field(validator=_COUNT)


@attrs.frozen
class HoldExpired(_OfInstance):
    """Rule hold ``instance`` passed its deadline with nobody releasing it
    (``hold-expired:INSTANCE``)."""

    word: ClassVar[str] = "hold-expired"


@attrs.frozen
class Unresolved(_OfSubmission):
    """Submission ``submission`` has an attempt nobody can tell the outcome of
    (``unresolved:N``)."""

    word: ClassVar[str] = "unresolved"


@attrs.frozen
class RequeueFailed(_AtRevision):
    """The requeue call issued at revision ``revision`` failed for good
    (``requeue-failed:REV``)."""

    word: ClassVar[str] = "requeue-failed"


@attrs.frozen
class Blind(_AtRevision):
    """The job's progress stayed unreadable past its stall rule's ``blind_after``, from the
    ``progress-blind`` event at revision ``revision`` on (``blind:REV``): no stall can be
    declared meanwhile, so a hung job would burn its allocation unnoticed."""

    word: ClassVar[str] = "blind"


@attrs.frozen
class Cleanup(_Id):
    """Objects of a settled job are still not verified stopped past the cleanup deadline
    (``cleanup``)."""

    word: ClassVar[str] = "cleanup"


#: The one cleanup escalation (every ``Cleanup()`` equals it).
CLEANUP = Cleanup()

#: Which escalation a person gets; derived from its cause, so each is committed once.
EscalationId = (
    RuleEscalates
    | Unenforced
    | NativeSpent
    | BudgetSpent
    | HoldExpired
    | Unresolved
    | RequeueFailed
    | Blind
    | Cleanup
)
ESCALATION_CLASSES: tuple[type[EscalationId], ...] = (
    RuleEscalates,
    Unenforced,
    NativeSpent,
    BudgetSpent,
    HoldExpired,
    Unresolved,
    RequeueFailed,
    Blind,
    Cleanup,
)


# ------------------------------------------------------------------ the one parser

T = TypeVar("T")


class _Grammar(Generic[T]):
    """Parses the printed form of one closed set of classes, by their words and fields."""

    def __init__(self, what: str, classes: tuple[type[T], ...]) -> None:
        self.what = what
        self.a = f"an {what}" if what[0] in "aeiou" else f"a {what}"
        self.classes = {c.word: c for c in classes}  # type: ignore[attr-defined]
        self.forms = ", ".join(_form(c) for c in classes)

    def parse(self, text: object) -> T:
        if not isinstance(text, str):
            msg = f"{self.a} must be text, got {text!r}"
            raise Invalid(msg)
        word, colon, rest = text.partition(":")
        cls = self.classes.get(word)
        if cls is None:
            msg = f"{text!r} is not {self.a}: it starts with no known word (known: {self.forms})"
            raise Invalid(msg)
        fields = _fields(cls)
        parts = rest.split(":") if colon else []
        try:
            if len(parts) < len(fields) or (len(parts) > len(fields) and not _free(fields)):
                msg = f"{len(parts)} field(s) follow {word!r} where the form has {len(fields)}"
                raise ValueError(msg)
            values = _values(fields, parts)
            return cls(*values)
        except (ValueError, TypeError, Invalid) as exc:
            why = exc.message if isinstance(exc, Invalid) else str(exc)
            msg = f"{text!r} is not {self.a} of the form {_form(cls)}: {why}"
            raise Invalid(msg) from None


def _form(cls: type) -> str:
    return ":".join([cls.word, *(f.name.upper() for f in _fields(cls))])  # type: ignore[attr-defined]


def _free(fields: tuple[attrs.Attribute[Any], ...]) -> bool:
    return any(f.type is not int for f in fields)


def _number(text: str, name: str) -> int:
    if not _INTEGER.fullmatch(text) or text == "-0":
        msg = f"{name} {text!r} is not a whole number written plainly"
        raise ValueError(msg)
    return int(text)


def _values(fields: tuple[attrs.Attribute[Any], ...], parts: list[str]) -> list[object]:
    """The fields' values: numbers take one part each, from the left up to the free field and
    from the right after it; the free field takes what is left between."""
    free = next((i for i, f in enumerate(fields) if f.type is not int), None)
    if free is None:
        return [_number(p, f.name) for f, p in zip(fields, parts, strict=True)]
    after = len(fields) - free - 1
    head = [_number(p, f.name) for f, p in zip(fields[:free], parts[:free], strict=True)]
    tail_parts = parts[len(parts) - after :] if after else []
    tail = [_number(p, f.name) for f, p in zip(fields[free + 1 :], tail_parts, strict=True)]
    middle = ":".join(parts[free : len(parts) - after])
    field = fields[free]
    value: object = middle if field.type is str else parse_trigger(middle)
    return [*head, value, *tail]


for _cls in (
    _OfSubmission,
    _AtRevision,
    _OfInstance,
    _RuleOf,
    *TRIGGER_CLASSES,
    *ESCALATION_CLASSES,
):
    attrs.resolve_types(_cls, globals(), locals())

_TRIGGERS: _Grammar[Trigger] = _Grammar("trigger", TRIGGER_CLASSES)
_ESCALATIONS: _Grammar[EscalationId] = _Grammar("escalation id", ESCALATION_CLASSES)


def parse_trigger(text: object) -> Trigger:
    """The trigger ``text`` prints; Invalid, quoting the text and the forms a trigger takes,
    for anything else (so ``str(parse_trigger(s)) == s`` for every ``s`` it accepts)."""
    return _TRIGGERS.parse(text)


def parse_escalation(text: object) -> EscalationId:
    """The escalation id ``text`` prints; Invalid, quoting the text and the forms an id takes,
    for anything else."""
    return _ESCALATIONS.parse(text)
