"""Per-CR annotations: reconcile period, verbosity, max runner artifacts."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ansible_operator import errors
from ansible_operator.launch import crannotations as annotations

LOG = logging.LoggerAdapter(logging.getLogger("test"), {})


def cr(**values: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {annotations.PREFIX + k: v for k, v in values.items()}}}


@pytest.mark.parametrize(
    ("raw", "seconds"), [("2s", 2.0), ("1h", 3600.0), ("0s", 0.0), ("-1s", -1.0)]
)
def test_reconcile_period(raw: str, seconds: float) -> None:
    assert annotations.reconcile_period(cr(**{"reconcile-period": raw})) == seconds


def test_reconcile_period_absent_or_bad() -> None:
    assert annotations.reconcile_period({"metadata": {}}) is None
    with pytest.raises(
        errors.BadAnnotation,
        match='Unable to parse reconcile period annotation: time: invalid duration "soon"',
    ):
        annotations.reconcile_period(cr(**{"reconcile-period": "soon"}))


@pytest.mark.parametrize(("raw", "expected"), [("3", 3), (" 0 ", 0), ("x", None), ("1.5", None)])
def test_integer_annotations_are_ignored_when_bad(
    raw: str, expected: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    assert annotations.verbosity(cr(verbosity=raw), LOG) == expected
    assert annotations.max_runner_artifacts(cr(**{"max-runner-artifacts": raw}), LOG) == expected
    if expected is None:
        assert "not an integer" in caplog.text
