"""YAML parsed the way go-yaml v2 parses watches.yaml for the Go operator.

Step 3a of :func:`ansible_operator.config.watches.load_watches` (start-up and
`ansible-operator validate`); :mod:`.gojson` then decodes the result onto the
watches schema. PyYAML's SafeLoader implements YAML 1.1 too, but resolves
plain scalars differently from go-yaml v2; :class:`GoYamlLoader` uses
go-yaml's rules instead: `y`/`n`/`on`/`off` are booleans, `1e3` and `08` are
floats, `0o17` is an int, `1:20` and timestamps stay strings. Map keys become
strings as sigs.k8s.io/yaml makes them (`on:` -> "true", `1.0:` -> "1").
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal
from typing import Any

import yaml

_TAG = "tag:yaml.org,2002:"
_WORDS: dict[str, tuple[str, Any]] = {}
for _words, _resolved in (
    ("y Y yes Yes YES true True TRUE on On ON", ("bool", True)),
    ("n N no No NO false False FALSE off Off OFF", ("bool", False)),
    ("~ null Null NULL", ("null", None)),
    (".nan .NaN .NAN", ("float", math.nan)),
    (".inf .Inf .INF +.inf +.Inf +.INF", ("float", math.inf)),
    ("-.inf -.Inf -.INF", ("float", -math.inf)),
):
    _WORDS.update(dict.fromkeys(_words.split(), _resolved))
_WORDS[""] = ("null", None)
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO]?[0-7]+|0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9](_?[0-9])*([eE][-+]?[0-9](_?[0-9])*)?")
_INT64 = 1 << 63
_UINT64 = 1 << 64
_YAML_PREFIX = "error converting YAML to JSON: "


def _go_int(text: str) -> int | None:
    # strconv.ParseInt(text, 0, 64), then ParseUint for what only fits unsigned.
    if not _INT.fullmatch(text):
        return None
    sign, body = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
    prefix = body[:2].lower()
    base = {"0x": 16, "0b": 2, "0o": 8}.get(prefix)
    if base is not None:
        value = sign * int(body[2:], base)
    elif body.startswith("0") and len(body) > 1:
        value = sign * int(body[1:], 8)
    else:
        value = sign * int(body)
    if -_INT64 <= value < _INT64 or (text[0] not in "+-" and 0 <= value < _UINT64):
        return value
    return None


def resolve_scalar(text: str) -> tuple[str, Any]:
    """(tag suffix, value) that go-yaml v2 gives an untagged plain scalar."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[:1]
    if first == "." and _DOT_FLOAT.fullmatch(text):
        return "float", float(text.replace("_", ""))
    if first and first in "+-0123456789":
        plain = text.replace("_", "")  # go-yaml drops every underscore first
        integer = _go_int(plain)
        if integer is not None:
            return "int", integer
        if _FLOAT.fullmatch(plain) and not math.isinf(number := float(plain)):
            return "float", number  # Go refuses out-of-range floats: they stay strings
    return "str", text


def format_float32(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32) with go-yaml's names for the specials."""
    if math.isnan(value):
        return ".nan"
    try:
        single: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    for digits in range(1, 10):  # the shortest decimal that reads back as the same float32
        text = f"{abs(single):.{digits - 1}e}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == abs(single):
            break
    mantissa, exponent_text = text.split("e")
    figures = mantissa.replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    if exponent < -4 or exponent >= 6:  # Go uses 6 as the precision for shortest 'g'
        body = figures[0] + ("." + figures[1:] if len(figures) > 1 else "")
        return f"{sign}{body}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return sign + format(Decimal(f"{figures}e{exponent - len(figures) + 1}"), "f")


def _key_text(key: object, node: yaml.Node) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return format_float32(key)
    if isinstance(key, str):
        return key
    shown = "null" if key is None else type(key).__name__
    raise yaml.constructor.ConstructorError(
        None, None, f"unsupported map key of type {shown}", node.start_mark
    )


class GoYamlLoader(yaml.SafeLoader):
    """A SafeLoader with go-yaml v2's scalar resolution and string map keys."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            if value == "<<":
                return _TAG + "merge"
            return _TAG + resolve_scalar(value)[0]
        resolved: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return resolved


def _construct_tagged(loader: GoYamlLoader, node: yaml.ScalarNode) -> Any:
    # Explicit tags (`!!int "5"`) resolve the text and must agree, as in go-yaml.
    text = loader.construct_scalar(node)
    wanted = node.tag.removeprefix(_TAG)
    kind, value = resolve_scalar(text)
    if kind == wanted:
        return value
    if wanted == "float" and kind == "int":
        return float(value)
    raise yaml.constructor.ConstructorError(
        None, None, f"cannot decode !!{kind} `{text}` as a !!{wanted}", node.start_mark
    )


def _construct_mapping(loader: GoYamlLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = _key_text(loader.construct_object(key_node, deep=True), key_node)
        result[key] = loader.construct_object(value_node, deep=True)
    return result


def _construct_binary(loader: GoYamlLoader, node: yaml.ScalarNode) -> str:
    data: bytes = yaml.SafeLoader.construct_yaml_binary(loader, node)
    return data.decode("utf-8", "replace")


def _construct_text(loader: GoYamlLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


for _tag in ("bool", "int", "float", "null"):
    GoYamlLoader.add_constructor(_TAG + _tag, _construct_tagged)
GoYamlLoader.add_constructor(_TAG + "map", _construct_mapping)
GoYamlLoader.add_constructor(_TAG + "binary", _construct_binary)
# go-yaml hands timestamps to interface{} targets as their text, and a plain
# "<<" outside a key is just the string "<<".
GoYamlLoader.add_constructor(_TAG + "timestamp", _construct_text)
GoYamlLoader.add_constructor(_TAG + "merge", _construct_text)


class DecodeFailure(Exception):
    """Why a document cannot be decoded.

    `path` is where (empty for the whole document), `problem` says what is
    wrong in our words, `reference` in the Go operator's, when known.
    """

    def __init__(self, path: str, problem: str, reference: str | None = None) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem
        self.reference = reference


def parse_yaml(text: str) -> Any:
    """The first YAML document of `text` (go-yaml v2 ignores the rest); None when there is none."""
    try:
        return _first_document(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f"line {mark.line + 1}: " if mark else ""
        problem = (error.problem or error.context or "invalid YAML").replace(
            "are not allowed here", "are not allowed in this context"
        )
        # Syntax errors read as libyaml's, which go-yaml ports; what our
        # constructors refuse has no exact Go counterpart to quote.
        constructor = isinstance(error, yaml.constructor.ConstructorError)
        reference = None if constructor else f"{_YAML_PREFIX}yaml: {line}{problem}"
        raise DecodeFailure("", f"invalid YAML: {line}{problem}", reference) from None
    except yaml.YAMLError as error:  # e.g. control characters, found before parsing starts
        raise DecodeFailure("", f"invalid YAML: {' '.join(str(error).split())}") from None


def _first_document(text: str) -> Any:
    loader = GoYamlLoader(text)
    try:
        has_document: bool = loader.check_data()  # type: ignore[no-untyped-call]
        return loader.get_data() if has_document else None
    finally:
        loader.dispose()
