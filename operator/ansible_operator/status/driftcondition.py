"""The `Drifted` condition a drift check writes, as pure functions of the live status.

Called by controller.driftchecks after each drift check of a CR (docs/plan.md,
"Drift checks and observe-only"). Unlike status.transitions it works on the
raw status map: every other key and condition, the reconcile's Running,
Successful and Failure included, comes back exactly as it was read, in
place; only the Drifted entry is replaced (or appended). The reconcile's own
writes keep Drifted in turn, as every condition of a foreign type
(status.conditions).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ansible_operator.status.conditions import format_transition_time

TYPE_DRIFTED: Final = "Drifted"
DRIFTED: Final = "True"
NOT_DRIFTED: Final = "False"
UNKNOWN: Final = "Unknown"

REASON_DRIFTED: Final = "Drifted"
REASON_IN_SYNC: Final = "InSync"
REASON_CHECK_FAILED: Final = "DriftCheckFailed"


@dataclass(frozen=True, slots=True)
class DriftState:
    """What one drift check found: the condition's status, reason and message."""

    status: str  # DRIFTED, NOT_DRIFTED or UNKNOWN
    reason: str
    message: str


def summary(objects: Sequence[str], *, shown: int) -> str:
    """ "Deployment default/web and 2 more": the first `shown` names, then a count."""
    head = ", ".join(objects[:shown])
    rest = len(objects) - min(len(objects), shown)
    return f"{head} and {rest} more" if rest else head


def found(drifted: Sequence[str], *, error: str | None, shown: int) -> DriftState:
    """The state for a check that listed `drifted` objects, or failed with `error`."""
    if error is not None:
        lines = error.strip().splitlines()
        first = lines[0] if lines else "the plan failed"
        return DriftState(UNKNOWN, REASON_CHECK_FAILED, f"Drift check failed: {first}")
    if drifted:
        return DriftState(DRIFTED, REASON_DRIFTED, f"Drifted: {summary(drifted, shown=shown)}")
    return DriftState(NOT_DRIFTED, REASON_IN_SYNC, "No drift: the role would change nothing")


def current(status: object) -> Mapping[str, Any] | None:
    """The Drifted condition of a live status, if there is one."""
    if not isinstance(status, Mapping):
        return None
    listed = status.get("conditions")
    if not isinstance(listed, list):
        return None
    for entry in listed:
        if isinstance(entry, Mapping) and entry.get("type") == TYPE_DRIFTED:
            return entry
    return None


def with_drift(
    status: object, state: DriftState, *, generation: int | None, now: datetime
) -> dict[str, Any]:
    """The complete status with the Drifted condition set to `state`.

    lastTransitionTime moves only when the condition's status changes.
    """
    written: dict[str, Any] = copy.deepcopy(dict(status)) if isinstance(status, Mapping) else {}
    listed = written.get("conditions")
    conditions: list[Any] = listed if isinstance(listed, list) else []
    previous = current(written)
    stamp = format_transition_time(now)
    if previous is not None and previous.get("status") == state.status:
        stamp = str(previous.get("lastTransitionTime") or stamp)
    condition: dict[str, Any] = {
        "type": TYPE_DRIFTED,
        "status": state.status,
        "reason": state.reason,
        "message": state.message,
        "lastTransitionTime": stamp,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    for index, entry in enumerate(conditions):
        if isinstance(entry, Mapping) and entry.get("type") == TYPE_DRIFTED:
            conditions[index] = condition
            break
    else:
        conditions.append(condition)
    written["conditions"] = conditions
    return written
