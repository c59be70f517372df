"""The four status writes of a reconcile, as pure functions from the live status to the new one.

Who calls what (docs/status.md has the user's view):

* `running`   - before every Ansible run (after the finalizer is added), when
                `manageStatus` is true;
* `succeeded` - after a run without counted failures, when `manageStatus` is true;
* `failed`    - after a run with failed tasks, when `manageStatus` is true;
* `errored`   - on an internal error around the run (bad reconcile-period
                annotation, kubeconfig or runner start failure, unreadable
                stdout), whatever `manageStatus` says.

The reconciler re-reads the object live, passes its `.status` here and writes
the returned map to the status subresource. Each function returns the COMPLETE
new status: custom keys and other controllers' conditions come back unchanged.

Compatibility note (a quirk of the Go operator, deliberately matched): when a
condition only flips its status (Successful → False when a run starts, Running
→ False on failure or error), the reference writes a modified copy of the
existing condition, so its lastTransitionTime is NOT moved to now. We do the
same so our conditions are identical to the Go operator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from ansible_operator.status.conditions import (
    FALSE,
    TRUE,
    TYPE_FAILURE,
    TYPE_RUNNING,
    TYPE_SUCCESSFUL,
    AnsibleResult,
    Condition,
    ConditionType,
    Status,
    parse_status,
    set_condition,
)

REASON_RUNNING: Final = "Running"
REASON_SUCCESSFUL: Final = "Successful"
REASON_FAILED: Final = "Failed"

MESSAGE_RUNNING: Final = "Running reconciliation"
MESSAGE_AWAITING: Final = "Awaiting next reconciliation"
MESSAGE_SUCCEEDED: Final = "Last reconciliation succeeded"


def _fresh(
    condition_type: ConditionType,
    status: str,
    *,
    reason: str,
    message: str,
    now: datetime,
    result: AnsibleResult | None = None,
) -> Condition:
    return Condition(
        type=condition_type,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now,
        ansible_result=result,
    )


def _flip_to_false(status: Status, condition_type: ConditionType) -> Status:
    # A copy of the existing condition with only `status` changed: reason,
    # message, ansibleResult and the old lastTransitionTime all survive.
    existing = status.get(condition_type)
    if existing is None:
        return status
    return set_condition(status, replace(existing, status=FALSE))


def running(status: object, *, now: datetime) -> dict[str, Any]:
    """Status to write before a run: Successful (if any) goes False, Running goes True."""
    current = _flip_to_false(parse_status(status, now=now), TYPE_SUCCESSFUL)
    current = set_condition(
        current,
        _fresh(TYPE_RUNNING, TRUE, reason=REASON_RUNNING, message=MESSAGE_RUNNING, now=now),
    )
    return current.to_map()


def succeeded(status: object, *, result: AnsibleResult, now: datetime) -> dict[str, Any]:
    """Status to write after a run without failed tasks.

    Ends as [Running(True, Successful, awaiting, +result), Successful(True),
    Failure(False, "", "")] whatever came before (custom entries aside).
    """
    current = parse_status(status, now=now)
    # Order matters: each set moves its condition to the end of the list.
    current = set_condition(
        current,
        _fresh(
            TYPE_RUNNING,
            TRUE,
            reason=REASON_SUCCESSFUL,
            message=MESSAGE_AWAITING,
            now=now,
            result=result,
        ),
    )
    current = set_condition(
        current,
        _fresh(TYPE_SUCCESSFUL, TRUE, reason=REASON_SUCCESSFUL, message=MESSAGE_SUCCEEDED, now=now),
    )
    current = set_condition(current, _fresh(TYPE_FAILURE, FALSE, reason="", message="", now=now))
    return current.to_map()


def failed(
    status: object,
    *,
    messages: Sequence[str],
    result: AnsibleResult | None,
    now: datetime,
) -> dict[str, Any]:
    """Status to write after a run with failed tasks; `messages` are joined with newlines.

    Ends as [..., Running(False), Failure(True, Failed, messages, +result),
    Successful(False, "", "")].
    """
    if isinstance(messages, str):
        # A bare string is a Sequence[str] too, and would be split into letters.
        raise TypeError("messages must be a sequence of strings, not a string")
    current = _flip_to_false(parse_status(status, now=now), TYPE_RUNNING)
    current = set_condition(
        current,
        _fresh(
            TYPE_FAILURE,
            TRUE,
            reason=REASON_FAILED,
            message="\n".join(messages),
            now=now,
            result=result,
        ),
    )
    current = set_condition(current, _fresh(TYPE_SUCCESSFUL, FALSE, reason="", message="", now=now))
    return current.to_map()


def errored(status: object, *, message: str, now: datetime) -> dict[str, Any]:
    """Status to write when the run could not happen or could not be read.

    Running and Successful (if present) go False; Failure(True, Failed,
    message) without ansibleResult is set last.
    """
    current = _flip_to_false(parse_status(status, now=now), TYPE_RUNNING)
    current = _flip_to_false(current, TYPE_SUCCESSFUL)
    current = set_condition(
        current, _fresh(TYPE_FAILURE, TRUE, reason=REASON_FAILED, message=message, now=now)
    )
    return current.to_map()
