"""Decoding parsed watches.yaml onto Go types, as sigs.k8s.io/yaml and encoding/json do it.

Step 3b of :func:`ansible_operator.config.watches.load_watches` (start-up and
`ansible-operator validate`), after :mod:`.goyaml` has parsed the text. The Go
operator's struct for one entry is described here as :data:`ALIAS` (built
from :class:`GoType` values), and :func:`decode` maps data onto it with the
JSON round trip's rules: keys match field names case-insensitively and the
byte-wise last spelling wins, numbers and booleans are stringified for string
fields, numbers in free-form maps become float64, nulls reset only pointers,
maps and slices, and type errors carry encoding/json's wording (to quote it
in ours).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ansible_operator.config.durations import DurationError, parse_go_duration
from ansible_operator.config.goyaml import DecodeFailure, format_float32, resolve_scalar

_INT64 = 1 << 63
_JSON_PREFIX = "error unmarshaling JSON: while decoding JSON: "
_YAML_PREFIX = "error converting YAML to JSON: "


def json_number(value: float) -> str:
    """How encoding/json prints a float64 (used to quote numbers in Go's error wording)."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(text), "f")
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{exponent[0]}{exponent[1:].lstrip('0') or '0'}"


@dataclass(frozen=True)
class GoType:
    """A Go type, as far as decoding into it is concerned.

    `kind` is one of string, bool, int, duration, any, map, list, struct;
    `go` is the type's name in Go's messages; `nullable` says whether a JSON
    null resets it (pointers, maps, slices) or is ignored (everything else).
    """

    kind: str
    go: str
    nullable: bool = False
    elem: GoType | None = None
    fields: tuple[GoField, ...] = ()
    struct: str = ""


@dataclass(frozen=True)
class GoField:
    """A struct field: `name` is what encoding/json matches keys against."""

    name: str
    type: GoType

    @property
    def key(self) -> str:
        """The spelling our documentation and decoded states use (lower camelCase)."""
        return self.name[:1].lower() + self.name[1:]


STRING = GoType("string", "string")
BOOL_POINTER = GoType("bool", "bool", nullable=True)
INT = GoType("int", "int")
DURATION_POINTER = GoType("duration", "v1.Duration", nullable=True)
ANY = GoType("any", "interface {}", nullable=True)


@dataclass(frozen=True)
class Where:
    """A position in the document: `path` for people, struct/stack for Go's wording."""

    path: str = ""
    struct: str = ""
    stack: tuple[str, ...] = ()

    def field(self, spelling: str, name: str, struct: str) -> Where:
        return Where(_join(self.path, spelling), struct, (*self.stack, name))

    def key(self, key: str) -> Where:
        return Where(_join(self.path, key), self.struct, (*self.stack, key))

    def item(self, index: int) -> Where:
        return Where(f"{self.path}[{index}]", self.struct, self.stack)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(frozen=True)
class Note:
    """Something worth a warning: an `unknown` key, or a `duplicate` spelling of one."""

    kind: str
    path: str
    detail: str = ""


def _fold(text: str) -> str:
    # encoding/json compares with Unicode simple folding: besides ASCII case,
    # the long s and the Kelvin sign fold onto 's' and 'k' (lower() does K).
    return text.lower().replace("\u017f", "s")


def field_for(struct_type: GoType, spelling: str) -> GoField | None:
    """The field encoding/json would fill from key `spelling` (exact match first, then folded)."""
    for candidate in struct_type.fields:
        if candidate.name == spelling:
            return candidate
    folded = _fold(spelling)
    return next((f for f in struct_type.fields if _fold(f.name) == folded), None)


def _json_kind(raw: Any, *, exact: bool = False) -> str:
    if isinstance(raw, bool):
        return "bool"
    if isinstance(raw, int):
        return f"number {raw}" if exact else "number"
    if isinstance(raw, float):
        return f"number {json_number(raw)}" if exact else "number"
    if isinstance(raw, str):
        return "string"
    return "array" if isinstance(raw, list) else "object"


def describe(raw: Any) -> str:
    """A value as a person would name it in a message."""
    if isinstance(raw, bool):
        return f"the boolean {str(raw).lower()}"
    if isinstance(raw, int | float):
        return f"the number {raw}"
    if isinstance(raw, str):
        return f"the string {raw!r}"
    return "a list" if isinstance(raw, list) else "a mapping"


_EXPECTED = {
    "string": "a string",
    "bool": "true or false",
    "int": "an integer",
    "map": "a mapping",
    "list": "a list",
    "struct": "a mapping",
}


def mismatch(raw: Any, go_type: GoType, where: Where) -> DecodeFailure:
    """The failure for a value of the wrong JSON type, with encoding/json's wording."""
    what = _json_kind(raw, exact=go_type.kind == "int")
    target = (
        f"Go struct field {where.struct}.{'.'.join(where.stack)}" if where.stack else "Go value"
    )
    reference = f"{_JSON_PREFIX}json: cannot unmarshal {what} into {target} of type {go_type.go}"
    problem = f"expected {_EXPECTED[go_type.kind]}, got {describe(raw)}"
    if go_type.kind == "bool" and isinstance(raw, str) and resolve_scalar(raw)[0] == "bool":
        problem += " (quoted, so YAML reads a string: write the boolean without quotes)"
    return DecodeFailure(where.path, problem, reference)


def _finite(raw: Any, where: Where) -> None:
    if isinstance(raw, float) and not math.isfinite(raw):
        shown = "NaN" if math.isnan(raw) else ("+Inf" if raw > 0 else "-Inf")
        raise DecodeFailure(
            where.path,
            f"{format_float32(raw)} cannot be represented in JSON",
            f"{_YAML_PREFIX}json: unsupported value: {shown}",
        )


def _zero(go_type: GoType) -> Any:
    return {"string": "", "int": 0, "bool": False, "struct": {}}.get(go_type.kind)


_Decoder = Callable[[Any, Any, GoType, Where, list[Note]], Any]


def decode(current: Any, raw: Any, go_type: GoType, where: Where, notes: list[Note]) -> Any:
    """`raw` decoded into `go_type` on top of `current` (the value an earlier spelling left).

    Structs and maps merge into `current`, list items decode onto the item at
    the same index, as encoding/json does when it decodes into a filled value.
    Structs come back as dicts keyed by :attr:`GoField.key`.
    """
    if raw is None:
        return None if go_type.nullable else current
    if go_type.kind != "string":
        _finite(raw, where)
    return _DECODERS[go_type.kind](current, raw, go_type, where, notes)


def _decode_string(_current: Any, raw: Any, go_type: GoType, where: Where, _n: list[Note]) -> str:
    # sigs.k8s.io/yaml stringifies scalars headed for string fields.
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return format_float32(raw)
    if isinstance(raw, str):
        return raw
    raise mismatch(raw, go_type, where)


def _decode_bool(_current: Any, raw: Any, go_type: GoType, where: Where, _n: list[Note]) -> bool:
    if isinstance(raw, bool):
        return raw
    raise mismatch(raw, go_type, where)


def _decode_int(_current: Any, raw: Any, go_type: GoType, where: Where, _n: list[Note]) -> int:
    number = isinstance(raw, int | float) and not isinstance(raw, bool)
    if number and raw == int(raw) and -_INT64 <= raw < _INT64:
        return int(raw)
    raise mismatch(raw, go_type, where)


def _decode_duration(_current: Any, raw: Any, _type: GoType, where: Where, _n: list[Note]) -> float:
    # metav1.Duration unmarshals itself from a JSON string: no stringifying.
    if not isinstance(raw, str):
        reference = f"json: cannot unmarshal {_json_kind(raw)} into Go value of type string"
        raise DecodeFailure(
            where.path,
            f'expected a duration string such as "30s" or "1h30m", got {describe(raw)}',
            _JSON_PREFIX + reference,
        )
    try:
        return parse_go_duration(raw)
    except DurationError as error:
        raise DecodeFailure(
            where.path,
            f"{error}: write a number with a unit (ns, us, ms, s, m, h), e.g. 30s or 1h30m",
            f"{_JSON_PREFIX}{error}",
        ) from None


def _decode_any(_current: Any, raw: Any, go_type: GoType, where: Where, notes: list[Note]) -> Any:
    # interface{} targets go through JSON: every number comes back a float64,
    # which Go prints without a fraction when it is integral.
    _finite(raw, where)
    if raw is None or isinstance(raw, bool | str):
        return raw
    if isinstance(raw, int | float):
        number = float(raw)
        return int(number) if number.is_integer() and abs(number) < 1e21 else number
    if isinstance(raw, list):
        return [
            _decode_any(None, item, go_type, where.item(index), notes)
            for index, item in enumerate(raw)
        ]
    if isinstance(raw, dict):
        return {
            key: _decode_any(None, raw[key], go_type, where.key(key), notes) for key in sorted(raw)
        }
    raise DecodeFailure(where.path, f"a YAML {type(raw).__name__} has no JSON equivalent")


def _decode_map(current: Any, raw: Any, go_type: GoType, where: Where, notes: list[Note]) -> Any:
    if not isinstance(raw, dict):
        raise mismatch(raw, go_type, where)
    assert go_type.elem is not None
    merged = dict(current) if isinstance(current, dict) else {}
    for key in sorted(raw):
        value = decode(None, raw[key], go_type.elem, where.key(key), notes)
        merged[key] = _zero(go_type.elem) if value is None else value
    return merged


def _decode_list(current: Any, raw: Any, go_type: GoType, where: Where, notes: list[Note]) -> Any:
    if not isinstance(raw, list):
        raise mismatch(raw, go_type, where)
    assert go_type.elem is not None
    old = current if isinstance(current, list) else []
    out = []
    for index, item in enumerate(raw):
        before = old[index] if index < len(old) else None
        value = decode(before, item, go_type.elem, where.item(index), notes)
        out.append(_zero(go_type.elem) if value is None else value)
    return out


def _decode_struct(current: Any, raw: Any, go_type: GoType, where: Where, notes: list[Note]) -> Any:
    if not isinstance(raw, dict):
        raise mismatch(raw, go_type, where)
    state = dict(current) if isinstance(current, dict) else {}
    spelled: dict[str, str] = {}
    # The JSON round trip sorts keys byte-wise and later keys overwrite
    # earlier ones, so of two spellings of one field the last in that order wins.
    for spelling in sorted(raw):
        target = field_for(go_type, spelling)
        if target is None:
            notes.append(Note("unknown", _join(where.path, spelling)))
            continue
        inner = where.field(spelling, target.name, go_type.struct)
        if target.key in spelled:
            notes.append(Note("duplicate", inner.path, f"{spelled[target.key]!r} and {spelling!r}"))
        spelled[target.key] = spelling
        state[target.key] = decode(state.get(target.key), raw[spelling], target.type, inner, notes)
    return state


_DECODERS: dict[str, _Decoder] = {
    "string": _decode_string,
    "bool": _decode_bool,
    "int": _decode_int,
    "duration": _decode_duration,
    "any": _decode_any,
    "map": _decode_map,
    "list": _decode_list,
    "struct": _decode_struct,
}


# The Go operator's types for watches.yaml, with their Go names (for the
# wording of errors) and which fields are pointers (for what null means).


def _struct(go: str, name: str, *fields: GoField, nullable: bool = False) -> GoType:
    return GoType("struct", go, nullable=nullable, fields=fields, struct=name)


def _strings(*names: str) -> tuple[GoField, ...]:
    return tuple(GoField(name, STRING) for name in names)


_VARS = GoType("map", "map[string]interface {}", nullable=True, elem=ANY)
_GVK = _struct("schema.GroupVersionKind", "GroupVersionKind", *_strings("Group", "Version", "Kind"))
_REQUIREMENT = _struct(
    "v1.LabelSelectorRequirement",
    "LabelSelectorRequirement",
    GoField("key", STRING),
    GoField("operator", GoType("string", "v1.LabelSelectorOperator")),
    GoField("values", GoType("list", "[]string", nullable=True, elem=STRING)),
)
_SELECTOR = _struct(
    "v1.LabelSelector",
    "LabelSelector",
    GoField("matchLabels", GoType("map", "map[string]string", nullable=True, elem=STRING)),
    GoField(
        "matchExpressions",
        GoType("list", "[]v1.LabelSelectorRequirement", nullable=True, elem=_REQUIREMENT),
    ),
)
_FINALIZER = _struct(
    "watches.Finalizer",
    "Finalizer",
    *_strings("Name", "Playbook", "Role"),
    GoField("Vars", _VARS),
    nullable=True,
)
#: One watches.yaml entry, as the Go operator's `alias` struct declares it
#: (field names, Go types, and which fields are pointers).
ALIAS = _struct(
    "watches.alias",
    "alias",
    *_strings("Group", "Version", "Kind", "Playbook", "Role"),
    GoField("Vars", _VARS),
    GoField("MaxRunnerArtifacts", INT),
    GoField("ReconcilePeriod", DURATION_POINTER),
    # Ours (docs/plan.md); the Go operator ignores both keys.
    GoField("DriftCheckPeriod", DURATION_POINTER),
    GoField("ObserveOnly", BOOL_POINTER),
    *(
        GoField(name, BOOL_POINTER)
        for name in (
            "ManageStatus",
            "WatchDependentResources",
            "WatchClusterScopedResources",
            "SnakeCaseParameters",
            "WatchAnnotationsChanges",
            "MarkUnsafe",
        )
    ),
    GoField("Blacklist", GoType("list", "[]schema.GroupVersionKind", nullable=True, elem=_GVK)),
    GoField("Finalizer", _FINALIZER),
    GoField("Selector", _SELECTOR),
)
WATCHES_FILE = GoType("list", "[]watches.alias", nullable=True, elem=ALIAS)
