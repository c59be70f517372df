"""The text of a run's `env/extravars` file, byte for byte what the Go operator writes.

Where this sits: runner/privatedir.py writes `render(request.extravars)` to
`env/extravars` before every run; ansible-runner hands the file to
ansible-playbook as `-e @env/extravars`. The extra vars themselves are built by
launch/extravars.py. Writing them the way Go's json.Marshal does (sorted keys,
HTML-safe escapes, Go's float notation) keeps the file identical to the Go
operator's, so diffs of the two operators' runs show only real differences.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["render"]

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
