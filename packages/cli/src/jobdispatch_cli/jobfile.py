"""Job files: a JobSpec written as TOML or YAML, read with every error naming file, line, field.

The keys mirror :class:`jobdispatch.JobSpec`::

    name = "train"
    command = ["python", "train.py"]       # or one string, split like a shell would
    nodes = 2
    procs_per_node = 1
    time_limit = "1h30m"                   # or 90s, 10m, 2d, or a number of seconds
    working_dir = "."                      # relative paths are relative to the job file
    output = "logs"                        # a directory for the rank files
    image = "..."                          # only where the cluster runs containers
    checkpoint = "isolated"                # or "shared"
    [resources]                            # what each node needs; all optional
    gpus_per_node = 8
    gpu_type = "a100"
    cpus_per_proc = 12
    memory_per_node = "480G"               # K, M, G, T (binary); a bare number is MiB
    queue = "gpu"                          # a Slurm partition, a Kueue LocalQueue
    account = "ml"
    qos = "high"
    constraints = ["ib"]                   # node features or labels, all required
    exclusive = true
    [resources.slurm]                      # one adapter's own, allow-listed settings
    reservation = "maint"
    [env]
    CHECKPOINT_DIR = "/tmp/ckpt"
    [[recovery.rules]]
    on = ["preempted"]
    action = "resubmit"
    budget = 3

The file is checked against the job file's JSON Schema (:mod:`jobdispatch_cli.jobschema`, shipped
as ``schema/job.schema.json``): unknown keys are errors (a typo must not silently become a
default), and every problem is reported at once, as ``FILE:LINE: FIELD: what is wrong``.
"""

from __future__ import annotations

import math
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Invalid
from jobdispatch.types import (
    Action,
    CauseKind,
    JobSpec,
    RecoveryPolicy,
    Resources,
    Rule,
    SharedCheckpoint,
)
from jobdispatch.validate import problems as spec_problems

from jobdispatch_cli.durations import parse_duration
from jobdispatch_cli.jobschema import problems as schema_problems
from jobdispatch_cli.locate import line_of, toml_lines, yaml_lines

__all__ = [
    "FileError",
    "FileProblem",
    "JobFile",
    "load_job_file",
    "parse_job_text",
    "parse_mib",
]


@attrs.frozen
class FileProblem:
    """One thing wrong in a file: where (line and field path) and what."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class FileError(Invalid):
    """Every problem found in a job or configuration file, each naming its line and field."""

    def __init__(self, problems: list[FileProblem]) -> None:
        self.problems = tuple(problems)
        head = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
        super().__init__(f"{head}\n" + "\n".join(f"  {p}" for p in problems))


@attrs.frozen
class JobFile:
    """A parsed job file: the spec, and where each key was."""

    path: Path
    spec: JobSpec
    lines: Mapping[str, int]


class _Reader:
    """Checks the parsed data against the job schema, then builds the spec from what passed,
    collecting problems instead of stopping: a field the schema refused is left at its
    default, so the conversions and the core's checks still report on the others."""

    def __init__(self, file: str, lines: Mapping[str, int], base: Path) -> None:
        self.file = file
        self.lines = lines
        self.base = base
        self.problems: list[FileProblem] = []
        self.broken: set[str] = set()

    def problem(self, field: str, message: str) -> None:
        self.problems.append(FileProblem(self.file, line_of(self.lines, field), field, message))

    def ok(self, field: str) -> bool:
        """The schema found nothing wrong at ``field`` or inside it."""
        return not any(b == field or b.startswith((f"{field}.", f"{field}[")) for b in self.broken)

    def get(self, data: Mapping[str, Any], key: str, field: str) -> Any:
        return data.get(key) if self.ok(field) else None

    def path(self, value: str | None) -> str | None:
        if value is None or not value:
            return value
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else (self.base / p).resolve())

    def duration(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.problem(field, str(exc))
            return None

    def command(self, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            try:
                return tuple(shlex.split(value))
            except ValueError as exc:
                self.problem("command", f"cannot be split like a shell command: {exc}")
                return ()
        return tuple(str(arg) for arg in value)

    def resources(self, value: Any) -> Resources:
        """The ``[resources]`` table; a key holding a table is an adapter's own table
        (``[resources.slurm]``), checked by that adapter when it plans the job."""
        at = "resources"
        if value is None or not self.ok(at):
            if value is not None:
                # Read what passed, so one run tells the adapter tables' problems too.
                value = {k: v for k, v in value.items() if self.ok(f"{at}.{k}")}
            else:
                return Resources()
        tables = {str(k): dict(v) for k, v in value.items() if isinstance(v, dict)}
        constraints = value.get("constraints")
        if isinstance(constraints, str):
            constraints = [constraints]
        memory = value.get("memory_per_node")
        mib = None
        if memory is not None:
            try:
                mib = parse_mib(memory)
            except ValueError as exc:
                self.problem(f"{at}.memory_per_node", str(exc))
        return Resources(
            gpus_per_node=value.get("gpus_per_node") or 0,
            gpu_type=value.get("gpu_type"),
            cpus_per_proc=value.get("cpus_per_proc"),
            memory_per_node_mib=mib,
            queue=value.get("queue"),
            account=value.get("account"),
            qos=value.get("qos"),
            constraints=tuple(constraints or ()),
            exclusive=bool(value.get("exclusive")),
            adapter=tables,
        )

    def rules(self, value: Any) -> list[Rule]:
        if value is None or not self.ok("recovery"):
            return []
        out = []
        for i, raw in enumerate(value.get("rules") or []):
            at = f"recovery.rules[{i}]"
            on = raw["on"]
            duration = self.duration(raw.get("for"), f"{at}.for")
            if raw.get("for") is not None and duration is None:
                continue
            out.append(
                Rule(
                    on=[CauseKind(w) for w in ([on] if isinstance(on, str) else on)],
                    action=Action(raw["action"]),
                    budget=raw.get("budget", 0),
                    for_=duration,
                )
            )
        return out

    def spec(self, data: Mapping[str, Any]) -> JobSpec | None:
        for found in schema_problems(data):
            self.broken.add(found.field)
            self.problem(found.field, found.message)
        checkpoint = self.get(data, "checkpoint", "checkpoint")
        nodes = self.get(data, "nodes", "nodes")
        per_node = self.get(data, "procs_per_node", "procs_per_node")
        env = self.get(data, "env", "env") or {}
        fields: dict[str, Any] = {
            "name": self.get(data, "name", "name") or "",
            "command": self.command(self.get(data, "command", "command")),
            "nodes": 1 if nodes is None else nodes,
            "procs_per_node": 1 if per_node is None else per_node,
            "image": self.get(data, "image", "image"),
            "working_dir": self.path(self.get(data, "working_dir", "working_dir")),
            "output": self.path(self.get(data, "output", "output")),
            "env": {str(k): str(v) for k, v in env.items()},
            "time_limit": self.duration(self.get(data, "time_limit", "time_limit"), "time_limit"),
            "extensions": [SharedCheckpoint()] if checkpoint == "shared" else [],
            "resources": self.resources(data.get("resources")),
            "recovery": RecoveryPolicy(rules=self.rules(data.get("recovery"))),
        }
        # Check what could be read as the core would, so one run reports every problem; a
        # field that could not be read is left out of that (it has its problem already).
        broken = {p.field for p in self.problems}
        if any(f.startswith("recovery") for f in broken):
            fields["recovery"] = RecoveryPolicy()
        spec = JobSpec(**fields)
        for p in spec_problems(spec):
            if not any(p.path == f or p.path.startswith((f"{f}.", f"{f}[")) for f in broken):
                self.problem(p.path, p.message)
        if self.problems:
            self.problems.sort(key=lambda p: (p.line or 0, p.field))
            return None
        return spec


_MIB = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KkMmGgTt]?)(?:i?[Bb])?$")
_TO_MIB = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_mib(value: Any) -> int:
    """MiB from ``512M``, ``64G``, ``1.5T`` or ``2GiB`` (binary units, as Slurm reads them), or
    from a whole number, which is MiB; rounded up, never down."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        msg = f"must be a size such as 512M or 64G, or a whole number of MiB; got {value!r}"
        raise ValueError(msg)
    if isinstance(value, int):
        return value
    m = _MIB.match(value.strip())
    if m is None:
        msg = f"not a size: {value!r} (use a number with K, M, G or T, e.g. 64G)"
        raise ValueError(msg)
    return math.ceil(float(m[1]) * _TO_MIB[m[2].lower()])


def _name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def _parse_toml(text: str, file: str) -> tuple[Any, dict[str, int]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileError(
            [FileProblem(file, _toml_error_line(exc), "", f"not valid TOML: {exc}")]
        ) from None
    return data, toml_lines(text)


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m[1]) if m else None


def _parse_yaml(text: str, file: str) -> tuple[Any, dict[str, int]]:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise FileError([FileProblem(file, line, "", f"not valid YAML: {exc}")]) from None
    if node is None:
        return {}, {}
    problems: list[FileProblem] = []
    data = _yaml_value(node, "", file, problems)
    if problems:
        raise FileError(problems)
    return data, yaml_lines(node)


def _yaml_value(node: Any, path: str, file: str, problems: list[FileProblem]) -> Any:
    """Build plain data from composed nodes. Keys are taken as written, so ``on:`` stays
    "on" (PyYAML would read it as true), and a key given twice is an error, not an overwrite."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key, value in node.value:
            name = str(key.value)
            sub = f"{path}.{name}" if path else name
            if name in out:
                problems.append(FileProblem(file, key.start_mark.line + 1, sub, "is given twice"))
                continue
            out[name] = _yaml_value(value, sub, file, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_yaml_value(v, f"{path}[{i}]", file, problems) for i, v in enumerate(node.value)]
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


PARSERS: Mapping[str, Callable[[str, str], tuple[Any, dict[str, int]]]] = {
    ".toml": _parse_toml,
    ".yaml": _parse_yaml,
    ".yml": _parse_yaml,
}


def parse_job_text(text: str, *, file: str, suffix: str, base: Path) -> JobFile:
    """Parse a job file's text (``suffix`` picks the format; ``base`` anchors relative paths)."""
    parser = PARSERS.get(suffix.lower())
    if parser is None:
        kind = suffix or "(no suffix)"
        msg = f"unknown kind of job file {kind!r}: use .toml, .yaml or .yml"
        raise FileError([FileProblem(file, None, "", msg)])
    data, lines = parser(text, file)
    if not isinstance(data, dict):
        raise FileError([FileProblem(file, 1, "", "must be a table of keys (name, command, ...)")])
    reader = _Reader(file, lines, base)
    spec = reader.spec(data)
    if spec is None:
        raise FileError(reader.problems)
    return JobFile(path=Path(file), spec=spec, lines=lines)


def load_job_file(path: Path) -> JobFile:
    """Read and parse the job file at ``path``."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise FileError([FileProblem(str(path), None, "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError([FileProblem(str(path), None, "", f"cannot be read: {exc}")]) from None
    return parse_job_text(text, file=str(path), suffix=path.suffix, base=path.parent.absolute())
