"""Package namespaces whose names are imported on first use (PEP 562).

Every process that loads plugins imports each plugin's package, and ``jobdispatch --help``
imports the core's: a package ``__init__`` that imported its modules eagerly would make all of
them pay for everything (the PostgreSQL client, a whole adapter, cattrs' code generation). So a
package writes its public imports once, under ``if TYPE_CHECKING:`` (where type checkers and
readers see them and nothing runs them), and ends with::

    __getattr__, __dir__ = lazy(__name__, __file__)

The first time a name is read, that block is parsed (the file's own lines: one list, never a
second copy of it that could drift) and the one module the name comes from is imported. A
submodule of the package is reachable as an attribute too (``jobdispatch.codec``), as it is
after an eager import.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["lazy", "lazy_names"]


@functools.cache
def lazy_names(file: str) -> dict[str, tuple[str, str]]:
    """Each name the ``if TYPE_CHECKING:`` block of ``file`` imports: (module, its name there)."""
    import ast  # here, not above: importing a package must stay cheap until a name is read

    with open(file, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=file)
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                for alias in statement.names:
                    found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def _export(package: str, file: str, name: str) -> Any:
    """The object ``package`` exports as ``name``, importing its module."""
    module, original = lazy_names(file)[name]
    if module == package:  # ``from package import submodule``
        return importlib.import_module(f"{package}.{original}")
    return getattr(importlib.import_module(module), original)


class _Package(types.ModuleType):
    """A lazy package's module type. Importing a submodule binds it on its package, which would
    hide a name exported from it under the same name (``jobdispatch.validate``, the function
    from the module of that name): the exported object is kept instead, as an eager import,
    which bound the name after importing the module, kept it."""

    def __setattr__(self, name: str, value: Any) -> None:
        file = getattr(self, "__file__", None)
        if (
            file
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
            and name in lazy_names(file)
        ):
            value = _export(self.__name__, file, name)
        super().__setattr__(name, value)


def lazy(package: str, file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose ``__init__`` is ``file``)."""
    sys.modules[package].__class__ = _Package

    def __getattr__(name: str) -> Any:
        target = lazy_names(file).get(name)
        if target is None:
            if name.startswith("__"):
                msg = f"module {package!r} has no attribute {name!r}"
                raise AttributeError(msg)
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise  # the submodule exists and failed to import: say why
                msg = f"module {package!r} has no attribute {name!r}"
                raise AttributeError(msg) from None
        value = _export(package, file, name)
        setattr(sys.modules[package], name, value)  # the next read finds it directly
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *lazy_names(file)})

    return __getattr__, __dir__
