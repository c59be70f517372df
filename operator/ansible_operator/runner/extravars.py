"""The extra vars one Ansible run receives, and the text of its `env/extravars` file.

Where this sits: before each Ansible run for a custom resource the reconciler
calls `build_extravars` with the object as it stands at that moment and the
watch's settings; the runner then writes `render(...)` of the result to
`env/extravars` in the run's ansible-runner directory, which ansible-runner
hands to ansible-playbook as `-e @env/extravars`. Extra vars have the highest
precedence in Ansible, so nothing in a role (defaults, vars files) overrides them.

The variables are the Go operator's, so roles written for it run unchanged:

* every top-level key of `spec`, snake_cased unless the watch says otherwise;
* `ansible_operator_meta`: `{"name": ..., "namespace": ...}` of the object;
* `_<group>_<kind>`: the whole object, and `_<group>_<kind>_spec`: its `spec`
  exactly as written (never snake_cased);
* then the watch's `vars`, then, on finalizer runs, the finalizer's `vars`;
  each later item replaces an earlier one with the same name.

Nesting is limited to `MAX_DEPTH` levels below each top-level field (spec,
status...): `build_extravars` raises errors.InvalidResource for a deeper
object, with a message naming the field and the path, so the reconciler
reports it instead of starting a run that Ansible could not template. Every
walk here is then bounded, and the copies use runner.tree's iterative walks
anyway. docs/runner.md explains the limit.

Deliberate difference: the reconciler passes `mark_unsafe=True` unless the watch
sets `markUnsafe: false` (the Go operator's default is false). Marked strings are
data to Ansible, never templates, so `{{ lookup('pipe', ...) }}` in a custom
resource cannot run commands in the operator pod. docs/security.md explains it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ansible_operator.errors import InvalidResource
from ansible_operator.runner.paramconv import go_lower, map_to_snake
from ansible_operator.runner.tree import deeper_than, describe_path, rebuild

__all__ = [
    "MAX_DEPTH",
    "META_VAR",
    "UNSAFE_MARKER",
    "build_extravars",
    "check_depth",
    "mark_unsafe",
    "object_key",
    "render",
]

_log = logging.getLogger(__name__)

# Ansible's JSON decoder turns {"__ansible_unsafe": "text"} into an unsafe string.
UNSAFE_MARKER = "__ansible_unsafe"
META_VAR = "ansible_operator_meta"

#: How many levels of maps and lists a top-level field of a custom resource may
#: have (`spec: {a: {b: 1}}` has 2). Real CRDs stay below about 30. Ansible
#: 2.19 fails to template a value into task arguments from about 160 levels,
#: and to load extra vars at all from about 480 (docs/runner.md has the figures).
MAX_DEPTH = 100
# metadata.managedFields mirrors spec and status 4 levels further down
# (managedFields[i].fieldsV1.f:spec...), so metadata is allowed that much more.
_METADATA_EXTRA_DEPTH = 4


def object_key(group: str, kind: str) -> str:
    """The name of the variable holding the whole object: `_<group>_<kind lower-cased>`.

    Dots and dashes become underscores so the name is a valid Ansible variable;
    the group keeps its case. The core group is empty, hence `__secret`.
    """
    return f"_{group}_{go_lower(kind)}".replace(".", "_").replace("-", "_")


def mark_unsafe(value: Any) -> Any:
    """`value` with every string in it wrapped as `{"__ansible_unsafe": string}`.

    Lists are rebuilt element by element and maps value by value (keys are never
    wrapped: the marker only exists for values). Numbers, booleans and null are
    returned as they are. The input is not modified.
    """
    return rebuild(value, leaf=_wrap_string)


def _wrap_string(value: Any) -> Any:
    return {UNSAFE_MARKER: value} if isinstance(value, str) else value


# `build_extravars` has a keyword argument named mark_unsafe; this alias lets it
# reach the function without the name clash.
_mark_unsafe = mark_unsafe


def _plain(value: Any) -> Any:
    """A deep copy made of dicts and lists only, which json can encode.

    The returned extra vars must not share containers with the caller's object
    (or with the watch configuration, which lives for the whole process).
    """
    return rebuild(value)


def _string_field(mapping: Any, field: str) -> str:
    # Like the Go accessors GetName/GetNamespace: missing or not a string reads as "".
    if isinstance(mapping, Mapping):
        found = mapping.get(field)
        if isinstance(found, str):
            return found
    return ""


def _without_connection_vars(
    top_level: Mapping[str, Any], metadata: Any, kind: str
) -> dict[str, Any]:
    """Drop spec keys that would become Ansible's own `ansible_*` variables.

    Extra vars outrank the inventory, so a CR setting `ansibleBecomeExe` or
    `ansible_connection` would choose what the operator executes; marking the
    value unsafe does not help because Ansible uses it as a setting, not as a
    template. With the secure default such keys never reach the run (the raw
    spec stays readable in `_<group>_<kind>_spec`); `markUnsafe: false`
    restores the reference's behaviour.
    """
    kept = {}
    for key, value in top_level.items():
        if isinstance(key, str) and key.lower().startswith("ansible_"):
            _log.warning(
                "%s/%s %s: spec key %r is not passed to Ansible: it would set one of "
                "Ansible's own variables (set markUnsafe: false to allow it)",
                _string_field(metadata, "namespace"),
                _string_field(metadata, "name"),
                kind,
                key,
            )
            continue
        kept[key] = value
    return kept


def check_depth(cr: Mapping[str, Any]) -> None:
    """Raise InvalidResource if a top-level field of `cr` is nested deeper than MAX_DEPTH.

    spec is checked first, then status, then the rest, so the message names the
    field the user wrote rather than its mirror in metadata.managedFields.
    """
    order = {"spec": 0, "status": 1}
    for field in sorted(cr, key=lambda name: order.get(name, 2)):
        limit = MAX_DEPTH + (_METADATA_EXTRA_DEPTH if field == "metadata" else 0)
        path = deeper_than(cr[field], limit)
        if path is not None:
            raise InvalidResource(
                f"{field} nested deeper than {limit} levels at {describe_path(str(field), path)}:"
                f" the operator passes at most {MAX_DEPTH} levels to Ansible"
            )


def build_extravars(
    cr: Mapping[str, Any],
    *,
    group: str,
    kind: str,
    snake_case: bool,
    mark_unsafe: bool,
    watch_vars: Mapping[str, Any] | None = None,
    finalizer_vars: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The extra vars for one run against `cr`, in the Go operator's order of precedence.

    `snake_case` and `mark_unsafe` are the watch's `snakeCaseParameters` and
    `markUnsafe`. Marking applies to everything taken from the object (the spec
    keys, `_<group>_<kind>` and `_<group>_<kind>_spec`), never to
    `ansible_operator_meta` or to `watch_vars`/`finalizer_vars`, which come from the
    operator author. Pass `finalizer_vars` only for a finalizer run.
    A `spec` that is missing or not a map counts as `{}` for the spec-derived
    variables; `_<group>_<kind>` still shows the object as it is.
    Raises errors.InvalidResource for an object nested too deep (`check_depth`).
    """
    check_depth(cr)
    obj = _plain(cr)
    metadata = obj.get("metadata")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        _log.info(
            "%s/%s %s has no spec map; its spec variables are empty",
            _string_field(metadata, "namespace"),
            _string_field(metadata, "name"),
            kind,
        )
        spec = {}
    protect = _mark_unsafe if mark_unsafe else _plain

    # Top-level spec keys first: every later entry may replace one of them.
    top_level = map_to_snake(spec) if snake_case else spec
    if mark_unsafe:
        top_level = _without_connection_vars(top_level, metadata, kind)
    extravars: dict[str, Any] = {key: protect(value) for key, value in top_level.items()}
    # Names only (Kubernetes restricts their characters), so never marked.
    extravars[META_VAR] = {
        "namespace": _string_field(metadata, "namespace"),
        "name": _string_field(metadata, "name"),
    }
    key = object_key(group, kind)
    extravars[key] = protect(obj)
    extravars[f"{key}_spec"] = protect(spec)
    extravars.update(_plain(watch_vars or {}))
    extravars.update(_plain(finalizer_vars or {}))
    return extravars


# Go's encoder escapes these inside strings (HTML safety); JSON readers see no
# difference, but matching it keeps the file byte-identical to the Go operator's.
_GO_STRING_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GO_ESCAPED = re.compile("[<>&\u2028\u2029]")
# A lone surrogate (possible in a Python str, impossible in UTF-8) would make writing
# the file fail; Go writes U+FFFD for text that is not valid UTF-8, and so do we.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def render(extravars: Mapping[str, Any]) -> str:
    """The exact text of `env/extravars`: what Go's json.Marshal writes for the same map.

    Compact, map keys sorted at every level, non-ASCII written as UTF-8 (the caller
    must write the file as UTF-8), integers of any size written in full, floats in
    Go's notation. Raises TypeError for a value JSON cannot hold and ValueError for
    NaN or infinity (Go refuses both too).
    """
    parts: list[str] = []
    _encode(extravars, parts)
    text = _GO_ESCAPED.sub(lambda found: _GO_STRING_ESCAPES[found.group()], "".join(parts))
    return _LONE_SURROGATE.sub("\ufffd", text)


def _encode(value: Any, parts: list[str]) -> None:
    # bool before int: True is an int in Python.
    if isinstance(value, str):
        parts.append(json.dumps(value, ensure_ascii=False))
    elif value is None or isinstance(value, bool):
        parts.append(json.dumps(value))
    elif isinstance(value, int):
        parts.append(str(int(value)))
    elif isinstance(value, float):
        parts.append(_go_float(value))
    elif isinstance(value, Mapping):
        _encode_mapping(value, parts)
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _encode(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"extra vars cannot hold a {type(value).__name__}: {value!r}")


def _encode_mapping(mapping: Mapping[Any, Any], parts: list[str]) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise TypeError(f"extra vars map keys must be strings, not {key!r}")
    parts.append("{")
    # Code-point order is the byte order of the UTF-8 encoding, which Go sorts by.
    for index, key in enumerate(sorted(mapping)):
        if index:
            parts.append(",")
        parts.append(json.dumps(key, ensure_ascii=False))
        parts.append(":")
        _encode(mapping[key], parts)
    parts.append("}")


def _go_float(number: float) -> str:
    """A float64 in encoding/json's notation: shortest digits, exponent only when extreme."""
    if not math.isfinite(number):
        raise ValueError(f"extra vars cannot hold {number!r} (not valid JSON)")
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        # repr already uses an exponent here, with the same shortest digits as Go;
        # Go then drops a leading zero from a two-digit negative exponent (e-07 → e-7).
        text = repr(number)
        mantissa, _, exponent = text.partition("e")
        if exponent.startswith("-0") and len(exponent) == 3:
            exponent = "-" + exponent[2]
        return f"{mantissa}e{exponent}"
    # Fixed notation with the shortest digits that round-trip: 1.0 → "1", 1e20 → "1" + 20 zeros.
    return format(Decimal(repr(number)).normalize(), "f")
