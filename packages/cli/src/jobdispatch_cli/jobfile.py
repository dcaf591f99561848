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
    memory_per_node = "480G"               # K, M, G, T, Gi, GB... (binary); a bare number is MiB
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

A file is data, never a program: values nested deeper than :data:`MAX_DEPTH` are refused (a
job file needs four levels, a configuration a few more), and so are YAML aliases that would
expand past :data:`MAX_ALIAS_EXPANSION` nodes (a few hundred bytes of nested aliases can
otherwise expand to billions of values).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from jobdispatch.errors import Invalid, NotFound
from jobdispatch.sizes import parse_mib
from jobdispatch.types import (
    Action,
    CauseKind,
    Charge,
    Extension,
    JobSpec,
    Notify,
    PendingRule,
    ProgressSource,
    RecoveryPolicy,
    Resources,
    Rule,
    SharedCheckpoint,
    StallMode,
    StallRule,
)
from jobdispatch.validate import problems as spec_problems

from jobdispatch_cli.durations import parse_duration
from jobdispatch_cli.jobschema import problems as schema_problems
from jobdispatch_cli.locate import line_of, toml_lines, toml_written, yaml_lines, yaml_written

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "FileError",
    "FileProblem",
    "JobFile",
    "NoSuchFile",
    "load_job_file",
    "parse_job_text",
    "parse_toml",
]

#: How deeply values may nest in a job or configuration file. A job file's deepest value is
#: ``recovery.rules[0].on[0]`` (four levels); adapters' settings nest a little more.
MAX_DEPTH = 32
#: How many nodes YAML aliases may add by repeating what they name, beyond the nodes written.
MAX_ALIAS_EXPANSION = 10_000

#: A parsed file: its data, the line of each key path, and the text of each unquoted value.
Parsed = tuple[Any, dict[str, int], dict[str, str]]


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


class NoSuchFile(NotFound):
    """A job or configuration file that was named and does not exist (exit 3, not found)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: no such file")


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

    def __init__(
        self, file: str, lines: Mapping[str, int], base: Path, written: Mapping[str, str]
    ) -> None:
        self.file = file
        self.lines = lines
        self.base = base
        self.written = written
        self.problems: list[FileProblem] = []
        self.broken: set[str] = set()

    def problem(self, field: str, message: str) -> None:
        self.problems.append(FileProblem(self.file, line_of(self.lines, field), field, message))

    def ok(self, field: str) -> bool:
        """The schema found nothing wrong at ``field`` or inside it."""
        return not any(b == field or b.startswith((f"{field}.", f"{field}[")) for b in self.broken)

    def get(self, data: Mapping[str, Any], key: str, field: str) -> Any:
        return data.get(key) if self.ok(field) else None

    def path(self, value: str | None, field: str) -> str | None:
        if value is None or not value or "\x00" in value:
            return value  # the core's validation says what is wrong with it, and where
        try:
            p = Path(value).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            self.problem(field, f"{value!r} starts with the home folder of an unknown user")
            return None
        return str(p if p.is_absolute() else (self.base / p).resolve())

    def duration(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.problem(field, str(exc))
            return None

    def text(self, value: Any, field: str) -> str:
        """A value that becomes text for the job (an env value, an argument): a string as it
        is, a number only when its text is exactly what the file wrote. YAML reads ``3.10`` as
        3.1, ``0123`` as 83 and ``0x1F`` as 31; TOML reads ``1e3`` as 1000.0: passing those on
        would hand the job a value nobody wrote, so they are refused with the quoted form."""
        if isinstance(value, str):
            return value
        shown = str(value)
        written = self.written.get(field)
        if written != shown:
            as_written = written if written is not None else shown
            self.problem(
                field,
                f"{as_written} would reach the job as {shown}: "
                f'put it in quotes ("{as_written}") to pass it as written',
            )
        return shown

    def command(self, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            try:
                return tuple(shlex.split(value))
            except ValueError as exc:
                self.problem("command", f"cannot be split like a shell command: {exc}")
                return ()
        return tuple(self.text(arg, f"command[{i}]") for i, arg in enumerate(value))

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
                    charge=Charge(raw.get("charge", "every")),
                )
            )
        return out

    def recovery(self, value: Any) -> RecoveryPolicy:
        """The ``[recovery]`` table: its rules, and how long suspect nodes are kept out."""
        rules = self.rules(value)
        if value is None or not self.ok("recovery"):
            return RecoveryPolicy(rules=rules)
        field = "recovery.exclude_suspects_for"
        hold_for = self.duration(value.get("exclude_suspects_for"), field)
        return RecoveryPolicy(rules=rules, exclude_suspects_for=hold_for)

    def progress(self, value: Any) -> ProgressSource | None:
        """The ``[progress]`` table: the checkpoint root the job's progress is read from."""
        if value is None or not self.ok("progress"):
            return None
        every = self.duration(value.get("record_every"), "progress.record_every")
        if every is None:
            return ProgressSource(root=value["root"])
        return ProgressSource(root=value["root"], record_every=every)

    def stall(self, value: Any) -> StallRule | None:
        """The ``[stall]`` table: how long without progress makes a run stalled."""
        if value is None or not self.ok("stall"):
            return None
        after = self.duration(value.get("after"), "stall.after")
        if after is None:
            return None
        grace = self.duration(value.get("startup_grace"), "stall.startup_grace")
        blind = self.duration(value.get("blind_after"), "stall.blind_after")
        fields: dict[str, Any] = {"after": after, "startup_grace": grace}
        if value.get("mode") is not None:
            fields["mode"] = StallMode(value["mode"])
        if blind is not None:
            fields["blind_after"] = blind
        return StallRule(**fields)

    def pending(self, value: Any) -> PendingRule | None:
        """The ``[pending]`` table: how long a submission may wait pending, and the cause its
        ending then takes."""
        if value is None or not self.ok("pending"):
            return None
        after = self.duration(value.get("after"), "pending.after")
        if after is None:
            return None
        if value.get("cause") is None:
            return PendingRule(after=after)
        return PendingRule(after=after, cause=CauseKind(value["cause"]))

    def extensions(self, data: Mapping[str, Any], checkpoint: Any) -> list[Extension]:
        out: list[Extension] = [SharedCheckpoint()] if checkpoint == "shared" else []
        events = self.get(data, "notify", "notify")
        sinks = self.get(data, "notify_sinks", "notify_sinks")
        if sinks and not events:
            self.problem("notify_sinks", "names sinks for no notices: add notify = [...]")
        elif events and self.ok("notify") and self.ok("notify_sinks"):
            out.append(Notify(events=events, sinks=sinks or ()))
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
            "working_dir": self.path(self.get(data, "working_dir", "working_dir"), "working_dir"),
            "output": self.path(self.get(data, "output", "output"), "output"),
            "env": {str(k): self.text(v, f"env.{k}") for k, v in env.items()},
            "time_limit": self.duration(self.get(data, "time_limit", "time_limit"), "time_limit"),
            "extensions": self.extensions(data, checkpoint),
            "resources": self.resources(data.get("resources")),
            "recovery": self.recovery(data.get("recovery")),
            "progress": self.progress(data.get("progress")),
            "stall": self.stall(data.get("stall")),
            "pending": self.pending(data.get("pending")),
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


def _name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def parse_toml(text: str, file: str) -> tuple[Any, dict[str, int]]:
    """A TOML document's data and the line of each key path; FileError naming the file (and
    the line, where tomllib says) when it is not valid TOML or nests too deeply."""
    data = _toml_data(text, file)
    return data, toml_lines(text)


def _parse_toml_job(text: str, file: str) -> Parsed:
    data = _toml_data(text, file)
    lines, written = toml_written(text)
    return data, lines, written


def _toml_data(text: str, file: str) -> Any:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FileError(
            [FileProblem(file, _toml_error_line(exc), "", f"not valid TOML: {exc}")]
        ) from None
    except RecursionError:
        # tomllib reads arrays and inline tables recursively: thousands of levels exhaust it.
        raise FileError([_too_deep(file, None, "")]) from None
    deep = _too_deep_at(data)
    if deep is not None:
        try:  # the scanner recurses as tomllib does, so it reads what tomllib could
            line = line_of(toml_lines(text), deep)
        except RecursionError:
            line = None
        raise FileError([_too_deep(file, line, deep)])
    return data


def _too_deep(file: str, line: int | None, field: str) -> FileProblem:
    return FileProblem(file, line, field, f"values nest more than {MAX_DEPTH} levels deep")


def _too_deep_at(data: Any) -> str | None:
    """The top-level key under which parsed data nests deeper than MAX_DEPTH, or None (the
    full path would be dozens of ``[0]``). Iterative, so a deep value cannot exhaust the stack
    that is checking it."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, top, depth = stack.pop()
        if depth > MAX_DEPTH:
            return top
        if isinstance(value, dict):
            stack.extend((v, top or str(k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, top, depth + 1) for v in value)
    return None


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m[1]) if m else None


def _parse_yaml(text: str, file: str) -> Parsed:
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise FileError([FileProblem(file, line, "", f"not valid YAML: {exc}")]) from None
    except RecursionError:
        # PyYAML composes nested flow collections recursively.
        raise FileError([_too_deep(file, None, "")]) from None
    if node is None:
        return {}, {}, {}
    _check_yaml_shape(node, file)
    problems: list[FileProblem] = []
    data = _yaml_value(node, "", file, problems)
    if problems:
        raise FileError(problems)
    return data, yaml_lines(node), yaml_written(node)


def _check_yaml_shape(root: Any, file: str) -> None:
    """Refuse a composed document before anything expands it: one nested deeper than MAX_DEPTH
    (an alias to an enclosing node nests without end), or whose aliases repeat more than
    MAX_ALIAS_EXPANSION nodes. A composed alias is the very node it names, so walking the nodes
    as a tree counts exactly what building the data would build. Iterative, and it stops at
    the first limit, so its own cost is bounded by the limits."""
    import yaml

    seen: set[int] = set()
    visits = 0
    stack: list[tuple[Any, str, int]] = [(root, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise FileError([_too_deep(file, line, path.split(".")[0].split("[")[0])])
        visits += 1
        seen.add(id(node))
        if visits - len(seen) > MAX_ALIAS_EXPANSION:
            message = (
                f"aliases expand to more than {MAX_ALIAS_EXPANSION} repeated values; "
                "write the values out instead"
            )
            raise FileError([FileProblem(file, line, path, message)])
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    where = key.start_mark.line + 1
                    message = "keys must be plain words, not lists or tables"
                    raise FileError([FileProblem(file, where, path, message)])
                name = str(key.value)
                stack.append((value, f"{path}.{name}" if path else name, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node.value))


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
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        # An unknown tag (``!foo``), or a value its tag cannot hold (``2024-13-40``).
        line = node.start_mark.line + 1
        problems.append(FileProblem(file, line, path, f"cannot be read: {_one_line(exc)}"))
        return None
    finally:
        loader.dispose()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


PARSERS: Mapping[str, Callable[[str, str], Parsed]] = {
    ".toml": _parse_toml_job,
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
    data, lines, written = parser(text, file)
    if not isinstance(data, dict):
        raise FileError([FileProblem(file, 1, "", "must be a table of keys (name, command, ...)")])
    reader = _Reader(file, lines, base, written)
    spec = reader.spec(data)
    if spec is None:
        raise FileError(reader.problems)
    return JobFile(path=Path(file), spec=spec, lines=lines)


def load_job_file(path: Path) -> JobFile:
    """Read and parse the job file at ``path``."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise NoSuchFile(path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FileError([FileProblem(str(path), None, "", f"cannot be read: {exc}")]) from None
    return parse_job_text(text, file=str(path), suffix=path.suffix, base=path.parent.absolute())
