"""`controller.contract.decide`: one outcome, one queue action and one metric label."""

from __future__ import annotations

import pytest

from ansible_operator.controller.contract import Action, Outcome, decide, run_label
from ansible_operator.errors import Conflict, InvalidResource, RetryLater
from ansible_operator.runner.base import RunOutcome

CASES = {
    "success": (Outcome(), Action.RESYNC, None, "success"),
    "periodic": (Outcome(requeue_after=600.0), Action.RESYNC, 600.0, "requeue_after"),
    "zero period": (Outcome(requeue_after=0.0), Action.RESYNC, None, "success"),
    "gone": (Outcome(forget=True), Action.FORGET, None, "success"),
    "retry with delay": (Outcome(error=RetryLater("x", delay=3.0)), Action.BACKOFF, 3.0, "error"),
    "retry": (Outcome(error=RetryLater("x")), Action.BACKOFF, None, "error"),
    "raised conflict": (Outcome(error=Conflict(409, "x")), Action.BACKOFF, None, "error"),
    "error wins over period": (
        Outcome(error=RetryLater("x"), requeue_after=60.0),
        Action.BACKOFF,
        None,
        "error",
    ),
    "terminal at its period": (
        Outcome(terminal=InvalidResource("x"), requeue_after=60.0),
        Action.RESYNC,
        60.0,
        "error",
    ),
    "terminal without period": (
        Outcome(terminal=InvalidResource("x")),
        Action.RESYNC,
        None,
        "error",
    ),
    "observe-only": (Outcome(counted=False), Action.RESYNC, None, None),
}


@pytest.mark.parametrize(("outcome", "action", "delay", "label"), CASES.values(), ids=CASES.keys())
def test_decide(outcome: Outcome, action: Action, delay: float | None, label: str | None) -> None:
    decision = decide(outcome)
    assert (decision.action, decision.delay, decision.label) == (action, delay, label)


def test_every_run_outcome_has_a_metric_label() -> None:
    assert {run_label(o) for o in RunOutcome} == {o.value for o in RunOutcome}
    assert run_label(None) == "error"  # the run could not start
