"""Which Ansible events a plan's journal keeps (plan.journal.Journal.observe): no cluster."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.plan.journal import Journal, TaskEntry
from ansible_operator.runner.jobevents import JobEvent


def _event(event: str, action: str, res: dict[str, Any]) -> JobEvent:
    data = {"task": "t", "task_action": action, "resolved_action": action, "res": res}
    return JobEvent.from_runner({"event": event, "event_data": data})


@pytest.mark.parametrize(
    ("event", "action", "res", "kept"),
    [
        ("runner_on_ok", "operator_sdk.util.k8s_status", {"changed": True}, True),
        ("runner_on_ok", "k8s_event", {"changed": True}, True),
        ("runner_on_ok", "operator_sdk.util.requeue_after", {"period": "5m"}, True),
        ("runner_on_ok", "operator_sdk.util.osdk_metric", {"request": {}}, True),
        (
            "runner_on_ok",
            "ansible.builtin.command",
            {"msg": "Command would have run if not in check mode"},
            True,
        ),
        (
            "runner_on_skipped",
            "x.y.z",
            {"msg": "remote module (x.y.z) does not support check mode"},
            True,
        ),
        (
            "runner_on_skipped",
            "ansible.builtin.debug",
            {"skip_reason": "Conditional result was False"},
            True,
        ),
        ("runner_on_ok", "kubernetes.core.k8s", {"changed": True}, False),
        ("runner_on_failed", "operator_sdk.util.k8s_status", {"msg": "no"}, False),
        ("playbook_on_stats", "", {}, False),
    ],
)
def test_observe_keeps_only_what_a_plan_reports(
    event: str, action: str, res: dict[str, Any], kept: bool
) -> None:
    journal = Journal(kube=None)  # type: ignore[arg-type]  # observe never reads the cluster
    journal.observe(_event(event, action, res))
    assert journal.entries == ([TaskEntry(event, "t", action, res)] if kept else [])
