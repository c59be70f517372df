"""Unit tests of status.conditions: parsing (§3.4), set_condition (§3.2), serialisation (§3.1)."""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from ansible_operator.status.conditions import (
    ZERO_COMPLETION,
    AnsibleResult,
    Condition,
    ForeignCondition,
    Status,
    format_transition_time,
    normalize_completion,
    parse_status,
    parse_transition_time,
    set_condition,
)

NOW = datetime(2026, 11, 21, 10, 11, 12, tzinfo=UTC)
EARLIER = datetime(2026, 11, 20, 8, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 22, 9, 30, 45, tzinfo=UTC)
RESULT = AnsibleResult(
    ok=3, changed=1, skipped=2, failures=0, completion="2026-11-21T10:11:12+00:00"
)
LOGGER = "ansible_operator.status.conditions"


def only_condition(raw: dict[str, Any]) -> Condition:
    parsed = parse_status({"conditions": [raw]}, now=NOW)
    assert len(parsed.conditions) == 1
    entry = parsed.conditions[0]
    assert isinstance(entry, Condition)
    return entry


def cond(kind: Any, status: str, reason: str, *, at: datetime, message: str = "m") -> Condition:
    return Condition(
        type=kind, status=status, reason=reason, message=message, last_transition_time=at
    )


# -- parsing defaults (§3.4) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({}, ("Running", "True", "", "", NOW), id="empty-map-is-running-true"),
        pytest.param({"type": 7}, ("Running", "True", "", "", NOW), id="non-string-type"),
        pytest.param({"type": "Failure"}, ("Failure", "True", "", "", NOW), id="missing-status"),
        pytest.param(
            {"type": "Successful", "status": True, "reason": 3, "message": None},
            ("Successful", "True", "", "", NOW),
            id="non-string-fields-default",
        ),
        pytest.param(
            {
                "type": "Successful",
                "status": "False",
                "reason": "Successful",
                "message": "Last reconciliation succeeded",
                "lastTransitionTime": "2026-11-20T08:00:00Z",
            },
            ("Successful", "False", "Successful", "Last reconciliation succeeded", EARLIER),
            id="complete",
        ),
        pytest.param(
            {"type": "Running", "status": "Unknown", "reason": "Odd"},
            ("Running", "Unknown", "Odd", "", NOW),
            id="status-kept-verbatim",
        ),
    ],
)
def test_parse_defaults(raw: dict[str, Any], expected: tuple[str, str, str, str, datetime]) -> None:
    parsed = only_condition(raw)
    got = (parsed.type, parsed.status, parsed.reason, parsed.message, parsed.last_transition_time)
    assert got == expected
    assert parsed.ansible_result is None


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("2026-11-20T08:00:00Z", EARLIER),
        ("2026-11-20T08:00:00.123456789Z", EARLIER.replace(microsecond=123456)),
        ("2026-11-20T08:00:00,5Z", EARLIER.replace(microsecond=500000)),
        ("2026-11-20T8:00:00Z", EARLIER),  # Go's "15" accepts a one-digit hour
        ("2026-11-20T08:00:00+00:00", None),  # the layout wants a literal Z
        ("2026-11-20T08:00:00-07:00", None),
        ("2026-11-20 08:00:00Z", None),
        ("2026-02-30T08:00:00Z", None),
        ("2026-11-20T24:00:00Z", None),
        ("not a time", None),
        ("", None),
    ],
)
def test_parse_transition_time(written: str, expected: datetime | None) -> None:
    assert parse_transition_time(written) == expected


@pytest.mark.parametrize(
    ("written", "expected", "logged"),
    [
        pytest.param("2026-11-20T08:00:00Z", EARLIER, False, id="valid"),
        pytest.param("2026-11-20T08:00:00+02:00", NOW, True, id="offset-becomes-now"),
        pytest.param("yesterday", NOW, True, id="garbage-becomes-now"),
        pytest.param(1700000000, NOW, False, id="non-string-becomes-now"),
        pytest.param(None, NOW, False, id="null-becomes-now"),
    ],
)
def test_transition_time_falls_back_to_now(
    caplog: pytest.LogCaptureFixture, written: object, expected: datetime, logged: bool
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    parsed = only_condition({"type": "Running", "lastTransitionTime": written})
    assert parsed.last_transition_time == expected
    assert ("Unable to parse time for status condition" in caplog.text) is logged


def test_non_map_entries_are_dropped_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    foreign = {"type": "Ready", "status": "True"}
    parsed = parse_status(
        {"conditions": ["Running", 3, None, ["x"], {"type": "Failure"}, foreign]}, now=NOW
    )
    assert [type(entry).__name__ for entry in parsed.conditions] == ["Condition", "dict"]
    assert parsed.conditions[1] == foreign
    assert caplog.text.count("Unknown condition, removing condition") == 4


@pytest.mark.parametrize(
    "raw",
    [None, "a string", 42, ["conditions"]],
    ids=["none", "string", "int", "list"],
)
def test_non_map_status_counts_as_empty(raw: object) -> None:
    parsed = parse_status(raw, now=NOW)
    assert parsed == Status(custom={}, conditions=())
    assert parsed.to_map() == {"conditions": []}


@pytest.mark.parametrize(
    "conditions",
    [None, "Running", {"type": "Running"}, 5],
    ids=["null", "string", "map", "int"],
)
def test_non_list_conditions_are_replaced_and_custom_keys_kept(conditions: object) -> None:
    parsed = parse_status({"phase": "Ready", "conditions": conditions}, now=NOW)
    assert parsed.conditions == ()
    assert parsed.to_map() == {"phase": "Ready", "conditions": []}


def test_unknown_fields_of_our_types_are_dropped() -> None:
    raw = {
        "type": "Running",
        "status": "True",
        "reason": "Running",
        "message": "Running reconciliation",
        "lastTransitionTime": "2026-11-20T08:00:00Z",
        "lastHeartbeatTime": "2026-11-20T08:00:00Z",
        "observedGeneration": 4,
    }
    assert parse_status({"conditions": [raw]}, now=NOW).to_map()["conditions"] == [
        {
            "type": "Running",
            "status": "True",
            "lastTransitionTime": "2026-11-20T08:00:00Z",
            "reason": "Running",
            "message": "Running reconciliation",
        }
    ]


def test_foreign_conditions_and_custom_keys_are_verbatim_and_private() -> None:
    foreign = {
        "type": "Ready",
        "status": "Unknown",
        "lastHeartbeatTime": "2026-11-20T08:00:00.5+02:00",
        "observedGeneration": 4,
    }
    raw = {
        "replicas": 3,
        "nested": {"list": [1, {"deep": None}]},
        "conditions": [{"type": "Failure", "status": "False"}, foreign, {"type": "running"}],
    }
    before = copy.deepcopy(raw)
    written = parse_status(raw, now=NOW).to_map()
    assert written["replicas"] == 3
    assert written["nested"] == {"list": [1, {"deep": None}]}
    assert written["conditions"][1:] == [foreign, {"type": "running"}]  # case matters
    written["nested"]["list"].append(2)
    written["conditions"][1]["status"] = "True"
    assert raw == before


# -- ansibleResult -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"ok": 5, "changed": 2, "skipped": 1, "failures": 1, "completion": RESULT.completion},
            AnsibleResult(ok=5, changed=2, skipped=1, failures=1, completion=RESULT.completion),
            id="complete",
        ),
        pytest.param(
            {},
            AnsibleResult(ok=0, changed=0, skipped=0, failures=0, completion=ZERO_COMPLETION),
            id="empty",
        ),
        pytest.param(
            {"ok": 1.5, "changed": True, "skipped": "2", "failures": None, "extra": 9},
            AnsibleResult(ok=0, changed=0, skipped=0, failures=0, completion=ZERO_COMPLETION),
            id="non-integers-become-zero",
        ),
        pytest.param(
            {"ok": 1, "completion": "2018-12-03T13:45:57.13329"},
            AnsibleResult(ok=1, changed=0, skipped=0, failures=0, completion=ZERO_COMPLETION),
            id="old-completion-format",
        ),
    ],
)
def test_parse_ansible_result(raw: dict[str, Any], expected: AnsibleResult) -> None:
    assert only_condition({"type": "Failure", "ansibleResult": raw}).ansible_result == expected


@pytest.mark.parametrize("raw", [None, "ok=1", [1, 2]], ids=["null", "string", "list"])
def test_non_map_ansible_result_is_dropped(raw: object) -> None:
    assert only_condition({"type": "Failure", "ansibleResult": raw}).ansible_result is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-21T10:11:12.123456+00:00", "2026-11-21T10:11:12.123456+00:00"),
        ("2026-11-21T10:11:12.120000+00:00", "2026-11-21T10:11:12.12+00:00"),
        ("2026-11-21T10:11:12.000000+00:00", "2026-11-21T10:11:12+00:00"),
        ("2026-11-21T10:11:12.123456789+00:00", "2026-11-21T10:11:12.12345678+00:00"),
        ("2026-11-21T10:11:12,5+00:00", "2026-11-21T10:11:12.5+00:00"),
        ("2026-11-21T10:11:12+00:00", "2026-11-21T10:11:12+00:00"),
        ("2018-12-03T13:45:57.13329", ZERO_COMPLETION),
        ("2026-11-21T10:11:12Z", ZERO_COMPLETION),
        ("2026-11-21T10:11:12+01:00", ZERO_COMPLETION),
        ("2026-13-21T10:11:12+00:00", ZERO_COMPLETION),
        (1700000000, ZERO_COMPLETION),
        (None, ZERO_COMPLETION),
    ],
)
def test_normalize_completion(value: object, expected: str) -> None:
    assert normalize_completion(value) == expected


# -- serialisation (§3.1) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (NOW, "2026-11-21T10:11:12Z"),
        (NOW.replace(microsecond=999999), "2026-11-21T10:11:12Z"),
        (
            datetime(2026, 11, 21, 12, 11, 12, tzinfo=timezone(timedelta(hours=2))),
            "2026-11-21T10:11:12Z",
        ),
        (datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC), "0005-01-02T03:04:05Z"),
    ],
)
def test_format_transition_time(moment: datetime, expected: str) -> None:
    assert format_transition_time(moment) == expected


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        pytest.param(
            Condition(
                type="Failure", status="False", reason="", message="", last_transition_time=NOW
            ),
            {
                "type": "Failure",
                "status": "False",
                "lastTransitionTime": "2026-11-21T10:11:12Z",
                "reason": "",
                "message": "",
            },
            id="without-result",
        ),
        pytest.param(
            Condition(
                type="Running",
                status="True",
                reason="Successful",
                message="Awaiting next reconciliation",
                last_transition_time=NOW,
                ansible_result=RESULT,
            ),
            {
                "type": "Running",
                "status": "True",
                "lastTransitionTime": "2026-11-21T10:11:12Z",
                "ansibleResult": {
                    "ok": 3,
                    "changed": 1,
                    "skipped": 2,
                    "failures": 0,
                    "completion": "2026-11-21T10:11:12+00:00",
                },
                "reason": "Successful",
                "message": "Awaiting next reconciliation",
            },
            id="with-result",
        ),
    ],
)
def test_condition_to_map(condition: Condition, expected: dict[str, Any]) -> None:
    assert condition.to_map() == expected
    assert list(condition.to_map()) == list(expected)


def test_round_trip_is_stable() -> None:
    written = {
        "custom": {"a": 1},
        "conditions": [
            Condition(
                type="Running",
                status="True",
                reason="Successful",
                message="Awaiting next reconciliation",
                last_transition_time=NOW,
                ansible_result=RESULT,
            ).to_map(),
            {"type": "Ready", "status": "True"},
        ],
    }
    assert parse_status(written, now=LATER).to_map() == written


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: cond("Ready", "True", "", at=NOW), id="foreign-type"),
        pytest.param(lambda: cond("Running", "True", "", at=datetime(2026, 1, 1)), id="naive-time"),
        pytest.param(lambda: parse_status({}, now=datetime(2026, 1, 1)), id="naive-now"),
    ],
)
def test_invalid_inputs_are_rejected(build: Any) -> None:
    with pytest.raises(ValueError):
        build()


# -- set_condition (§3.2) ----------------------------------------------------------------

FOREIGN = {"type": "Ready", "status": "True", "lastHeartbeatTime": "x"}


@pytest.mark.parametrize(
    ("existing", "new", "expected", "noop"),
    [
        pytest.param(
            None,
            cond("Running", "True", "Running", at=NOW, message="new"),
            cond("Running", "True", "Running", at=NOW, message="new"),
            False,
            id="absent-is-appended",
        ),
        pytest.param(
            cond("Running", "True", "Running", at=EARLIER, message="old"),
            cond("Running", "True", "Running", at=NOW, message="new"),
            cond("Running", "True", "Running", at=EARLIER, message="old"),
            True,
            id="same-status-and-reason-is-noop",
        ),
        pytest.param(
            cond("Running", "True", "Running", at=EARLIER, message="old"),
            cond("Running", "True", "Successful", at=NOW, message="new"),
            cond("Running", "True", "Successful", at=EARLIER, message="new"),
            False,
            id="same-status-keeps-time",
        ),
        pytest.param(
            cond("Successful", "True", "Successful", at=EARLIER),
            cond("Successful", "False", "Successful", at=NOW),
            cond("Successful", "False", "Successful", at=NOW),
            False,
            id="status-change-takes-new-time",
        ),
        pytest.param(
            cond("Failure", "True", "Failed", at=EARLIER, message="old"),
            cond("Failure", "True", "Failed", at=NOW, message="new"),
            cond("Failure", "True", "Failed", at=EARLIER, message="new"),
            False,
            id="failure-always-rewritten",
        ),
        pytest.param(
            cond("Failure", "False", "", at=EARLIER, message=""),
            cond("Failure", "True", "Failed", at=NOW, message="boom"),
            cond("Failure", "True", "Failed", at=NOW, message="boom"),
            False,
            id="failure-status-change",
        ),
    ],
)
def test_set_condition_rules(
    existing: Condition | None, new: Condition, expected: Condition, noop: bool
) -> None:
    other = cond("Successful" if new.type != "Successful" else "Running", "True", "x", at=EARLIER)
    before: tuple[Condition | ForeignCondition, ...] = (
        other,
        *([existing] if existing else []),
        FOREIGN,
    )
    status = Status(custom={}, conditions=before)
    after = set_condition(status, new)
    if noop:
        assert after is status
    else:
        assert after.conditions == (other, FOREIGN, expected)


def test_set_condition_does_not_refresh_message_or_result_on_noop() -> None:
    old = replace(cond("Running", "True", "Successful", at=EARLIER), ansible_result=RESULT)
    new = replace(
        cond("Running", "True", "Successful", at=NOW, message="other"),
        ansible_result=replace(RESULT, ok=9),
    )
    assert set_condition(Status(custom={}, conditions=(old,)), new).conditions == (old,)


def test_set_condition_collapses_duplicates_and_first_one_decides() -> None:
    # A typeless entry parses as Running: two Running entries, the first decides.
    parsed = parse_status(
        {
            "conditions": [
                {"status": "False", "lastTransitionTime": "2026-11-20T08:00:00Z"},
                {"type": "Ready"},
                {"type": "Running", "status": "True", "lastTransitionTime": "2026-11-22T09:30:45Z"},
            ]
        },
        now=NOW,
    )
    after = set_condition(parsed, cond("Running", "False", "Failed", at=NOW))
    assert after.conditions == (
        {"type": "Ready"},
        cond("Running", "False", "Failed", at=EARLIER),
    )
    assert parsed.get("Running") == Condition(
        type="Running", status="False", reason="", message="", last_transition_time=EARLIER
    )
