"""Line numbers of the keys in a TOML or YAML document, so an error names the line.

``tomllib`` gives no positions, so :func:`toml_lines` scans the text itself: a small reader of
TOML's structure (tables, arrays of tables, keys, inline tables, arrays, strings and comments)
that records the line where each path begins (``recovery.rules[1].budget``). It only ever reads
text ``tomllib`` has accepted already. :func:`yaml_lines` walks the nodes PyYAML composes, which
carry their marks. :func:`line_of` finds a path's line, or its nearest ancestor's.

:func:`toml_written` and :func:`yaml_written` give the text of each unquoted value as the file
spells it (``0123``, ``3.10``, ``0x1F``), which the parsed number no longer tells: the job
file's reader compares the two before it passes a number on as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["line_of", "toml_lines", "toml_written", "yaml_lines", "yaml_written"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


class _TomlScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line = 1
        self.out: dict[str, int] = {}
        self.arrays: dict[str, int] = {}
        self.written: dict[str, str] = {}

    # ------------------------------------------------------------------ characters

    def peek(self, n: int = 1) -> str:
        return self.text[self.i : self.i + n]

    def advance(self, n: int = 1) -> None:
        self.line += self.text.count("\n", self.i, self.i + n)
        self.i += n

    def skip(self, newlines: bool) -> None:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                end = self.text.find("\n", self.i)
                self.advance((len(self.text) if end < 0 else end) - self.i)
            else:
                return

    def string(self) -> str:
        for quote in ('"""', "'''"):
            if self.peek(3) == quote:
                end = self.text.find(quote, self.i + 3)
                end = len(self.text) if end < 0 else end
                while self.text[end + 3 : end + 4] == quote[0]:
                    end += 1  # a closing run of four or five quotes ends with the last three
                value = self.text[self.i + 3 : end]
                self.advance(end + 3 - self.i)
                return value
        quote = self.peek()
        j = self.i + 1
        while j < len(self.text) and self.text[j] != quote:
            j += 2 if quote == '"' and self.text[j] == "\\" else 1
        value = self.text[self.i + 1 : j]
        self.advance(j + 1 - self.i)
        return value

    def key(self) -> str:
        parts = []
        while True:
            self.skip(newlines=False)
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                m = _BARE.match(self.text, self.i)
                if m is None:
                    break
                parts.append(m[0])
                self.advance(len(m[0]))
            self.skip(newlines=False)
            if self.peek() != ".":
                break
            self.advance()
        return ".".join(parts)

    def record(self, path: str) -> None:
        self.out.setdefault(path, self.line)

    # ------------------------------------------------------------------ structure

    def document(self) -> dict[str, int]:
        prefix = ""
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.text):
                return self.out
            if self.peek(2) == "[[":
                self.advance(2)
                name = self.key()
                self.skip(newlines=False)
                self.advance(2)
                index = self.arrays.get(name, -1) + 1
                self.arrays[name] = index
                self.record(name)
                prefix = f"{name}[{index}]"
                self.record(prefix)
            elif self.peek() == "[":
                self.advance()
                prefix = self.key()
                self.skip(newlines=False)
                self.advance()
                self.record(prefix)
            else:
                self.pair(prefix)

    def pair(self, prefix: str) -> None:
        start = self.line
        path = join(prefix, self.key())
        self.out.setdefault(path, start)
        self.skip(newlines=False)
        if self.peek() == "=":
            self.advance()
        else:
            self.advance()  # not TOML tomllib accepted; move on rather than loop
            return
        self.value(path)

    def value(self, path: str) -> None:
        self.skip(newlines=False)
        c = self.peek()
        if c == "{":
            self.advance()
            while True:
                self.skip(newlines=True)
                if self.peek() in ("}", ""):
                    self.advance()
                    return
                self.pair(path)
                self.skip(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif c == "[":
            self.advance()
            index = 0
            while True:
                self.skip(newlines=True)
                if self.peek() in ("]", ""):
                    self.advance()
                    return
                item = f"{path}[{index}]"
                self.record(item)
                self.value(item)
                index += 1
                self.skip(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif c in ('"', "'"):
            self.string()
        else:
            start = self.i
            while self.i < len(self.text) and self.text[self.i] not in ",]}\n#":
                self.advance()
            self.written.setdefault(path, self.text[start : self.i].strip())


def toml_lines(text: str) -> dict[str, int]:
    """The line where each key path of a valid TOML document begins."""
    return _TomlScanner(text).document()


def toml_written(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """In one scan, :func:`toml_lines` and the text of each unquoted value (a number, a
    boolean, a date) of a valid TOML document, by key path, as written."""
    scanner = _TomlScanner(text)
    return scanner.document(), scanner.written


def yaml_written(node: Any, prefix: str = "", out: dict[str, str] | None = None) -> dict[str, str]:
    """The text of each plain (unquoted) scalar of a composed YAML node, by key path."""
    import yaml

    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yaml_written(value, join(prefix, str(key.value)), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yaml_written(item, f"{prefix}[{i}]", out)
    elif isinstance(node, yaml.ScalarNode) and not node.style:
        out.setdefault(prefix, node.value)
    return out


def yaml_lines(node: Any, prefix: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """The line where each key path of a composed YAML node begins."""
    import yaml

    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = join(prefix, str(key.value))
            out.setdefault(path, key.start_mark.line + 1)
            yaml_lines(value, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}[{i}]"
            out.setdefault(path, item.start_mark.line + 1)
            yaml_lines(item, path, out)
    return out


def line_of(lines: Mapping[str, int], path: str) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one (``a.b[2].c`` tries
    ``a.b[2].c``, ``a.b[2]``, ``a.b``, ``a``)."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return None
