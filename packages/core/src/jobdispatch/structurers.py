"""Structure functions compiled once per attrs class: the fast path of reading a record.

A command's first read of a store decodes every event of every record it reads (docs/specs/
0016-goodput.md, D6: 10,000 records, 200,000 events), and cattrs' general structuring (a
dispatch per field, a try per field to collect detailed errors, an enum's ``__call__``) was most
of that time. The functions made here do the same work for the values a record holds, written
out once per class as plain Python: a dict lookup per enum word, an exact type check per string
or number, the class called with its keyword arguments.

They are a fast path, never a second definition of the format: the cattrs converter stays the
one definition (``jobdispatch.codec``). A compiled function takes only what it is sure the
converter would turn into the very same value, and raises :class:`Declined` for anything else
(a missing or extra key, a number where a string was expected, an unknown enum word...), after
which the caller asks the converter, which decodes it or says precisely what is wrong. Every type
this module does not write out itself (those the converter has a hook of its own for: a trigger,
a spec extension, a mapping) is structured by the converter's hook for it, so its rules live in
one place; the caller may give faster equivalents of some hooks (``direct``: the codec's for a
time, a duration and an actor). Property tests hold the two paths equal on every value written
and on values changed at any depth (``packages/core/tests/test_codec.py``).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs

__all__ = ["Declined", "Structurer", "compile_structurer"]

T = TypeVar("T")

Structurer = Callable[[Any], T]


class Declined(Exception):
    """The fast path does not take this value; the converter decides what it is."""


def _decline(value: object) -> Any:
    raise Declined(repr(value)[:80])


def compile_structurer(
    converter: cattrs.Converter,
    cls: type[T],
    *,
    also_keys: frozenset[str] = frozenset(),
    direct: Mapping[Any, Structurer[Any]] | None = None,
) -> Structurer[T]:
    """A function structuring a dict into ``cls`` as ``converter`` would, or raising
    :class:`Declined` (or any exception) where it cannot be sure to. ``also_keys``: keys the
    dict may hold beside the class's fields, ignored (an event's ``type`` and ``v`` tags).
    ``direct``: for some types the converter has a hook of its own for, a one-argument function
    to call instead, which returns what the hook would or raises."""
    made: Structurer[T] = _Compiler(converter, direct or {}).attrs_class(cls, also_keys)
    return made


#: The types a field's value is checked to be exactly. Not float: no record type has a float
#: field, and a float is declined wherever a hook would get one (:func:`_holds_float`).
_PRIMITIVES = (str, int, bool)


def _holds_float(value: Any) -> bool:
    """Whether a parsed JSON value holds a float anywhere. orjson parses an integer past 64
    bits as a float (18446744073709551616 as 1.8446744073709552e+19), where the standard
    library's parser keeps it whole, and a hook may make text of either (``str``): so a value
    holding a float is not handed to a hook by the fast path, it is declined."""
    cls = value.__class__
    if cls is float:
        return True
    if cls is dict:
        return any(_holds_float(v) for v in value.values())
    if cls is list:
        return any(_holds_float(v) for v in value)
    return False


class _Compiler:
    """Writes the functions of one class and of every attrs class its fields hold, each once.

    A field's value is structured by an expression written into its class's function: a type
    check for a string, number or true/false, a dict lookup for an enum's word, a test for
    None, a list comprehension for a tuple; a call only for another attrs class and for the
    types structured by a hook (or by a ``direct`` function)."""

    def __init__(self, converter: cattrs.Converter, direct: Mapping[Any, Structurer[Any]]) -> None:
        self.converter = converter
        self.direct = dict(direct)
        self.made: dict[Any, Callable[[Any], Any]] = {}

    def attrs_class(
        self, cls: type[Any], also_keys: frozenset[str] = frozenset()
    ) -> Callable[[Any], Any]:
        fields = attrs.fields(cls)
        if any(not f.init or f.name in also_keys for f in fields) or any(
            isinstance(f.default, attrs.Factory) and f.default.takes_self  # type: ignore[arg-type]
            for f in fields
        ):
            return self.hook(cls)  # not a shape written out here: the converter's own
        hints = typing.get_type_hints(cls)
        code = _Code({"_cls": cls, "_dict": dict})
        args: list[str] = []
        for field in fields:
            value = self.expr(hints[field.name], f"_d[{field.name!r}]", code)
            if field.default is attrs.NOTHING:
                args.append(f"{field.alias}={value}")
                continue
            if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                default = f"{code.name(field.default.factory, '_default')}()"
            else:
                default = code.name(field.default, "_default")
            args.append(f"{field.alias}=({value} if {field.name!r} in _d else {default})")
        keys = code.name(frozenset(f.name for f in fields) | also_keys, "_keys")
        return code.function(
            f"structure_{cls.__name__}",
            # A dict's keys view compared with a set: no set made (``issuperset`` makes one).
            f"    if _d.__class__ is not _dict or not _d.keys() <= {keys}:\n"
            "        _decline(_d)\n"
            f"    return _cls({', '.join(args)})\n",
            where=cls.__qualname__,
        )

    def expr(self, tp: Any, source: str, code: _Code) -> str:
        """An expression structuring the value ``source`` (a name, or a key of ``_d``) as
        ``tp``; a source that is not a plain name is read once, into a name of its own."""
        if tp in self.direct:
            return f"{code.name(self.direct[tp], '_direct')}({source})"
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp in _PRIMITIVES:
            v, bind = code.bind(source)
            return f"({v} if {bind}.__class__ is {code.name(tp, '_type')} else _decline({v}))"
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            (inner,) = (a for a in args if a is not type(None))
            v, bind = code.bind(source)
            return f"(None if {bind} is None else {self.expr(inner, v, code)})"
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            v, bind = code.bind(source)
            x = code.temporary()
            item = self.expr(args[0], x, code)
            return (
                f"(tuple([{item} for {x} in {v}]) if {bind}.__class__ is _list else _decline({v}))"
            )
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            # Only the words the converter reads back as themselves; an unknown word (or a
            # value that is no string) is a KeyError (a TypeError), and the converter says it.
            words = {m.value: m for m in tp if isinstance(m.value, str)}
            return f"{code.name(words, '_words')}[{source}]"
        if isinstance(tp, type) and attrs.has(tp) and self._generated(tp):
            if tp not in self.made:
                self.made[tp] = self.attrs_class(tp)
            return f"{code.name(self.made[tp], '_structure')}({source})"
        return f"{code.name(self.hook(tp), '_hook')}({source})"

    def _generated(self, tp: type[Any]) -> bool:
        """Whether the converter structures ``tp`` with the dict function cattrs generates for
        an attrs class (and not with a hook of its own, which must then be the one to run)."""
        hook = self.converter.get_structure_hook(tp)
        code = getattr(hook, "__code__", None)
        return code is not None and code.co_filename.startswith("<cattrs generated structure")

    def hook(self, tp: Any) -> Callable[[Any], Any]:
        """The converter's own hook for ``tp``, called as cattrs calls it."""
        hook = self.converter.get_structure_hook(tp)

        def structure_by_hook(value: Any) -> Any:
            if _holds_float(value):
                _decline(value)
            return hook(value, tp)

        return structure_by_hook


class _Code:
    """The names one generated function refers to, and its temporaries."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = {"_decline": _decline, "_list": list, **names}
        self.count = 0

    def name(self, value: object, prefix: str) -> str:
        """A fresh global name of the function for ``value``."""
        self.count += 1
        name = f"{prefix}{self.count}"
        self.names[name] = value
        return name

    def temporary(self) -> str:
        self.count += 1
        return f"_t{self.count}"

    def bind(self, source: str) -> tuple[str, str]:
        """A name for the value ``source``, and the text to write where it is first read (an
        assignment expression when ``source`` is not a plain name)."""
        if source.isidentifier():
            return source, source
        v = self.temporary()
        return v, f"({v} := {source})"

    def function(self, name: str, body: str, *, where: str) -> Callable[[Any], Any]:
        source = f"def {name}(_d):\n{body}"
        # The source is made above from attrs fields and types, never from outside text.
        exec(compile(source, f"<compiled structurer {where}>", "exec"), self.names)  # noqa: S102
        made: Callable[[Any], Any] = self.names[name]
        return made
