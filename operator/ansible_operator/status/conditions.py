"""The status object of a custom resource: its conditions, how to read them and how to set one.

Where this sits: the reconciler reads `.status` of the live object, hands it to
`status.transitions` (before a run, after a run, on an internal error), which
uses this module to parse it (`parse_status`), change it (`set_condition`) and
turn it back into the map that the reconciler writes to the status
subresource (`Status.to_map`). Nothing here talks to Kubernetes.

The Go operator decides what the YAML looks like, so the parsing defaults and
the field names mirror it (docs/status.md):

* every key of `.status` other than `conditions` is carried over unchanged;
* entries of type Running, Successful or Failure (ours) are parsed field by
  field: missing or non-string `type` means Running, missing `status` means
  "True", missing `reason`/`message` mean "", any other field is dropped;
* entries of any other type (written by `k8s_status` or another controller)
  are kept as the raw maps they are, in place;
* entries that are not maps are dropped, with a log line.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal

_log = logging.getLogger(__name__)

ConditionType = Literal["Running", "Successful", "Failure"]

TYPE_RUNNING: Final = "Running"
TYPE_SUCCESSFUL: Final = "Successful"
TYPE_FAILURE: Final = "Failure"
MANAGED_TYPES: Final[frozenset[str]] = frozenset({TYPE_RUNNING, TYPE_SUCCESSFUL, TYPE_FAILURE})

TRUE: Final = "True"
FALSE: Final = "False"

# What the Go operator writes for a completion time it could not read (Go's
# zero time in its completion layout), e.g. one written by a pre-2024 operator.
ZERO_COMPLETION: Final = "0001-01-01T00:00:00+00:00"

# One dict lookup both recognises our types and narrows `str` to the Literal.
_MANAGED_BY_NAME: Final[dict[str, ConditionType]] = {
    TYPE_RUNNING: TYPE_RUNNING,
    TYPE_SUCCESSFUL: TYPE_SUCCESSFUL,
    TYPE_FAILURE: TYPE_FAILURE,
}


def _stamp_pattern(suffix: str) -> re.Pattern[str]:
    # Go's time.Parse with a "2006-01-02T15:04:05" prefix: a 4-digit year,
    # 2-digit month/day/minute/second, a 1- or 2-digit hour, and an optional
    # fraction of any length after "." or "," even though the layout has none.
    return re.compile(
        r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{1,2}):([0-9]{2}):([0-9]{2})"
        r"(?:[.,]([0-9]+))?" + re.escape(suffix)
    )


# lastTransitionTime: the reference's layout ends in a literal "Z", so any
# numeric offset (even +00:00) is rejected and replaced by "now".
_TRANSITION_TIME: Final = _stamp_pattern("Z")
# ansibleResult.completion: the layout ends in a literal "+00:00".
_COMPLETION_TIME: Final = _stamp_pattern("+00:00")


@dataclass(frozen=True, slots=True, kw_only=True)
class AnsibleResult:
    """Task counts of the last run for host `localhost`, and when the run ended.

    `completion` is written exactly as given: the runner layer produces it
    (see `normalize_completion` for the reference's format).
    """

    ok: int
    changed: int
    skipped: int
    failures: int
    completion: str

    def to_map(self) -> dict[str, Any]:
        """The `ansibleResult` map, with the reference's field names."""
        return {
            "ok": self.ok,
            "changed": self.changed,
            "skipped": self.skipped,
            "failures": self.failures,
            "completion": self.completion,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """One of the operator's own conditions (Running, Successful or Failure)."""

    type: ConditionType
    status: str
    reason: str
    message: str
    last_transition_time: datetime
    ansible_result: AnsibleResult | None = None

    def __post_init__(self) -> None:
        # Other types are never modelled: they stay raw maps (see Status).
        if self.type not in MANAGED_TYPES:
            raise ValueError(f"not an operator condition type: {self.type!r}")
        _require_aware(self.last_transition_time, name="last_transition_time")

    def to_map(self) -> dict[str, Any]:
        """The condition as the reference serialises it; `ansibleResult` only when set."""
        written: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": format_transition_time(self.last_transition_time),
        }
        if self.ansible_result is not None:
            written["ansibleResult"] = self.ansible_result.to_map()
        written["reason"] = self.reason
        written["message"] = self.message
        return written


# A condition of a type we do not own, kept exactly as it was read.
ForeignCondition = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Status:
    """A parsed `.status`: the keys other than `conditions`, and the condition list in order.

    The maps inside are private copies: nothing here aliases the input of
    `parse_status`, and `to_map` hands out fresh copies again.
    """

    custom: Mapping[str, Any]
    conditions: tuple[Condition | ForeignCondition, ...]

    def get(self, condition_type: ConditionType) -> Condition | None:
        """The first of our conditions with this type, as the reference looks it up."""
        for entry in self.conditions:
            if isinstance(entry, Condition) and entry.type == condition_type:
                return entry
        return None

    def to_map(self) -> dict[str, Any]:
        """The complete `.status` map to write: custom keys verbatim plus `conditions`."""
        written = copy.deepcopy(dict(self.custom))
        written["conditions"] = [
            entry.to_map() if isinstance(entry, Condition) else copy.deepcopy(dict(entry))
            for entry in self.conditions
        ]
        return written


def _require_aware(moment: datetime, *, name: str) -> None:
    """Reject naive datetimes: a local wall-clock time would be written as if it were UTC."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got {moment!r}")


def format_transition_time(moment: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, e.g. `2026-11-21T10:11:12Z` (Kubernetes' metav1.Time)."""
    utc = moment.astimezone(UTC)
    # Built by hand: strftime("%Y") does not zero-pad years below 1000 everywhere.
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        f"T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"
    )


def _match_to_datetime(match: re.Match[str]) -> datetime | None:
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = match.group(7) or ""
    microsecond = int((fraction + "000000")[:6])
    try:
        return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)
    except ValueError:
        # Out-of-range fields (hour 24, 31 February, year 0): Go rejects them too.
        return None


def parse_transition_time(text: str) -> datetime | None:
    """Read a lastTransitionTime as the reference does; None when it cannot."""
    match = _TRANSITION_TIME.fullmatch(text)
    return None if match is None else _match_to_datetime(match)


def normalize_completion(value: object) -> str:
    """A completion time re-read and re-written the way the reference does on every write.

    Accepts `YYYY-MM-DDTHH:MM:SS[.fraction]+00:00`; writes at most 8 fraction
    digits with trailing zeros (and a bare ".") removed. Anything else becomes
    `ZERO_COMPLETION`. The runner layer can use it on ansible-runner's
    `created` stamp to produce exactly what the Go operator writes.
    """
    if not isinstance(value, str):
        # The reference panics here; a readable placeholder is kinder.
        _log.warning("Completion time of ansibleResult is not a string: %r", value)
        return ZERO_COMPLETION
    match = _COMPLETION_TIME.fullmatch(value)
    moment = None if match is None else _match_to_datetime(match)
    if match is None or moment is None:
        _log.warning("Failed to read time of completion for ansible result: %r", value)
        return ZERO_COMPLETION
    # Nanoseconds are kept as digits: datetime would lose digits 7 and 8.
    nanos = ((match.group(7) or "") + "000000000")[:9]
    fraction = nanos[:8].rstrip("0")
    head = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    return f"{head}.{fraction}+00:00" if fraction else f"{head}+00:00"


def _parse_counter(raw: Mapping[str, Any], key: str) -> int:
    if key not in raw:
        return 0
    value = raw[key]
    # bool is an int subclass in Python, but JSON true is not a count.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    # The reference panics on a non-integer (the reconcile then fails forever).
    _log.warning("ansibleResult.%s is not an integer, using 0: %r", key, value)
    return 0


def _parse_ansible_result(raw: object) -> AnsibleResult | None:
    if not isinstance(raw, Mapping):
        return None
    # A missing completion is Go's zero time to the reference, silently.
    completion = normalize_completion(raw["completion"]) if "completion" in raw else ZERO_COMPLETION
    return AnsibleResult(
        ok=_parse_counter(raw, "ok"),
        changed=_parse_counter(raw, "changed"),
        skipped=_parse_counter(raw, "skipped"),
        failures=_parse_counter(raw, "failures"),
        completion=completion,
    )


def _text(raw: Mapping[str, Any], key: str, default: str) -> str:
    value = raw.get(key)
    return value if isinstance(value, str) else default


def _parse_condition(
    raw: Mapping[str, Any], condition_type: ConditionType, *, now: datetime
) -> Condition:
    transition = now
    written_time = raw.get("lastTransitionTime")
    if isinstance(written_time, str):
        parsed = parse_transition_time(written_time)
        if parsed is None:
            _log.info("Unable to parse time for status condition: %r", written_time)
        else:
            transition = parsed
    return Condition(
        type=condition_type,
        status=_text(raw, "status", TRUE),
        reason=_text(raw, "reason", ""),
        message=_text(raw, "message", ""),
        last_transition_time=transition,
        ansible_result=_parse_ansible_result(raw.get("ansibleResult")),
    )


def parse_status(raw: object, *, now: datetime) -> Status:
    """Parse `.status` as read from the API. A missing or non-map status counts as empty.

    `now` stands in for any of our conditions' lastTransitionTime that is
    missing or unreadable, as the reference does.
    """
    _require_aware(now, name="now")
    if not isinstance(raw, Mapping):
        return Status(custom={}, conditions=())
    custom = {key: copy.deepcopy(value) for key, value in raw.items() if key != "conditions"}
    listed = raw.get("conditions")
    if not isinstance(listed, list | tuple):
        return Status(custom=custom, conditions=())
    entries: list[Condition | ForeignCondition] = []
    for entry in listed:
        if not isinstance(entry, Mapping):
            _log.info("Unknown condition, removing condition: %r", entry)
            continue
        written_type = entry.get("type")
        if not isinstance(written_type, str):
            # The reference's default: a typeless entry is taken for Running,
            # so the operator can at least keep writing its status.
            entries.append(_parse_condition(entry, TYPE_RUNNING, now=now))
        elif written_type in _MANAGED_BY_NAME:
            entries.append(_parse_condition(entry, _MANAGED_BY_NAME[written_type], now=now))
        else:
            entries.append(copy.deepcopy(dict(entry)))
    return Status(custom=custom, conditions=tuple(entries))


def set_condition(status: Status, condition: Condition) -> Status:
    """`status` with `condition` set, by the reference's rules, in this order:

    1. an existing condition of the type with the same status and reason makes
       this a no-op (message and ansibleResult are NOT refreshed), except for
       Failure, which is always rewritten so it carries the latest message;
    2. an existing condition with the same status lends its lastTransitionTime;
    3. every existing entry of the type is removed and the new one is
       appended at the end, so the list order changes with each write.
    """
    current = status.get(condition.type)
    if (
        current is not None
        and condition.type != TYPE_FAILURE
        and current.status == condition.status
        and current.reason == condition.reason
    ):
        return status
    if current is not None and current.status == condition.status:
        condition = replace(condition, last_transition_time=current.last_transition_time)
    kept = tuple(
        entry
        for entry in status.conditions
        if not (isinstance(entry, Condition) and entry.type == condition.type)
    )
    return replace(status, conditions=(*kept, condition))
