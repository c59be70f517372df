"""status: the conditions the operator writes to `.status` of each custom resource.

Pure functions, no Kubernetes I/O. The reconciler re-reads the object live and
calls one of the transitions with its `.status` - `running` before an Ansible
run, `succeeded` or `failed` after it, `errored` on an internal error - then
writes the returned map to the status subresource. The result matches what the
Go ansible-operator (v1.42) writes, condition for condition and in the same
order; custom status keys and conditions of other types are carried over.

    conditions   the model: parse a status map, set one condition, write it back
    transitions  the four writes of a reconcile, built on `conditions`
    driftcondition  the Drifted condition a drift check writes (ours)
"""

from ansible_operator.status.conditions import (
    FALSE,
    MANAGED_TYPES,
    TRUE,
    TYPE_FAILURE,
    TYPE_RUNNING,
    TYPE_SUCCESSFUL,
    ZERO_COMPLETION,
    AnsibleResult,
    Condition,
    ConditionType,
    ForeignCondition,
    Status,
    format_transition_time,
    normalize_completion,
    parse_status,
    parse_transition_time,
    set_condition,
)
from ansible_operator.status.transitions import (
    MESSAGE_AWAITING,
    MESSAGE_RUNNING,
    MESSAGE_SUCCEEDED,
    REASON_FAILED,
    REASON_RUNNING,
    REASON_SUCCESSFUL,
    errored,
    failed,
    running,
    succeeded,
)

__all__ = [
    "FALSE",
    "MANAGED_TYPES",
    "MESSAGE_AWAITING",
    "MESSAGE_RUNNING",
    "MESSAGE_SUCCEEDED",
    "REASON_FAILED",
    "REASON_RUNNING",
    "REASON_SUCCESSFUL",
    "TRUE",
    "TYPE_FAILURE",
    "TYPE_RUNNING",
    "TYPE_SUCCESSFUL",
    "ZERO_COMPLETION",
    "AnsibleResult",
    "Condition",
    "ConditionType",
    "ForeignCondition",
    "Status",
    "errored",
    "failed",
    "format_transition_time",
    "normalize_completion",
    "parse_status",
    "parse_transition_time",
    "running",
    "set_condition",
    "succeeded",
]
