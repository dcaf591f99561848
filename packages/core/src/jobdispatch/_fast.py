"""Cheaper construction of frozen value types on the job level's hot path.

``fold`` builds a :class:`~jobdispatch.job.Transition` and a :class:`~jobdispatch.types.Cause`
for every committed transition it replays, and the attrs-generated ``__init__`` of a frozen
slotted class pays one bound ``object.__setattr__`` call per field (and keyword parsing).
:func:`maker` returns a function that builds the *same* instance (same class, same field
values, so equal, with the same hash and repr) by setting each slot through its descriptor:
10 to 30 % fewer instructions per object. A mutable attrs class needs none of this (its
``__init__`` already stores plainly), so it is refused, and so is any class whose
``__init__`` does more than assign its arguments (converters, validators, ``on_setattr``
hooks, pre- or post-init, fields left out of ``__init__``): the shortcut can never skip
something the class's own constructor would have done.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["blank", "maker"]

T = TypeVar("T")


def _plain_fields(cls: type) -> tuple[Any, ...]:
    """The fields of the slotted attrs class ``cls``, refusing (TypeError) a class whose
    ``__init__`` does more than assign its arguments: hooks, converters, validators,
    ``on_setattr``, fields left out of ``__init__`` or renamed in it."""
    if not attrs.has(cls) or "__slots__" not in cls.__dict__:
        msg = f"{cls.__name__} is not a slotted attrs class"
        raise TypeError(msg)
    for hook in ("__attrs_pre_init__", "__attrs_post_init__", "__attrs_init_subclass__"):
        if hasattr(cls, hook):
            msg = f"{cls.__name__} has {hook}; build it with its own __init__"
            raise TypeError(msg)
    fields = attrs.fields(cls)
    for field in fields:
        if (
            field.converter is not None
            or field.validator is not None
            or field.on_setattr not in (None, attrs.setters.NO_OP)
            or not field.init
            or field.alias != field.name
        ):
            msg = f"{cls.__name__}.{field.name} is not a plain field"
            raise TypeError(msg)
    return tuple(fields)


def maker(cls: type[T]) -> Callable[..., T]:
    """A constructor of ``cls`` taking every field positionally, in declaration order, with no
    defaults: ``maker(Cause)(kind, provenance, detail, exit_code, signal, actor)`` equals
    ``Cause(kind, provenance, detail, exit_code, signal, actor)``."""
    fields = _plain_fields(cls)
    if cls.__setattr__ is object.__setattr__:
        msg = f"{cls.__name__} is not frozen; its own __init__ is as cheap"
        raise TypeError(msg)
    names = []
    setters: dict[str, Any] = {}
    for i, field in enumerate(fields):
        descriptor = inspect.getattr_static(cls, field.name)
        if type(descriptor).__name__ != "member_descriptor":
            msg = f"{cls.__name__}.{field.name} is not a slot"
            raise TypeError(msg)
        names.append(field.name)
        setters[f"_set{i}"] = descriptor.__set__
    body = "".join(f"    _set{i}(obj, {name})\n" for i, name in enumerate(names))
    source = f"def make({', '.join(names)}):\n    obj = _new(_cls)\n{body}    return obj\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, **setters}
    exec(compile(source, f"<maker of {cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    make: Callable[..., T] = namespace["make"]
    make.__doc__ = f"Build a {cls.__qualname__} from every field, positionally."
    return make


_LITERALS: dict[Any, str] = {list: "[]", dict: "{}", set: "set()"}


def blank(cls: type[T]) -> Callable[..., T]:
    """A constructor of the mutable attrs class ``cls`` taking its fields that have no default,
    positionally; every other field gets its default (a ``Factory(list)``, ``dict`` or ``set``
    as a fresh literal). ``blank(Job)(header, revision)`` equals ``Job(header=header,
    revision=revision)``, without the keyword parsing and factory calls of attrs' ``__init__``.
    Refused, as by :func:`maker`, for any class whose ``__init__`` does more than assign."""
    fields = _plain_fields(cls)
    if cls.__setattr__ is not object.__setattr__:
        msg = f"{cls.__name__} is frozen or hooks __setattr__; use maker"
        raise TypeError(msg)
    params: list[str] = []
    body: list[str] = []
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, field in enumerate(fields):
        default = field.default
        if default is attrs.NOTHING:  # attrs puts these first (or makes them keyword-only)
            params.append(field.name)
            value = field.name
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            if default.takes_self:
                msg = f"{cls.__name__}.{field.name}'s factory takes self"
                raise TypeError(msg)
            if default.factory in _LITERALS:
                value = _LITERALS[default.factory]
            else:
                namespace[f"_factory{i}"] = default.factory
                value = f"_factory{i}()"
        else:
            namespace[f"_default{i}"] = default
            value = f"_default{i}"
        body.append(f"    obj.{field.name} = {value}\n")
    source = (
        f"def make({', '.join(params)}):\n    obj = _new(_cls)\n{''.join(body)}    return obj\n"
    )
    exec(compile(source, f"<blank {cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    make: Callable[..., T] = namespace["make"]
    make.__doc__ = f"Build a {cls.__qualname__} with every defaulted field at its default."
    return make
