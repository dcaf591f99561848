"""The job file's JSON Schema: built here from the core's enums (one source of truth), shipped
as ``schema/job.schema.json`` for editors (taplo, yaml-language-server), and used to check
every job file before it is converted to a :class:`jobdispatch.JobSpec`.

The schema decides structure: which keys exist, their types, enums and bounds. What a schema
cannot say well stays in code after it: durations (``1h30m``), sizes (``480G``), splitting a
command string, paths relative to the file, and the core's checks across fields
(``jobdispatch.validate``). ``[resources.ADAPTER]`` tables are open tables of scalars here: the
adapter named checks its own allow-list when it plans the job, since adapters are plugins the
command cannot know in advance.

Errors keep the file's quality: each becomes ``FILE:LINE: FIELD: message`` with every problem
told at once. A schema node may carry ``x-message`` (a format with ``{value}``), used when its
own check fails, and ``x-required``, what a missing key is for; editors ignore both.

``python -m jobdispatch_cli.jobschema`` rewrites the shipped file and the docs' copy
(``docs/reference/job.schema.json``); a test fails when either is stale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from jobdispatch.sizes import SIZE_FORMS, SIZE_PATTERN
from jobdispatch.types import (
    PENDING_CAUSES,
    RECOVERABLE,
    Action,
    CauseKind,
    Charge,
    NoticeKind,
    StallMode,
)
from jobdispatch.validate import MAX_BUDGET

__all__ = ["SCHEMA_FILE", "SchemaProblem", "job_schema", "problems", "schema_text"]

#: The shipped copy, inside the package so it is in every wheel.
SCHEMA_FILE = Path(__file__).parent / "schema" / "job.schema.json"
#: The docs' copy, published with the site (in a source checkout only).
_DOCS_COPY = Path(__file__).resolve().parents[4] / "docs" / "reference" / "job.schema.json"

_TOP = (
    "name",
    "command",
    "nodes",
    "procs_per_node",
    "time_limit",
    "env",
    "working_dir",
    "output",
    "image",
    "checkpoint",
    "resources",
    "recovery",
    "notify",
    "notify_sinks",
    "progress",
    "stall",
    "pending",
)
_RESOURCES = (
    "gpus_per_node",
    "gpu_type",
    "cpus_per_proc",
    "memory_per_node",
    "queue",
    "account",
    "qos",
    "constraints",
    "exclusive",
)
_DURATION = {
    "type": ["string", "number"],
    "description": "90s, 10m, 1h30m, 2d, or a number of seconds",
    "x-message": "must be a duration such as 90s, 10m, 1h30m or 2d, or seconds; got {value}",
}


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


@cache
def job_schema() -> Mapping[str, Any]:
    """The schema, as data (draft 2020-12)."""
    # Every cause is a word of the file; which ones a rule may cover is the core's check
    # (``held is not a recoverable cause`` says more than an enum could).
    causes = [str(k) for k in RECOVERABLE]
    actions = [str(a) for a in Action]
    cause = {
        "enum": [str(k) for k in CauseKind],
        "x-message": f"unknown cause {{value}} (rules cover: {', '.join(causes)})",
    }
    rule = {
        "type": "object",
        "description": "one recovery rule: on which causes, what to do, how many times",
        "properties": {
            "on": {
                "anyOf": [cause, {"type": "array", "items": cause}],
                "description": "the causes the rule covers",
                "x-message": "must be a cause or a list of causes, got {value}",
                "x-required": "the causes the rule covers",
            },
            "action": {
                "enum": actions,
                "x-message": f"unknown action {{value}} (actions: {', '.join(actions)})",
                "x-required": f"(actions: {', '.join(actions)})",
            },
            # No minimum here: the core checks it, and a rule the schema refused would hide
            # the core's checks of the other rules (which need every rule, in order).
            "budget": {"type": "integer", "description": f"how many times (0 to {MAX_BUDGET})"},
            "for": {**_DURATION, "description": "how long a hold lasts"},
            "charge": {
                "enum": [str(c) for c in Charge],
                "description": "which firings the budget pays for: every one, or no-advance "
                "(only those after which the newest checkpoint did not advance)",
                "x-message": "must be every or no-advance, got {value}",
            },
        },
        "required": ["on", "action"],
        "additionalProperties": False,
    }
    adapter_value = {
        "anyOf": [
            {"type": ["string", "integer", "boolean"]},
            {"type": "array", "items": {"type": "string"}},
        ],
        "x-message": "must be a string, whole number, true/false or list of strings, got {value}",
    }
    resources = {
        "type": "object",
        "description": "what each node needs; an adapter's own settings go in [resources.ADAPTER]",
        "properties": {
            "gpus_per_node": {"type": "integer", "minimum": 0},
            "gpu_type": _string("a GPU model the cluster knows (a100, h100...)"),
            "cpus_per_proc": {"type": "integer", "minimum": 1},
            "memory_per_node": {
                "type": ["string", "integer"],
                "pattern": SIZE_PATTERN,
                "description": "64G, 64Gi, 480GB, 1.5T: binary units; a whole number is MiB",
                "x-message": f"not a size: {{value}} ({SIZE_FORMS})",
            },
            "queue": _string("a Slurm partition, a Kueue LocalQueue"),
            "account": _string("whom the job is charged to"),
            "qos": _string("the quality of service"),
            "constraints": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "node features or labels, all required",
                "x-message": "must be a list of strings, got {value}",
            },
            "exclusive": {"type": "boolean"},
        },
        "additionalProperties": {
            "type": "object",
            "description": "one adapter's own settings, checked by that adapter at plan time",
            "additionalProperties": adapter_value,
            "x-message": (
                f"unknown key (known keys: {', '.join(_RESOURCES)}; an adapter's settings "
                "go in [resources.ADAPTER])"
            ),
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "jobdispatch job file",
        "description": "What to run and how to recover it (jobdispatch run FILE).",
        "type": "object",
        "properties": {
            "name": _string("a name people address the job by"),
            "command": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": ["string", "number"]}},
                ],
                "description": "the program and its arguments; a string is split like a shell",
                "x-message": "must be a list of strings or a string, got {value}",
                "x-required": "the program and its arguments",
            },
            "nodes": {"type": "integer", "minimum": 1},
            "procs_per_node": {"type": "integer", "minimum": 1},
            "time_limit": _DURATION,
            "env": {
                "type": "object",
                "additionalProperties": {
                    "type": ["string", "number"],
                    "description": "a string; a number only where its text is what is written",
                    "x-message": "must be a string, got {value}",
                },
                "description": "the job's environment variables, passed as written",
                "x-message": "must be a table of names to strings, got {value}",
            },
            "working_dir": _string("relative to the job file"),
            "output": _string("a directory for the rank files"),
            "image": _string("only where the cluster runs containers"),
            "checkpoint": {
                "enum": ["isolated", "shared"],
                "x-message": "must be isolated or shared, got {value}",
            },
            "resources": resources,
            "notify": {
                "type": "array",
                "items": {
                    "enum": [str(k) for k in NoticeKind],
                    "x-message": "is not a notice kind ("
                    + ", ".join(str(k) for k in NoticeKind)
                    + "), got {value}",
                },
                "uniqueItems": True,
                "description": "the lifecycle notices this job sends (escalations always go)",
                "x-message": "must be a list of notice kinds, got {value}",
            },
            "notify_sinks": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "x-message": "must name a sink"},
                "uniqueItems": True,
                "description": "the configured sinks that get this job's notices (default: all)",
                "x-message": "must be a list of sink names, got {value}",
            },
            "recovery": {
                "type": "object",
                "properties": {
                    "rules": {"type": "array", "items": rule},
                    "exclude_suspects_for": {
                        **_DURATION,
                        "description": "how long nodes shared by two consecutive node-lost "
                        "or stalled runs are kept out of the next submissions",
                    },
                },
                "additionalProperties": False,
                "x-message": "must be a table with rules and exclude_suspects_for, got {value}",
            },
            "progress": {
                "type": "object",
                "description": "where the job's progress is read: the checkpoint root its "
                "helper publishes to and marks progress under",
                "properties": {
                    "root": {
                        **_string("a path, file:// path or s3://bucket/prefix"),
                        "x-required": "the checkpoint root the job publishes to",
                    },
                    "record_every": {
                        **_DURATION,
                        "description": "at most one progress event in the record per this "
                        "(default 5m)",
                    },
                },
                "required": ["root"],
                "additionalProperties": False,
                "x-message": "must be a table with root and record_every, got {value}",
            },
            "stall": {
                "type": "object",
                "description": "when a running job counts as hung: no progress for after",
                "properties": {
                    "after": {
                        **_DURATION,
                        "description": "how long without progress makes a run stalled",
                        "x-required": "how long without progress makes a run stalled",
                    },
                    "startup_grace": {
                        **_DURATION,
                        "description": "how long a run may go before its first progress "
                        "(default: after)",
                    },
                    "mode": {
                        "enum": [str(m) for m in StallMode],
                        "description": "enforce stops a stalled run; observe only records it",
                        "x-message": "must be enforce or observe, got {value}",
                    },
                    "blind_after": {
                        **_DURATION,
                        "description": "how long progress may stay unreadable before a "
                        "person is told (default 30m)",
                    },
                },
                "required": ["after"],
                "additionalProperties": False,
                "x-message": "must be a table with after, startup_grace, mode, blind_after; "
                "got {value}",
            },
            "pending": {
                "type": "object",
                "description": "how long a submission may wait pending before it counts as an "
                "ending, and with what cause",
                "properties": {
                    "after": {
                        **_DURATION,
                        "description": "how long a submission may stay pending once opened",
                        "x-required": "how long a submission may stay pending once opened",
                    },
                    "cause": {
                        "enum": [str(c) for c in PENDING_CAUSES],
                        "description": "the ending's cause: no-capacity (waiting for capacity, "
                        "the cluster's state; default) or never-fits (a request the cluster "
                        "can never satisfy, the job file's mistake)",
                        "x-message": "must be no-capacity or never-fits, got {value}",
                    },
                },
                "required": ["after"],
                "additionalProperties": False,
                "x-message": "must be a table with after and cause, got {value}",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }


def schema_text() -> str:
    """The schema as the shipped file holds it."""
    return json.dumps(job_schema(), indent=2, ensure_ascii=False) + "\n"


class SchemaProblem:
    """One schema error, translated: the field path (``recovery.rules[0].budget``) and what."""

    __slots__ = ("field", "message")

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message

    def __repr__(self) -> str:
        return f"SchemaProblem({self.field!r}, {self.message!r})"


def _field(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_WORDS = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a table",
}


def _got(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def _translate(error: jsonschema.ValidationError) -> Iterator[SchemaProblem]:
    field = _field(error.absolute_path)
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    value: Any = error.instance
    kind = error.validator
    if kind == "additionalProperties" and schema.get("additionalProperties") is False:
        known = list(schema.get("properties", {}))
        for key in value:
            if key not in known:
                sub = f"{field}.{key}" if field else str(key)
                yield SchemaProblem(sub, f"unknown key (known keys: {', '.join(known)})")
        return
    if kind == "required":
        for key in schema.get("required", ()):
            if key not in value:
                why = schema.get("properties", {}).get(key, {}).get("x-required")
                sub = f"{field}.{key}" if field else str(key)
                yield SchemaProblem(sub, f"is required: {why}" if why else "is required")
        return
    if kind in ("anyOf", "oneOf") and error.context:
        # The branch that went deepest is the one the value was meant for: tell its error.
        deepest = max(error.context, key=lambda e: (len(e.relative_path), e.validator != "type"))
        inner = deepest.schema if isinstance(deepest.schema, dict) else {}
        if deepest.relative_path or (deepest.validator != "type" and "x-message" in inner):
            yield from _translate(deepest)
            return
    if "x-message" in schema:
        yield SchemaProblem(field, schema["x-message"].format(value=repr(value)))
        return
    if kind == "type":
        types = error.validator_value
        names = [types] if isinstance(types, str) else list(types)  # type: ignore[arg-type]
        words = " or ".join(_WORDS.get(str(n), str(n)) for n in names)
        yield SchemaProblem(field, f"must be {words}, got {_got(value)}")
        return
    if kind == "minimum":
        low = error.validator_value
        text = "must not be negative" if low == 0 else f"must be at least {low}"
        yield SchemaProblem(field, f"{text}, got {value!r}")
        return
    if kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)  # type: ignore[union-attr]
        yield SchemaProblem(field, f"must be one of {options}, got {value!r}")
        return
    yield SchemaProblem(field, error.message)


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(job_schema())


def problems(data: Any) -> list[SchemaProblem]:
    """Every way ``data`` (a parsed job file) breaks the schema, translated."""
    out: list[SchemaProblem] = []
    for error in _validator().iter_errors(data):
        out.extend(_translate(error))
    return out


def main() -> None:
    """Write the shipped schema file and the docs' copy (``--check``: exit 1 when stale)."""
    targets = [SCHEMA_FILE] + ([_DOCS_COPY] if _DOCS_COPY.parent.is_dir() else [])
    if "--check" in sys.argv[1:]:
        sys.exit(0 if all(t.read_text() == schema_text() for t in targets) else 1)
    for target in targets:
        target.write_text(schema_text())


if __name__ == "__main__":
    main()
