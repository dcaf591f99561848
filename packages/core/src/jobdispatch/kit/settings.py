"""Settings declared once: an attrs class whose fields carry key, schema, default and meaning.

Each adapter used to write its configuration twice, a JSON Schema and an attrs class with the
same keys, and a third time in the function that copied one into the other; a key added to one
and forgotten in another was refused, or silently dropped. Here a field is declared once (as
tox's ``add_config`` declares a key with its type, default and description), and everything
else is derived from the class:

* :func:`json_schema`, the schema the core checks a configuration against before the adapter
  sees it (registered as the adapter's ``schema``, rendered into the configuration reference);
* :meth:`ConfigSection.from_config`, the one constructor, which checks the configuration
  (every problem at once, each naming its key) and builds the settings.

A field is read as the schema's type says (a ``number`` as ``float``, an ``array`` as a tuple)
unless it names its own ``read``, which raises ``ValueError`` with a message for what the
schema cannot say; the message becomes a problem naming the key. A nested table is a
:func:`section` whose type is another :class:`ConfigSection`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self, cast

import attrs

from jobdispatch.config import validate_config
from jobdispatch.errors import Problem, ValidationError
from jobdispatch.types import Capability, Source, Support, Tristate

__all__ = [
    "CAPABILITIES_SCHEMA",
    "ConfigSection",
    "capabilities_setting",
    "json_schema",
    "path_setting",
    "probe_setting",
    "probe_ttl_setting",
    "seconds_setting",
    "section",
    "setting",
]

_META = "jobdispatch.kit.setting"


@attrs.frozen
class _Declared:
    """What one field declares: its key in the configuration, the schema of its value (or the
    section it is), what it means, how its value is read, and whether the key is required."""

    key: str | None
    schema: Mapping[str, Any]
    description: str
    read: Callable[[Any], Any] | None
    section: type[ConfigSection] | None
    required: bool | None


def setting(
    *,
    schema: Mapping[str, Any],
    description: str,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
    read: Callable[[Any], Any] | None = None,
    required: bool | None = None,
) -> Any:
    """One configuration key, declared once.

    Args:
        schema: the JSON Schema of the value (its description and default are added here).
        description: what the key means, for the schema and the configuration reference.
        default, factory: the value when the key is absent; neither makes the key required.
        key: the key, when it is not the attribute's name (``capabilities`` for ``declared``).
        read: turns the configuration's value into the attribute's, raising ``ValueError``
            with a message for what the schema cannot check.
        required: the key must be given even though the class has a default for direct use.
    """
    declared = _Declared(key, schema, description, read, None, required)
    if factory is not None:
        return attrs.field(factory=factory, metadata={_META: declared})
    return attrs.field(default=default, metadata={_META: declared})


def section(
    of: type[ConfigSection],
    *,
    description: str,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
) -> Any:
    """A nested table whose keys are the fields of ``of`` (``ssh.host``, ``runtime.name``)."""
    declared = _Declared(key, {}, description, None, of, None)
    if factory is not None:
        return attrs.field(factory=factory, metadata={_META: declared})
    return attrs.field(default=default, metadata={_META: declared})


def _plain_json(value: object) -> bool:
    return isinstance(value, bool | int | float | str)


def _fields(cls: type[ConfigSection]) -> tuple[attrs.Attribute[Any], ...]:
    found: tuple[attrs.Attribute[Any], ...] = attrs.fields(cast("type[attrs.AttrsInstance]", cls))
    return found


#: Each class's schema, derived once: it is asked for on every configuration checked.
_SCHEMAS: dict[type[ConfigSection], Mapping[str, Any]] = {}


def json_schema(cls: type[ConfigSection]) -> Mapping[str, Any]:
    """The JSON Schema of ``cls``'s configuration: one property per declared field, closed to
    every other key, requiring the keys that have no default. Read-only: it is shared."""
    found = _SCHEMAS.get(cls)
    if found is None:
        found = _SCHEMAS[cls] = _derive(cls)
    return found


def _derive(cls: type[ConfigSection]) -> Mapping[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in _fields(cls):
        declared: _Declared | None = field.metadata.get(_META)
        if declared is None:
            continue  # an attribute computed by the class, not read from the configuration
        key = declared.key or field.name
        node = dict(json_schema(declared.section) if declared.section else declared.schema)
        node["description"] = declared.description
        if declared.required or (declared.required is None and field.default is attrs.NOTHING):
            required.append(key)
        elif _plain_json(field.default):
            node["default"] = field.default
        properties[key] = node
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def _reader(schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    """How a value of this schema is read when its field names no ``read``."""
    kind = schema.get("type")
    if kind == "number":
        return float
    if kind == "array":
        return tuple
    return lambda value: value


def _read(cls: type[ConfigSection], config: Mapping[str, Any], at: str) -> Any:
    """Build ``cls`` from a configuration the schema has accepted; raise ValidationError with
    every value its field's ``read`` refuses."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for field in _fields(cls):
        declared: _Declared | None = field.metadata.get(_META)
        if declared is None:
            continue
        key = declared.key or field.name
        if key not in config:
            continue
        where = f"{at}{key}"
        try:
            if declared.section is not None:
                value = _read(declared.section, config[key], f"{where}.")
            else:
                value = (declared.read or _reader(declared.schema))(config[key])
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        except ValueError as exc:
            problems.append(Problem(where, str(exc)))
            continue
        values[field.alias or field.name] = value
    if problems:
        raise ValidationError(problems)
    return cls(**values)


class ConfigSection:
    """A configuration table declared with :func:`setting` and :func:`section` fields.

    A subclass is an attrs class (frozen, usually keyword-only) and names its ``subject``, the
    words every error about it begins with (``"slurm adapter configuration"``).
    """

    __slots__ = ()

    #: What the configuration is, as errors name it.
    subject: ClassVar[str] = "configuration"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Self:
        """Check ``config`` against the class's schema (unknown keys refused at every level)
        and against :meth:`conflicts`, then build the settings.

        Raises:
            ValidationError: every problem at once, each naming its key's path.
        """
        validate_config(config, json_schema(cls), subject=cls.subject)
        problems = list(cls.conflicts(config))
        if problems:
            raise ValidationError(problems, subject=cls.subject)
        try:
            built: Self = _read(cls, config, "")
        except ValidationError as exc:
            raise ValidationError(exc.problems, subject=cls.subject) from None
        return built

    @classmethod
    def conflicts(cls, config: Mapping[str, Any]) -> Iterable[Problem]:
        """Problems between keys that a schema could only state unclearly (``transport = "ssh"``
        without an ``ssh`` table): none by default. ``config`` has passed the schema."""
        return ()


#: The site's declarations: one answer per capability it names, overriding the probe's.
CAPABILITIES_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {c.value: {"enum": [str(t) for t in Tristate]} for c in Capability},
    "additionalProperties": False,
}


def _declarations(config: Mapping[str, str]) -> Mapping[Capability, Support]:
    return {
        Capability(k): Support(Tristate(v), Source.DECLARED, "declared by the site")
        for k, v in config.items()
    }


def capabilities_setting() -> Any:
    """The ``capabilities`` key, read as ``declared``: the site's own answers (``hold = "no"``),
    which take the place of what the adapter would probe or assume."""
    return setting(
        key="capabilities",
        schema=CAPABILITIES_SCHEMA,
        factory=dict,
        read=_declarations,
        description="the site's own answers (yes, no, unknown) for named capabilities, "
        "taking the place of what the adapter would probe or assume",
    )


#: A path as a configuration may give one: not empty, no NUL, no line break.
PATH_SCHEMA: Mapping[str, Any] = {"type": "string", "minLength": 1, "pattern": r"^[^\x00\n]+$"}


def path_setting(description: str) -> Any:
    """An optional path (a key file, a kubeconfig, a directory): None when not given."""
    return setting(schema=PATH_SCHEMA, default=None, description=description)


def probe_setting() -> Any:
    """The ``probe`` key of an adapter that asks its cluster about itself: false plans from the
    catalogue and the site's declarations alone, where the cluster is out of reach."""
    return setting(
        schema={"type": "boolean"},
        default=True,
        description="false: plan without asking the cluster about itself; what it would probe "
        "is unknown unless declared under capabilities",
    )


def probe_ttl_setting(default: float) -> Any:
    """The ``probe_ttl`` key: how long a probe's facts are kept (:mod:`jobdispatch.kit.facts`)."""
    return seconds_setting(
        default, most=86400, zero=True, description="how long probed facts are kept"
    )


def seconds_setting(default: float, *, most: float, description: str, zero: bool = False) -> Any:
    """A duration in seconds, read as a float: above zero (from zero with ``zero``), at most
    ``most``. ``description`` says what it is the duration of; the unit is added."""
    above = "minimum" if zero else "exclusiveMinimum"
    return setting(
        schema={"type": "number", above: 0, "maximum": most},
        default=default,
        description=f"{description}, in seconds",
    )
