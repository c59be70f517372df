"""`ansible-operator plan` changes nothing, even for writes outside check mode (testbed).

The `everything` role (tests/plan/project) creates, patches, replaces,
server-side-applies and deletes ConfigMaps, writes one more with
`check_mode: false`, runs k8s_status (also forced out of check mode),
k8s_event (also forced), osdk_metric, requeue_after and a command. After the
plan every object's resourceVersion is the same, nothing new exists, no Event
was written, the command did not run, and the plan lists each change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.plan.conftest import GROUP, VERSION, PlanCli

pytestmark = pytest.mark.cluster

EXISTING = ("plan-patched", "plan-replaced", "plan-applied", "plan-deleted")


def _snapshot(api: Any, namespace: str) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    planned = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "planneds")
    return {
        # kube-root-ca.crt is written by the controller manager whenever it gets to it.
        "configmaps": {
            c.metadata.name: c.metadata.resource_version
            for c in core.list_namespaced_config_map(namespace).items
            if c.metadata.name != "kube-root-ca.crt"
        },
        "events": [e.metadata.name for e in core.list_namespaced_event(namespace).items],
        "planned": {
            p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in planned["items"]
        },
    }


def _cr(namespace: str, size: int, marker: Path) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Planned",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"size": size, "marker": str(marker)},
    }


def test_plan_lists_every_change_and_changes_nothing(
    api_client: Any, namespace: str, plan_cli: PlanCli, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    for name in EXISTING:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"a": "b"}}
        )
    marker = tmp_path / "command-ran"
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "planneds", _cr(namespace, 1, marker)
    )
    before = _snapshot(api_client, namespace)
    cr_file = tmp_path / "cr.yaml"
    cr_file.write_text(yaml.safe_dump(_cr(namespace, 2, marker)))

    done = plan_cli("-f", str(cr_file), "-o", "json")

    assert done.returncode == 2, done.stderr + done.stdout
    assert _snapshot(api_client, namespace) == before
    assert not marker.exists()
    plan = json.loads(done.stdout)
    assert plan["result"] == "changes"
    assert plan["error"] is None
    assert plan["requestErrors"] == []
    assert [(o["action"], o["name"]) for o in plan["objects"]] == [
        ("create", "p-created"),
        ("update", "plan-patched"),
        ("update", "plan-replaced"),
        ("update", "plan-applied"),
        ("delete", "plan-deleted"),
        ("create", "p-forced"),
    ]
    diffs = {o["name"]: o["diff"] for o in plan["objects"]}
    assert "+  size: '2'\n" in diffs["p-created"]
    assert "+  patched: 'yes'\n" in diffs["plan-patched"]
    assert "-  a: b\n+  replaced: 'yes'\n" in diffs["plan-replaced"]
    assert "+  applied: 'yes'\n" in diffs["plan-applied"]
    assert "+  forced: 'yes'\n" in diffs["p-forced"]
    for diff in diffs.values():
        assert "resourceVersion" not in diff
        assert "managedFields" not in diff
    assert plan["status"]["after"] == {"phase": "Planned", "size": "2"}
    assert plan["status"]["changed"] is True
    assert sorted((e["name"], e["reason"]) for e in plan["events"]) == [
        ("p-forced", "Forced"),
        ("p-planned", "Planned"),
    ]
    assert [n["task"] for n in plan["notEvaluated"]] == ["a command"]
    assert plan["metrics"] == [
        {
            "name": "plan_test_total",
            "description": "a metric a plan never sends",
            "counter": {"increment": True},
        }
    ]
    assert plan["requeueAfter"] == "5m"


def test_text_output_names_each_change(
    api_client: Any, namespace: str, plan_cli: PlanCli, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api_client)
    for name in EXISTING:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"a": "b"}}
        )
    marker = tmp_path / "command-ran"
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "planneds", _cr(namespace, 1, marker)
    )
    before = _snapshot(api_client, namespace)

    done = plan_cli("Planned", "p", "-n", namespace)

    assert done.returncode == 2, done.stderr + done.stdout
    assert _snapshot(api_client, namespace) == before
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"Plan for Planned {namespace}/p ({GROUP}/{VERSION}): reconcile, role "
    )
    assert f"  + create    ConfigMap {namespace}/p-created (v1)" in lines, done.stdout
    assert f"  - delete    ConfigMap {namespace}/plan-deleted (v1)" in lines, done.stdout
    assert "Status the run would write (not written):" in lines, done.stdout
    assert "Not evaluated (not run in check mode):" in lines, done.stdout
    assert (
        lines[-1] == "Plan: 2 to create, 3 to update, 1 to delete, 0 unchanged, status changes."
    ), done.stdout
