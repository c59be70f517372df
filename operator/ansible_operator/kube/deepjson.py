"""JSON decoding and encoding that survive any nesting depth the API server accepts.

Where this sits: every Kubernetes object the operator reads or writes passes
through here as text. `kube.client.Kube.request` decodes responses and encodes
request bodies with `loads`/`dumps`; `controller.deepobjects` gives kopf's watch
streams and list responses the same `loads`.

Why: the API server stores objects nested up to about 10,000 levels (the limit
of Go's encoding/json), but CPython's json module recurses once per level in C
and raises RecursionError at about 990. One such custom resource used to end
kopf's watch and, with it, the whole operator. Both functions try the C
implementation first, so ordinary objects cost nothing extra; only when it
raises RecursionError do they redo the work with a loop and an explicit stack,
whose depth is bounded by memory, not by the interpreter's recursion limit.
The results are the same as json.loads / json.dumps would give without a
recursion limit.
"""

from __future__ import annotations

import json
import math
import re
from _json import encode_basestring_ascii, scanstring  # json's own C string helpers
from json.decoder import JSONDecodeError
from typing import Any

__all__ = ["dumps", "loads"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# JSON's number grammar, as json.scanner matches it.
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
# The literals json.loads accepts (NaN and the infinities are Python's extension).
_CONSTANTS: dict[str, Any] = {
    "null": None,
    "true": True,
    "false": False,
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
}

Container = dict[str, Any] | list[Any]


def loads(data: str | bytes | bytearray) -> Any:
    """json.loads(data), for documents of any depth. Raises json.JSONDecodeError."""
    try:
        return json.loads(data)
    except RecursionError:
        pass
    if isinstance(data, bytes | bytearray):
        # What json.loads does with bytes: UTF-8/16/32 by sniffing, BOM dropped.
        data = bytes(data).decode(json.detect_encoding(data), "surrogatepass")
    return _decode(data)


def _decode(text: str) -> Any:
    """The document in `text`, parsed with an explicit stack of the open containers."""
    parser = _Parser(text)
    while True:
        value, opened = parser.value()
        if opened and not parser.closes(value):
            parser.enter(value)
            continue
        done, value = parser.complete(value)
        if done:
            return value


class _Parser:
    """JSON text read from left to right; `stack` holds the containers still open."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.stack: list[Container] = []
        self.keys: list[str] = []  # for each open object on the stack, the key being read
        self.pos = 0
        self.skip()

    def skip(self) -> None:
        found = _WHITESPACE.match(self.text, self.pos)
        if found:
            self.pos = found.end()

    def fail(self, message: str) -> JSONDecodeError:
        return JSONDecodeError(message, self.text, self.pos)

    def key(self) -> str:
        """Read `"name" :` (and the whitespace after it); return the name."""
        if not self.text.startswith('"', self.pos):
            raise self.fail("Expecting property name enclosed in double quotes")
        key, self.pos = scanstring(self.text, self.pos + 1, True)
        self.skip()
        if not self.text.startswith(":", self.pos):
            raise self.fail("Expecting ':' delimiter")
        self.pos += 1
        self.skip()
        return key

    def value(self) -> tuple[Any, bool]:
        """The value at the cursor: a scalar, or a container just opened (then True)."""
        text, pos = self.text, self.pos
        char = text[pos : pos + 1]
        if char in ("{", "["):
            self.pos += 1
            self.skip()
            return ({} if char == "{" else []), True
        if char == '"':
            string, self.pos = scanstring(text, pos + 1, True)
            return string, False
        for literal, constant in _CONSTANTS.items():
            if text.startswith(literal, pos):
                self.pos += len(literal)
                return constant, False
        number = _NUMBER.match(text, pos)
        if number is None:
            raise self.fail("Expecting value")
        self.pos = number.end()
        integer, fraction, exponent = number.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), False
        return int(integer), False

    def closes(self, container: Container) -> bool:
        """Whether `container`, just opened, is closed at once (`{}`, `[]`)."""
        if self.text.startswith("}" if isinstance(container, dict) else "]", self.pos):
            self.pos += 1
            return True
        return False

    def enter(self, container: Container) -> None:
        self.stack.append(container)
        if isinstance(container, dict):
            self.keys.append(self.key())

    def complete(self, value: Any) -> tuple[bool, Any]:
        """Store a finished value and close what it finishes: (document done, document)."""
        while self.stack:
            parent = self.stack[-1]
            if isinstance(parent, dict):
                parent[self.keys[-1]] = value
            else:
                parent.append(value)
            self.skip()
            char = self.text[self.pos : self.pos + 1]
            if char == ",":
                self.pos += 1
                self.skip()
                if isinstance(parent, dict):
                    self.keys[-1] = self.key()
                return False, None
            if char != ("}" if isinstance(parent, dict) else "]"):
                raise self.fail("Expecting ',' delimiter")
            self.stack.pop()
            if isinstance(parent, dict):
                self.keys.pop()
            value = parent
            self.pos += 1
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("Extra data")
        return True, value


def dumps(value: Any) -> str:
    """json.dumps(value, separators=(",", ":")), for values of any depth.

    ASCII-only output (non-ASCII escaped), so lone surrogates are safe to send.
    Raises TypeError for what JSON cannot hold, ValueError for a circular reference.
    """
    try:
        return json.dumps(value, separators=(",", ":"))
    except RecursionError:
        return _encode(value)


class _Close(str):
    """A closing bracket on the work stack; leaving the container ends its cycle check."""

    container: int

    @classmethod
    def of(cls, bracket: str, container: object) -> _Close:
        made = cls(bracket)
        made.container = id(container)
        return made


class _Text(str):
    """Literal output on the work stack (a separator and key), as opposed to a value."""


def _encode(value: Any) -> str:
    """The iterative twin of json.dumps: a stack of values still to write and literal text."""
    parts: list[str] = []
    open_ids: set[int] = set()  # containers being written: meeting one again is a cycle
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, _Close):
            open_ids.discard(item.container)
            parts.append(item)
        elif isinstance(item, _Text):
            parts.append(item)
        elif isinstance(item, dict | list | tuple):
            if id(item) in open_ids:
                raise ValueError("Circular reference detected")
            open_ids.add(id(item))
            _push_container(item, parts, todo)
        else:
            parts.append(_scalar(item))
    return "".join(parts)


def _push_container(
    container: dict[Any, Any] | list[Any] | tuple[Any, ...], parts: list[str], todo: list[Any]
) -> None:
    # Pushed in reverse so that popping writes them in order.
    if isinstance(container, dict):
        parts.append("{")
        todo.append(_Close.of("}", container))
        entries = list(container.items())
        for index in range(len(entries) - 1, -1, -1):
            key, child = entries[index]
            todo.append(child)
            todo.append(_Text(("," if index else "") + _key_text(key) + ":"))
        return
    parts.append("[")
    todo.append(_Close.of("]", container))
    for index in range(len(container) - 1, -1, -1):
        todo.append(container[index])
        if index:
            todo.append(_Text(","))


def _key_text(key: Any) -> str:
    # The key conversions json.dumps makes (its default skipkeys=False).
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if key is None or isinstance(key, bool | int | float):
        return encode_basestring_ascii(_scalar(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    # Before int: True is an int in Python.
    if value is None or isinstance(value, bool):
        return _LITERALS[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_LITERALS = {None: "null", True: "true", False: "false"}


def _float(value: float) -> str:
    # json.dumps's spelling, NaN and the infinities included (its allow_nan=True).
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)
