"""Unit tests of status.transitions: the condition lists the Go operator writes (spec §3.3).

Every scenario is a sequence of transitions starting from an empty status, each
at its own fixed time T[i]; the expected list spells out type, status, reason,
message, lastTransitionTime and whether ansibleResult is present, in order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from ansible_operator.status import (
    MESSAGE_AWAITING,
    MESSAGE_RUNNING,
    MESSAGE_SUCCEEDED,
    REASON_FAILED,
    REASON_RUNNING,
    REASON_SUCCESSFUL,
    ZERO_COMPLETION,
    AnsibleResult,
    errored,
    failed,
    running,
    succeeded,
)

T = [datetime(2026, 11, 21, 10, 11, 12 + i, tzinfo=UTC) for i in range(8)]
S = [f"2026-11-21T10:11:{12 + i}Z" for i in range(8)]
RESULT = AnsibleResult(
    ok=4, changed=2, skipped=1, failures=0, completion="2026-11-21T10:11:13.5+00:00"
)
FAILED_RESULT = AnsibleResult(
    ok=2, changed=0, skipped=0, failures=1, completion="2026-11-21T10:11:14.25+00:00"
)
MESSAGES = ["first task failed", "second task failed"]

# One step of a scenario: new status from the previous one, at time T[i].
Step = Callable[[Any, datetime], dict[str, Any]]


def run_(status: Any, now: datetime) -> dict[str, Any]:
    return running(status, now=now)


def ok_(status: Any, now: datetime) -> dict[str, Any]:
    return succeeded(status, result=RESULT, now=now)


def fail_(status: Any, now: datetime) -> dict[str, Any]:
    return failed(status, messages=MESSAGES, result=FAILED_RESULT, now=now)


def fail_again_(status: Any, now: datetime) -> dict[str, Any]:
    return failed(status, messages=["other failure"], result=RESULT, now=now)


def error_(status: Any, now: datetime) -> dict[str, Any]:
    return errored(status, message="Unable to run reconciliation", now=now)


def play(steps: list[Step], start: Any = None) -> dict[str, Any]:
    status = start
    for index, step in enumerate(steps):
        status = step(status, T[index])
    assert isinstance(status, dict)
    return status


def summary(status: dict[str, Any]) -> list[tuple[str, str, str, str, str, bool]]:
    return [
        (
            c["type"],
            c["status"],
            c["reason"],
            c["message"],
            c["lastTransitionTime"],
            "ansibleResult" in c,
        )
        for c in status["conditions"]
    ]


JOINED = "first task failed\nsecond task failed"
ERROR = "Unable to run reconciliation"
# Building blocks of the expected lists, by (type, status, reason, message).
RUNNING_NOW = ("Running", "True", REASON_RUNNING, MESSAGE_RUNNING)
RUNNING_STOPPED = ("Running", "False", REASON_RUNNING, MESSAGE_RUNNING)
AWAITING = ("Running", "True", REASON_SUCCESSFUL, MESSAGE_AWAITING)
SUCCESSFUL = ("Successful", "True", REASON_SUCCESSFUL, MESSAGE_SUCCEEDED)
SUCCESSFUL_STALE = ("Successful", "False", REASON_SUCCESSFUL, MESSAGE_SUCCEEDED)
SUCCESSFUL_CLEARED = ("Successful", "False", "", "")
FAILURE_CLEARED = ("Failure", "False", "", "")
FAILURE_RUN = ("Failure", "True", REASON_FAILED, JOINED)
FAILURE_ERROR = ("Failure", "True", REASON_FAILED, ERROR)


def at(head: tuple[str, str, str, str], ltt: int, *, result: bool = False) -> tuple[Any, ...]:
    return (*head, S[ltt], result)


SCENARIOS = [
    pytest.param([run_], [at(RUNNING_NOW, 0)], id="first-running"),
    pytest.param(
        [run_, ok_],
        [at(AWAITING, 0, result=True), at(SUCCESSFUL, 1), at(FAILURE_CLEARED, 1)],
        id="first-success",
    ),
    pytest.param(
        [ok_],
        [at(AWAITING, 0, result=True), at(SUCCESSFUL, 0), at(FAILURE_CLEARED, 0)],
        id="success-from-empty-status",
    ),
    pytest.param(
        [run_, fail_],
        [at(RUNNING_STOPPED, 0), at(FAILURE_RUN, 1, result=True), at(SUCCESSFUL_CLEARED, 1)],
        id="first-failure",
    ),
    pytest.param(
        [run_, ok_, run_],
        [at(FAILURE_CLEARED, 1), at(SUCCESSFUL_STALE, 1), at(RUNNING_NOW, 0)],
        id="running-snapshot-after-success",
    ),
    pytest.param(
        [run_, ok_, run_, ok_],
        [at(AWAITING, 0, result=True), at(SUCCESSFUL, 3), at(FAILURE_CLEARED, 1)],
        id="second-success",
    ),
    pytest.param(
        [run_, ok_, run_, fail_],
        # Running went False at T3 but keeps T0: the reference's flip quirk.
        [at(RUNNING_STOPPED, 0), at(FAILURE_RUN, 3, result=True), at(SUCCESSFUL_CLEARED, 1)],
        id="failure-after-success",
    ),
    pytest.param(
        [run_, fail_, run_],
        [at(FAILURE_RUN, 1, result=True), at(SUCCESSFUL_CLEARED, 1), at(RUNNING_NOW, 2)],
        id="running-snapshot-after-failure",
    ),
    pytest.param(
        [run_, fail_, run_, ok_],
        [at(AWAITING, 2, result=True), at(SUCCESSFUL, 3), at(FAILURE_CLEARED, 3)],
        id="success-after-failure",
    ),
    pytest.param(
        [run_, fail_, run_, fail_again_],
        [
            at(SUCCESSFUL_CLEARED, 1),
            at(RUNNING_STOPPED, 2),
            at(("Failure", "True", REASON_FAILED, "other failure"), 1, result=True),
        ],
        id="failure-after-failure-rewrites-message",
    ),
    pytest.param([error_], [at(FAILURE_ERROR, 0)], id="error-from-empty-status"),
    pytest.param(
        [run_, error_], [at(RUNNING_STOPPED, 0), at(FAILURE_ERROR, 1)], id="error-during-first-run"
    ),
    pytest.param(
        [run_, ok_, run_, error_],
        [at(SUCCESSFUL_STALE, 1), at(RUNNING_STOPPED, 0), at(FAILURE_ERROR, 3)],
        id="error-during-run-after-success",
    ),
    pytest.param(
        [run_, ok_, error_],
        [
            at(("Running", "False", REASON_SUCCESSFUL, MESSAGE_AWAITING), 0, result=True),
            at(SUCCESSFUL_STALE, 1),
            at(FAILURE_ERROR, 2),
        ],
        id="error-before-run-after-success",
    ),
    pytest.param(
        [run_, fail_, error_],
        [at(RUNNING_STOPPED, 0), at(SUCCESSFUL_CLEARED, 1), at(FAILURE_ERROR, 1)],
        id="error-after-failure-keeps-failure-time",
    ),
    pytest.param(
        [run_, ok_, run_, run_],
        [at(FAILURE_CLEARED, 1), at(SUCCESSFUL_STALE, 1), at(RUNNING_NOW, 0)],
        id="running-twice-is-stable",
    ),
]


@pytest.mark.parametrize(("steps", "expected"), SCENARIOS)
def test_condition_lists(steps: list[Step], expected: list[tuple[Any, ...]]) -> None:
    assert summary(play(steps)) == expected


def test_results_are_written_as_given() -> None:
    after_success = play([run_, ok_])
    assert after_success["conditions"][0]["ansibleResult"] == {
        "ok": 4,
        "changed": 2,
        "skipped": 1,
        "failures": 0,
        "completion": "2026-11-21T10:11:13.5+00:00",
    }
    after_failure = play([run_, fail_])
    assert after_failure["conditions"][1]["ansibleResult"] == {
        "ok": 2,
        "changed": 0,
        "skipped": 0,
        "failures": 1,
        "completion": "2026-11-21T10:11:14.25+00:00",
    }


def test_failure_without_result_and_without_messages() -> None:
    written = failed(None, messages=[], result=None, now=T[0])
    assert summary(written) == [
        at(("Failure", "True", REASON_FAILED, ""), 0),
        at(SUCCESSFUL_CLEARED, 0),
    ]


def test_messages_must_not_be_a_bare_string() -> None:
    with pytest.raises(TypeError):
        failed(None, messages="boom", result=None, now=T[0])


@pytest.mark.parametrize("call", [run_, ok_, fail_, error_], ids=["running", "ok", "fail", "error"])
def test_naive_now_is_rejected(call: Step) -> None:
    with pytest.raises(ValueError):
        call(None, datetime(2026, 11, 21, 10, 11, 12))


def test_old_completion_format_is_rewritten_like_the_reference() -> None:
    status = play([run_, fail_])
    status["conditions"][1]["ansibleResult"]["completion"] = "2018-12-03T13:45:57.13329"
    written = running(status, now=T[5])
    assert written["conditions"][0]["ansibleResult"]["completion"] == ZERO_COMPLETION


# -- what is not ours survives every transition ------------------------------------------

CUSTOM = {
    "replicas": 3,
    "phase": "Provisioning",
    "nested": {"items": [1, {"deep": None}], "flag": False},
}
READY = {
    "type": "Ready",
    "status": "Unknown",
    "reason": "Waiting",
    "lastHeartbeatTime": "2026-11-20T08:00:00.5+02:00",
    "observedGeneration": 4,
}
DEGRADED = {"type": "Degraded", "status": "False"}
TRANSITIONS: list[Step] = [run_, ok_, fail_, error_]
TRANSITION_IDS = ["running", "succeeded", "failed", "errored"]


def with_extras(status: dict[str, Any]) -> dict[str, Any]:
    """`status` as if k8s_status had added custom keys and conditions during the run."""
    conditions = [READY, *status["conditions"], DEGRADED]
    conditions.insert(2, {"type": "Available", "status": "True"})
    return {**copy.deepcopy(CUSTOM), **status, "conditions": copy.deepcopy(conditions)}


STARTS: dict[str, Callable[[], dict[str, Any]]] = {
    "empty": lambda: {"conditions": []},
    "after-success": lambda: play([run_, ok_]),
    "after-failure": lambda: play([run_, fail_]),
    "running": lambda: play([run_, ok_, run_]),
}


@pytest.mark.parametrize("start", list(STARTS), ids=list(STARTS))
@pytest.mark.parametrize("step", TRANSITIONS, ids=TRANSITION_IDS)
def test_custom_keys_and_foreign_conditions_survive(start: str, step: Step) -> None:
    before = with_extras(STARTS[start]())
    pristine = copy.deepcopy(before)
    written = step(before, T[7])
    assert before == pristine  # the input is not modified
    assert {key: value for key, value in written.items() if key != "conditions"} == CUSTOM
    foreign = [
        c for c in written["conditions"] if c["type"] not in {"Running", "Successful", "Failure"}
    ]
    expected = [
        c for c in pristine["conditions"] if c["type"] not in {"Running", "Successful", "Failure"}
    ]
    assert foreign == expected
    assert written["conditions"][0] == READY  # never moved: ours are re-appended after it
    written["nested"]["items"].append("mutated")
    written["conditions"][0]["status"] = "True"
    assert before == pristine  # the output shares nothing with the input


def test_foreign_conditions_keep_their_place_exactly() -> None:
    start = {"conditions": [READY, *play([run_, ok_])["conditions"], DEGRADED]}
    written = running(start, now=T[4])
    assert [c["type"] for c in written["conditions"]] == [
        "Ready",
        "Failure",
        "Degraded",
        "Successful",
        "Running",
    ]
    assert written["conditions"][0] is not READY
    assert written["conditions"][0] == READY


@pytest.mark.parametrize("step", TRANSITIONS, ids=TRANSITION_IDS)
def test_unknown_fields_of_our_conditions_are_stripped(step: Step) -> None:
    status = play([run_, ok_])
    for condition in status["conditions"]:
        condition["lastHeartbeatTime"] = "2026-11-21T10:11:12Z"
        condition["observedGeneration"] = 2
        condition.get("ansibleResult", {})["ignored"] = 1
    written = step(status, T[5])
    allowed = {"type", "status", "lastTransitionTime", "ansibleResult", "reason", "message"}
    for condition in written["conditions"]:
        assert set(condition) <= allowed
        assert set(condition.get("ansibleResult", {})) <= {
            "ok",
            "changed",
            "skipped",
            "failures",
            "completion",
        }
