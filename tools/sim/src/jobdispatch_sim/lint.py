"""A lint of the code on the simulated path: what would make a seed stop determining a run.

The simulator can only replay a failure if the code under test takes nothing from outside the
world it injects. This checks, over the AST, the modules the simulator drives:

* ``thread``: no threads, timers, process pools or asyncio started, and no synchronization
  primitive created at module level (instance locks for thread-safety are fine: they never
  block a single-threaded run);
* ``random``: no module-level random (``random.random()``, ``from random import choice``), no
  ``secrets``, ``os.urandom`` or ``uuid4``; a seeded ``random.Random(seed)`` is fine;
* ``clock``: no wall clock (``time.time``, ``time.monotonic``, ``time.perf_counter``,
  ``time.sleep``, ``datetime.now``, ``datetime.utcnow``, ``date.today``);
* ``block``: no ``.wait()`` on an event or condition: a single-threaded run would hang there;
* ``order``: no iteration over a set (``for x in <set>``, a comprehension over one, or
  ``list``/``tuple``/``next(iter(...))`` of one), since string hashing is randomized per process:
  an order that leaks into a decision makes a seed replay differently in another process.
  A set is recognised by its expression (``set(...)``, a literal, a comprehension, set
  operators) or by a name or attribute annotated ``set[...]`` in the same module.

A finding on a line carrying ``# sim: ordered (why)`` or ``# sim: allowed (why)``, or right
under a comment block holding one, is exempt: the reason is the review.

    python -m jobdispatch_sim.lint [paths...]
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs

#: The simulated path, relative to the repository root.
SIMULATED = (
    "packages/core/src/jobdispatch/cluster.py",
    "packages/core/src/jobdispatch/job.py",
    "packages/core/src/jobdispatch/steps.py",
    "packages/core/src/jobdispatch/status.py",
    "packages/core/src/jobdispatch/plan.py",
    "packages/core/src/jobdispatch/timing.py",
    "packages/core/src/jobdispatch/triggers.py",
    "packages/core/src/jobdispatch/validate.py",
    "packages/core/src/jobdispatch/records",
    "packages/core/src/jobdispatch/memory",
    "packages/supervise/src/jobdispatch_supervise/executor.py",
    "packages/supervise/src/jobdispatch_supervise/ownership.py",
)

#: Exemption markers: an order that is harmless, or another pattern allowed, with the reason.
EXEMPT = ("# sim: ordered (", "# sim: allowed (")

_THREAD_MODULES = ("asyncio", "concurrent", "multiprocessing", "_thread")
_THREAD_STARTERS = {"Thread", "Timer"}
_PRIMITIVES = {"Lock", "RLock", "Condition", "Event", "Semaphore", "BoundedSemaphore", "Barrier"}
_RANDOM_FUNCS = {
    "random",
    "randint",
    "randrange",
    "choice",
    "choices",
    "shuffle",
    "sample",
    "uniform",
    "getrandbits",
    "seed",
    "gauss",
    "triangular",
    "betavariate",
    "expovariate",
    "normalvariate",
    "randbytes",
}
_CLOCK = {
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "perf_counter"),
    ("time", "sleep"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}


@attrs.frozen(order=True)
class Finding:
    path: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def _set_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Set | ast.SetComp) or (
        isinstance(node, ast.Call) and _dotted(node.func) in {"set", "frozenset"}
    )


def _set_annotations(tree: ast.AST) -> set[str]:
    """Names and attributes annotated as sets, or assigned a set expression, in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _set_literal(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
        if isinstance(node, ast.AnnAssign):
            text = ast.unparse(node.annotation)
            if text.split("[")[0].strip() in {
                "set",
                "frozenset",
                "Set",
                "AbstractSet",
                "MutableSet",
            }:
                target = node.target
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute):
                    names.add(target.attr)
    return names


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, source: str, tree: ast.AST) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.sets = _set_annotations(tree)
        self.findings: list[Finding] = []
        self.random_names: set[str] = set()
        self.depth = 0  # function nesting: 0 is module level

    # ---------------------------------------------------------------- helpers

    def _exempt(self, line: int) -> bool:
        """A marker on the line itself, or in the comment block just above it."""
        here = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if any(m in here for m in EXEMPT):
            return True
        i = line - 2
        while i >= 0 and self.lines[i].strip().startswith("#"):
            if self.lines[i].strip().startswith(EXEMPT):
                return True
            i -= 1
        return False

    def _flag(self, node: ast.AST, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 0)
        if not self._exempt(line):
            self.findings.append(Finding(self.path, line, rule, message))

    def _is_set(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Set | ast.SetComp):
            return True
        if isinstance(node, ast.Call) and _dotted(node.func) in {"set", "frozenset"}:
            return True
        if isinstance(node, ast.BinOp) and isinstance(
            node.op, ast.BitOr | ast.BitAnd | ast.Sub | ast.BitXor
        ):
            return self._is_set(node.left) or self._is_set(node.right)
        if isinstance(node, ast.Name):
            return node.id in self.sets
        if isinstance(node, ast.Attribute):
            return node.attr in self.sets
        return False

    # ---------------------------------------------------------------- scopes

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    # ---------------------------------------------------------------- imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root in _THREAD_MODULES:
                self._flag(node, "thread", f"imports {alias.name}")
            if root == "secrets":
                self._flag(node, "random", "imports secrets (an unseeded source)")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        root = module.split(".")[0]
        if root in _THREAD_MODULES:
            self._flag(node, "thread", f"imports from {module}")
        for alias in node.names:
            if module == "random" and alias.name in _RANDOM_FUNCS:
                self._flag(node, "random", f"imports the global random's {alias.name}")
                self.random_names.add(alias.asname or alias.name)
            if module == "threading" and alias.name in _THREAD_STARTERS:
                self._flag(node, "thread", f"imports threading.{alias.name}")
            if module == "secrets" or (module == "uuid" and alias.name in {"uuid1", "uuid4"}):
                self._flag(node, "random", f"imports {module}.{alias.name}")
        self.generic_visit(node)

    # ---------------------------------------------------------------- calls

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        parts = name.split(".")
        tail2 = tuple(parts[-2:]) if len(parts) >= 2 else ()
        if parts[0] == "random" and len(parts) == 2 and parts[1] in _RANDOM_FUNCS:
            self._flag(node, "random", f"{name}() uses the global random")
        if name in self.random_names:
            self._flag(node, "random", f"{name}() uses the global random")
        if name in {"os.urandom", "uuid.uuid4", "uuid.uuid1"} or parts[0] == "secrets":
            self._flag(node, "random", f"{name}() is an unseeded source")
        if tail2 in _CLOCK:
            self._flag(node, "clock", f"{name}() reads the wall clock")
        if parts[-1] == "wait" and len(parts) >= 2:
            self._flag(node, "block", f"{name}() blocks until another thread acts")
        if parts[0] == "threading" and len(parts) == 2:
            if parts[1] in _THREAD_STARTERS:
                self._flag(node, "thread", f"{name}() starts a thread")
            elif parts[1] in _PRIMITIVES and self.depth == 0:
                self._flag(node, "thread", f"{name}() at module level")
        if name in _THREAD_STARTERS:
            self._flag(node, "thread", f"{name}() starts a thread")
        if name in {"list", "tuple"} and node.args and self._is_set(node.args[0]):
            self._flag(node, "order", f"{name}() of a set takes its iteration order")
        if (
            name == "next"
            and node.args
            and isinstance(node.args[0], ast.Call)
            and _dotted(node.args[0].func) == "iter"
            and node.args[0].args
            and self._is_set(node.args[0].args[0])
        ):
            self._flag(node, "order", "next(iter(<set>)) picks an element by hash order")
        self.generic_visit(node)

    # ---------------------------------------------------------------- iteration

    def visit_For(self, node: ast.For) -> None:
        if self._is_set(node.iter):
            self._flag(node, "order", f"iterates over a set ({ast.unparse(node.iter)})")
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if self._is_set(node.iter):
            self._flag(node.iter, "order", f"comprehension over a set ({ast.unparse(node.iter)})")
        self.generic_visit(node)


def files(root: Path, paths: Iterable[str] = SIMULATED) -> Iterator[Path]:
    """The Python files of ``paths`` (files or folders) under ``root``, in a stable order."""
    for rel in paths:
        target = root / rel
        if target.is_dir():
            yield from sorted(target.rglob("*.py"))
        elif target.exists():
            yield target


def check_file(path: Path, display: str | None = None) -> list[Finding]:
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    checker = _Checker(display or str(path), source, tree)
    checker.visit(tree)
    return sorted(checker.findings)


def check(root: Path, paths: Iterable[str] = SIMULATED) -> list[Finding]:
    """Every finding on the simulated path under ``root``."""
    out: list[Finding] = []
    for path in files(root, paths):
        out.extend(check_file(path, str(path.relative_to(root))))
    return out


def repo_root() -> Path:
    """The repository root: the nearest parent with a ``packages`` folder."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "packages" / "core").is_dir():
            return parent
    return Path.cwd()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = repo_root()
    findings = check(root, args or SIMULATED)
    for finding in findings:
        print(finding)
    count = len(list(files(root, args or SIMULATED)))
    print(f"sim lint: {count} files, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
