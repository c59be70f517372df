"""The user metrics API's requests, decoded the way the Go operator's encoding/json reads them.

Where this sits: observability/usermetrics.py calls `decode_request(body)` for every
POST a role's `osdk_metric` task sends, then `kind_of(spec)` for the one metric
section it carries; both raise `UserMetricError` with the reason the role sees
(400). The request format and the Go decoder's rules (unknown keys ignored, keys
matched case-insensitively, null = absent, trailing data ignored) are described in
observability/usermetrics.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "CounterOp",
    "GaugeOp",
    "MetricKind",
    "ObserveOp",
    "UserMetricError",
    "UserMetricSpec",
    "decode_request",
    "kind_of",
]

MetricKind = Literal["counter", "gauge", "histogram", "summary"]


class UserMetricError(ValueError):
    """A request the API rejects with 400; str(error) is the response body (without newline)."""


@dataclass(frozen=True, slots=True)
class CounterOp:
    increment: bool = False
    add: float = 0.0


@dataclass(frozen=True, slots=True)
class GaugeOp:
    set: float = 0.0
    increment: bool = False
    decrement: bool = False
    add: float = 0.0
    subtract: float = 0.0
    set_to_current_time: bool = False


@dataclass(frozen=True, slots=True)
class ObserveOp:
    observe: float = 0.0


@dataclass(frozen=True, slots=True)
class UserMetricSpec:
    """One decoded request; a section is None when absent or null."""

    name: str = ""
    description: str = ""
    counter: CounterOp | None = None
    gauge: GaugeOp | None = None
    histogram: ObserveOp | None = None
    summary: ObserveOp | None = None


# The Go operator's request struct: JSON key -> type, per object, and the Go
# type names its decoding errors mention.
_SCALARS: Final[Mapping[str, Mapping[str, type[object]]]] = {
    "": {"name": str, "description": str},
    "counter": {"increment": bool, "add": float},
    "gauge": {
        "set": float,
        "increment": bool,
        "decrement": bool,
        "add": float,
        "subtract": float,
        "set_to_current_time": bool,
    },
    "histogram": {"observe": float},
    "summary": {"observe": float},
}
_SECTIONS: Final[Mapping[str, tuple[type[object], str]]] = {
    "counter": (CounterOp, "metrics.UserMetricCounter"),
    "gauge": (GaugeOp, "metrics.UserMetricGauge"),
    "histogram": (ObserveOp, "metrics.UserMetricHistogram"),
    "summary": (ObserveOp, "metrics.UserMetricSummary"),
}
_GO_TYPES: Final[Mapping[type[object], str]] = {bool: "bool", float: "float64", str: "string"}


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_error(value: object, path: str, go_type: str) -> UserMetricError:
    # Worded like Go's json.UnmarshalTypeError, which the Go operator returns verbatim.
    return UserMetricError(
        f"json: cannot unmarshal {_json_type(value)} into Go struct field "
        f"UserMetric.{path} of type {go_type}"
    )


def _scalar(value: object, want: type[object], path: str) -> object:
    go_type = _GO_TYPES[want]
    if want is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _type_error(value, path, go_type)
        try:
            number = float(value)
        except OverflowError:  # an integer literal beyond float64
            number = math.inf
        if not math.isfinite(number):
            raise UserMetricError(
                f"json: cannot unmarshal number {value} into Go struct field "
                f"UserMetric.{path} of type float64"
            )
        return number
    if not isinstance(value, want):
        raise _type_error(value, path, go_type)
    return value


def _decode_object(document: Mapping[str, object], section: str) -> dict[str, object]:
    """The fields `document` sets, with JSON keys matched to names the way Go matches tags.

    Go prefers an exact match and falls back to a case-insensitive one; as every
    name here is lower case, matching lower-cased keys gives the same result.
    Unknown keys are ignored and null leaves a field at its zero value.
    """
    names = {name: name for name in _SCALARS[section]}
    if not section:
        names.update({name: name for name in _SECTIONS})
    values: dict[str, object] = {}
    for key, value in document.items():
        name = names.get(key.lower())
        if name is None or value is None:
            continue
        path = f"{section}.{name}" if section else name
        if name in _SECTIONS and not section:
            target, go_type = _SECTIONS[name]
            if not isinstance(value, dict):
                raise _type_error(value, path, go_type)
            values[name] = target(**_decode_object(value, name))
        else:
            values[name] = _scalar(value, _SCALARS[section][name], path)
    return values


def decode_request(body: bytes) -> UserMetricSpec:
    """Read a request body as Go's json.Decoder reads it into the Go operator's struct."""
    text = body.decode("utf-8", errors="replace").lstrip(" \t\r\n")
    if not text:
        raise UserMetricError("EOF")
    try:
        # raw_decode stops after the first value: Go's Decoder ignores what follows too.
        document, _ = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(text)
    except json.JSONDecodeError as err:
        raise UserMetricError(f"invalid JSON: {err}") from None
    if document is None:
        return UserMetricSpec()  # Go decodes null into a struct as a no-op
    if not isinstance(document, dict):
        raise UserMetricError(
            f"json: cannot unmarshal {_json_type(document)} into Go value of type "
            "metrics.UserMetric"
        )
    values = _decode_object(document, "")
    return UserMetricSpec(**values)  # type: ignore[arg-type]  # types checked by _scalar


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN and Infinity; JSON (and Go) do not.
    raise json.JSONDecodeError(f"invalid literal {name}", name, 0)


def kind_of(spec: UserMetricSpec) -> MetricKind:
    """The single metric section of a request; raises the Go operator's messages otherwise."""
    sections: tuple[tuple[MetricKind, object], ...] = (
        ("counter", spec.counter),
        ("gauge", spec.gauge),
        ("histogram", spec.histogram),
        ("summary", spec.summary),
    )
    given = [kind for kind, section in sections if section is not None]
    if len(given) > 1:
        raise UserMetricError("only one metric can be processed at a time")
    if not given:
        raise UserMetricError("a request should contain at least one metric")
    return given[0]
