"""The Drifted condition: what a check found, written without touching anything else."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from ansible_operator.status import drift, running
from ansible_operator.status.driftcondition import DriftState

NOW = datetime.datetime(2026, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(minutes=5)

LIVE: dict[str, Any] = {
    "replicas": 2,
    "conditions": [
        {"type": "Running", "status": "True", "reason": "Successful", "message": "m",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "ansibleResult": {"ok": 1}},
        {"type": "Ready", "status": "True", "odd": ["kept"]},
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("drifted", "error", "expected"),
    [
        ((), None, DriftState("False", "InSync", "No drift: the role would change nothing")),
        (("Deployment ns/web",), None, DriftState("True", "Drifted", "Drifted: Deployment ns/web")),
        (
            ("Deployment ns/a", "Service ns/a", "ConfigMap ns/c", "Secret ns/d", "Role ns/e"),
            None,
            DriftState(
                "True",
                "Drifted",
                "Drifted: Deployment ns/a, Service ns/a, ConfigMap ns/c and 2 more",
            ),
        ),
        (
            ("Deployment ns/web",),
            "task [scaler : x] failed on localhost: boom\nsecond line",
            DriftState(
                "Unknown",
                "DriftCheckFailed",
                "Drift check failed: task [scaler : x] failed on localhost: boom",
            ),
        ),
    ],
)
def test_what_a_check_found(
    drifted: tuple[str, ...], error: str | None, expected: DriftState
) -> None:
    assert drift.found(drifted, error=error, shown=3) == expected


def test_the_condition_is_added_and_everything_else_is_kept_in_place() -> None:
    live = copy.deepcopy(LIVE)
    state = drift.found(("Deployment ns/web",), error=None, shown=3)
    written = drift.with_drift(live, state, generation=4, now=NOW)
    assert live == LIVE  # the input is not modified
    assert written["replicas"] == 2
    assert written["conditions"][:2] == LIVE["conditions"]
    assert written["conditions"][2] == {
        "type": "Drifted",
        "status": "True",
        "reason": "Drifted",
        "message": "Drifted: Deployment ns/web",
        "lastTransitionTime": "2026-05-06T07:08:09Z",
        "observedGeneration": 4,
    }


def test_last_transition_time_moves_only_when_the_status_changes() -> None:
    drifted = drift.found(("Deployment ns/web",), error=None, shown=3)
    first = drift.with_drift({}, drifted, generation=1, now=NOW)
    more = drift.found(("Deployment ns/web", "Service ns/web"), error=None, shown=3)
    again = drift.with_drift(first, more, generation=2, now=LATER)
    [condition] = again["conditions"]
    assert condition["lastTransitionTime"] == "2026-05-06T07:08:09Z"
    assert condition["message"] == "Drifted: Deployment ns/web, Service ns/web"
    assert condition["observedGeneration"] == 2
    resolved = drift.with_drift(
        again, drift.found((), error=None, shown=3), generation=2, now=LATER
    )
    [condition] = resolved["conditions"]
    assert (condition["status"], condition["lastTransitionTime"]) == (
        "False",
        "2026-05-06T07:13:09Z",
    )


def test_the_reconciles_status_writes_keep_the_drifted_condition() -> None:
    state = drift.found(("Deployment ns/web",), error=None, shown=3)
    with_drifted = drift.with_drift(LIVE, state, generation=1, now=NOW)
    after_running = running(with_drifted, now=LATER)
    assert drift.current(after_running) == drift.current(with_drifted)
