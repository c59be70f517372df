"""A planned run's journal read back as changes, and the plan's exit code: no cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_operator.plan import report
from ansible_operator.plan.changes import Analysis, analyze, without_noise
from ansible_operator.plan.journal import Entry, TaskEntry, WriteEntry
from ansible_operator.proxy.ownership import parse_request
from ansible_operator.proxy.readonly import DryRunWrite

CR: dict[str, Any] = {
    "apiVersion": "x.example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t", "namespace": "ns", "uid": "u1"},
    "status": {"phase": "Old"},
}


def cm(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", **meta},
        "data": data,
    }


def write(
    method: str, target: str, before: Any, after: Any, *, status: int = 200, refused: str = ""
) -> WriteEntry:
    sent = DryRunWrite(
        method=method,
        target=target,
        info=parse_request(method, target),
        content_type="application/json",
        body=b"",
        status=status,
        response=json.dumps(after).encode(),
        refused=refused,
    )
    return WriteEntry(write=sent, before=before, after=after)


CMS = "/api/v1/namespaces/ns/configmaps"
NOISE = {
    "resourceVersion": "7",
    "uid": "u",
    "generation": 2,
    "creationTimestamp": "t",
    "managedFields": [{"manager": "m"}],
}


def test_each_object_gets_its_action_and_a_diff() -> None:
    entries: list[Entry] = [
        write("POST", CMS, None, cm("new", {"a": "1"})),
        write(
            "PATCH",
            f"{CMS}/changed",
            cm("changed", {"a": "1"}, **NOISE),
            cm("changed", {"a": "2"}, **{**NOISE, "resourceVersion": "8"}),
        ),
        write(
            "PATCH",
            f"{CMS}/same",
            cm("same", {"a": "1"}, **NOISE),
            cm("same", {"a": "1"}, **{**NOISE, "resourceVersion": "9", "generation": 3}),
        ),
        write("DELETE", f"{CMS}/gone", cm("gone", {}), {"kind": "Status", "status": "Success"}),
        write("DELETE", f"{CMS}/never", None, {"kind": "Status", "status": "Success"}),
    ]
    found = analyze(entries, cr=CR)
    actions = [(o.action, o.ref.name) for o in found.objects]
    assert actions == [
        ("create", "new"),
        ("update", "changed"),
        ("unchanged", "same"),
        ("delete", "gone"),
    ]
    update = found.objects[1].diff
    assert "-  a: '1'\n+  a: '2'\n" in update
    assert "resourceVersion" not in update
    assert "managedFields" not in update
    assert found.objects[0].diff.startswith("--- live/new\n+++ planned/new\n")
    assert found.changed


def test_the_last_write_of_an_object_counts_against_the_first_live_read() -> None:
    entries: list[Entry] = [
        write("PATCH", f"{CMS}/c", cm("c", {"a": "1"}), cm("c", {"a": "2"})),
        write("PATCH", f"{CMS}/c", cm("c", {"a": "1"}), cm("c", {"a": "1"})),
    ]
    assert [o.action for o in analyze(entries, cr=CR).objects] == ["unchanged"]


def test_deletecollection_lists_each_object_it_would_delete() -> None:
    listed = {
        "apiVersion": "v1",
        "kind": "ConfigMapList",
        "items": [
            {"metadata": {"name": "a", "namespace": "ns"}},
            {"metadata": {"name": "b", "namespace": "ns"}},
        ],
    }
    found = analyze([write("DELETE", CMS, None, listed)], cr=CR)
    assert [(o.action, o.ref.kind, o.ref.name) for o in found.objects] == [
        ("delete", "ConfigMap", "a"),
        ("delete", "ConfigMap", "b"),
    ]


@pytest.mark.parametrize(
    ("api_version", "status_kept"),
    [
        ("v1", False),
        ("apps/v1", False),
        ("networking.k8s.io/v1", False),
        ("x.example.com/v1", True),
    ],
)
def test_status_of_built_in_kinds_is_noise(api_version: str, status_kept: bool) -> None:
    obj = {
        "apiVersion": api_version,
        "kind": "K",
        "metadata": {"name": "n", **NOISE},
        "status": {"s": 1},
    }
    clean = without_noise(obj)
    assert clean["metadata"] == {"name": "n"}
    assert ("status" in clean) is status_kept


def test_status_events_metrics_requeue_and_tasks_not_evaluated() -> None:
    status_result = {"changed": True, "result": {**CR, "status": {"phase": "New"}}}
    event = {"metadata": {"name": "e", "namespace": "ns"}, "reason": "R", "message": "m"}
    entries: list[Entry] = [
        TaskEntry("runner_on_ok", "st", "operator_sdk.util.k8s_status", status_result),
        TaskEntry(
            "runner_on_ok", "ev", "operator_sdk.util.k8s_event", {"changed": True, "result": event}
        ),
        # The same Event forced out of check mode: a dry-run write too, listed once.
        write(
            "POST",
            "/api/v1/namespaces/ns/events",
            None,
            {"apiVersion": "v1", "kind": "Event", **event, "type": "Warning"},
        ),
        TaskEntry("runner_on_ok", "rq", "requeue_after", {"period": "5m"}),
        TaskEntry(
            "runner_on_ok",
            "me",
            "operator_sdk.util.osdk_metric",
            {"changed": True, "request": {"name": "m"}},
        ),
        TaskEntry(
            "runner_on_skipped",
            "cmd",
            "ansible.builtin.shell",
            {"msg": "remote module (shell) does not support check mode"},
        ),
        TaskEntry(
            "runner_on_ok",
            "cmd2",
            "ansible.builtin.command",
            {"changed": True, "msg": "Command would have run if not in check mode"},
        ),
        TaskEntry(
            "runner_on_skipped",
            "when",
            "ansible.builtin.debug",
            {"skip_reason": "Conditional result was False"},
        ),
    ]
    found = analyze(entries, cr=CR)
    assert found.objects == []
    assert found.status_after == {"phase": "New"}
    assert "-phase: Old\n+phase: New\n" in found.status_diff
    assert found.events == [
        {"namespace": "ns", "name": "e", "type": "Warning", "reason": "R", "message": "m"}
    ]
    assert found.requeue_after == "5m"
    assert found.metrics == [{"name": "m"}]
    assert [n.task for n in found.not_evaluated] == ["cmd", "cmd2"]
    assert found.changed  # the status


def test_a_status_write_through_the_proxy_is_the_status_not_an_object() -> None:
    target = "/apis/x.example.com/v1/namespaces/ns/things/t/status"
    found = analyze([write("PATCH", target, CR, {**CR, "status": {"phase": "Old"}})], cr=CR)
    assert found.objects == []
    assert found.status_diff == ""
    assert not found.changed


def test_failed_and_refused_requests_are_errors() -> None:
    entries: list[Entry] = [
        write("PATCH", f"{CMS}/x", None, {"kind": "Status", "message": "not there"}, status=404),
        write(
            "POST",
            "/api/v1/namespaces/ns/pods/p/exec",
            None,
            None,
            status=403,
            refused="read-only run (plan): refused",
        ),
    ]
    found = analyze(entries, cr=CR)
    assert found.objects == []
    assert found.errors == [
        "PATCH patch configmaps/x in ns: HTTP 404: not there",
        "read-only run (plan): refused",
    ]


def _plan(analysis: Analysis, error: str | None = None) -> report.Plan:
    resource = {
        "apiVersion": "x.example.com/v1",
        "kind": "Thing",
        "namespace": "ns",
        "name": "t",
        "exists": True,
    }
    return report.Plan(
        resource=resource, mode="reconcile", runs="role /r", analysis=analysis, error=error
    )


@pytest.mark.parametrize(
    ("entries", "error", "code", "result"),
    [
        ([], None, 0, "no-changes"),
        ([write("PATCH", f"{CMS}/s", cm("s", {}), cm("s", {}))], None, 0, "no-changes"),
        ([write("POST", CMS, None, cm("n", {}))], None, 2, "changes"),
        ([write("POST", CMS, None, cm("n", {}))], "task [x] failed", 1, "error"),
    ],
)
def test_exit_codes_like_terraform_detailed_exitcode(
    entries: list[Entry], error: str | None, code: int, result: str
) -> None:
    plan = _plan(analyze(entries, cr=CR), error)
    assert report.exit_code(plan) == code
    document = json.loads(report.to_json(plan))
    assert document["result"] == result
    assert document["apiVersion"] == report.SCHEMA
    assert sorted(document) == sorted(
        [
            "apiVersion",
            "kind",
            "resource",
            "mode",
            "runs",
            "result",
            "objects",
            "status",
            "events",
            "metrics",
            "notEvaluated",
            "requeueAfter",
            "requestErrors",
            "error",
            "runSeconds",
            "compatDeprecations",
        ]
    )
    assert report.text(plan).rstrip().endswith("unchanged.") or error


def test_the_last_applied_annotation_is_noise() -> None:
    applied = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    assert "annotations" not in without_noise(cm("a", {}, annotations=applied))["metadata"]
    kept = without_noise(cm("a", {}, annotations={**applied, "x": "1"}))
    assert kept["metadata"]["annotations"] == {"x": "1"}
