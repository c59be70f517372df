"""A plan as text for people and as a stable JSON document for tools; its exit code.

Where it sits: `plan.command` builds a `Plan` from the target CR, the run's
verdict and `plan.changes.analyze`, then prints `text(plan)` or
`document(plan)` and returns `exit_code(plan)`: 0 nothing would change,
2 something would, 1 the plan could not be made or a task failed (like
`terraform plan -detailed-exitcode`). docs/plan.md documents the JSON fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ansible_operator.compat.notices import Notice
from ansible_operator.plan.changes import Analysis, ObjectChange

SCHEMA = "plan.ansible-operator.io/v1"

NO_CHANGES, CHANGES, ERROR = 0, 2, 1

_SIGNS = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}


@dataclass(frozen=True, slots=True)
class Plan:
    resource: dict[str, Any]  # apiVersion, kind, namespace, name, exists
    mode: str  # "reconcile" or "finalizer"
    runs: str  # "role <path>" or "playbook <path>"
    analysis: Analysis
    error: str | None = None  # why the run failed (the failing tasks' messages)
    run_seconds: float = 0.0  # how long the Ansible run took
    # ansible-core 2.18 behaviours the run relied on (compat.notices; docs/porting.md).
    deprecations: tuple[Notice, ...] = ()


def exit_code(plan: Plan) -> int:
    if plan.error is not None:
        return ERROR
    return CHANGES if plan.analysis.changed else NO_CHANGES


def _result(plan: Plan) -> str:
    return {ERROR: "error", CHANGES: "changes", NO_CHANGES: "no-changes"}[exit_code(plan)]


def _object(change: ObjectChange) -> dict[str, Any]:
    ref = change.ref
    return {
        "action": change.action,
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
        "subresource": ref.subresource,
        "diff": change.diff,
    }


def document(plan: Plan) -> dict[str, Any]:
    """The `-o json` document (keys documented in docs/plan.md)."""
    found = plan.analysis
    return {
        "apiVersion": SCHEMA,
        "kind": "Plan",
        "resource": plan.resource,
        "mode": plan.mode,
        "runs": plan.runs,
        "result": _result(plan),
        "objects": [_object(c) for c in found.objects],
        "status": {
            "changed": bool(found.status_diff),
            "before": found.status_before or {},
            "after": found.status_after,
            "diff": found.status_diff,
        },
        "events": found.events,
        "metrics": found.metrics,
        "notEvaluated": [
            {"task": n.task, "action": n.action, "reason": n.reason} for n in found.not_evaluated
        ],
        "requeueAfter": found.requeue_after,
        "requestErrors": found.errors,
        "error": plan.error,
        "runSeconds": round(plan.run_seconds, 3),
        "compatDeprecations": [
            {"what": n.what, "task": n.task, "taskPath": n.task_path, "message": n.message}
            for n in plan.deprecations
        ],
    }


def to_json(plan: Plan) -> str:
    return json.dumps(document(plan), indent=2, sort_keys=True)


def _indented(diff: str) -> list[str]:
    return ["      " + line for line in diff.rstrip("\n").split("\n")] if diff else []


def text(plan: Plan) -> str:
    found, res = plan.analysis, plan.resource
    where = f"{res['namespace']}/" if res.get("namespace") else ""
    new = "" if res.get("exists") else ", not created yet"
    lines = [
        f"Plan for {res['kind']} {where}{res['name']} ({res['apiVersion']}{new}): "
        f"{plan.mode}, {plan.runs}",
        "",
    ]
    for change in found.objects:
        lines.append(f"  {_SIGNS[change.action]} {change.action:<9} {change.ref}")
        lines += _indented(change.diff)
    if not found.objects:
        lines.append("  (no objects written)")
    if found.status_diff:
        lines += ["", "Status the run would write (not written):"]
        lines += _indented(found.status_diff)
    lines += _section("Events the run would write (not written):", _events(found))
    lines += _section(
        "Metrics the run would send (not sent):", [json.dumps(m) for m in found.metrics]
    )
    lines += _section(
        "Not evaluated (not run in check mode):",
        [f"{n.task or n.action} [{n.action}]: {n.reason}" for n in found.not_evaluated],
    )
    if found.requeue_after:
        lines += ["", f"Requeue after: {found.requeue_after}"]
    lines += _section("Requests that failed or were refused:", found.errors)
    lines += _section(
        "ansible-core 2.18 behaviours the run relied on (docs/porting.md):",
        [f"{n.what}: task {n.task!r} at {n.task_path}: {n.message}" for n in plan.deprecations],
    )
    lines += ["", _summary(plan)]
    return "\n".join(lines) + "\n"


def _events(found: Analysis) -> list[str]:
    return [f"{e.get('type')} {e.get('reason')}: {e.get('message')}" for e in found.events]


def _section(title: str, items: list[str]) -> list[str]:
    return ["", title, *(f"  {item}" for item in items)] if items else []


def _summary(plan: Plan) -> str:
    counts = {a: 0 for a in _SIGNS}
    for change in plan.analysis.objects:
        counts[change.action] += 1
    status = ", status changes" if plan.analysis.status_diff else ""
    summary = (
        f"Plan: {counts['create']} to create, {counts['update']} to update, "
        f"{counts['delete']} to delete, {counts['unchanged']} unchanged{status}."
    )
    if plan.error is not None:
        summary = f"Error: {plan.error}\n{summary}"
    return summary
