"""End to end: the operator process reconciles CRs on a real API server.

Every test here talks to the one operator of `shared_operator` through the
Kubernetes API only, exactly as a user would with kubectl.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import (
    OperatorProcess,
    condition,
    configmap,
    create_cr,
    custom,
    events_for,
    get_cr,
    wait_condition,
    wait_for,
)

pytestmark = pytest.mark.cluster
GROUP, VERSION = "e2e.example.com", "v1alpha1"


def _conditions(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [
        (c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
        for c in obj["status"]["conditions"]
    ]


def test_create_reaches_successful_with_the_reference_conditions_and_nothing_of_kopf(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "widgets", "Widget", "first", {"size": 2, "message": "hello"})
    obj = wait_condition(api_client, ns, "widgets", "first", "Successful")

    assert _conditions(obj) == [
        ("Running", "True", "Successful", "Awaiting next reconciliation"),
        ("Successful", "True", "Successful", "Last reconciliation succeeded"),
        ("Failure", "False", "", ""),
    ]
    result = condition(obj, "Running")["ansibleResult"]  # type: ignore[index]
    assert result["failures"] == 0
    assert result["ok"] >= 2
    assert result["completion"].endswith("+00:00")
    assert configmap(api_client, ns, "first-config") == {"message": "hello", "size": "2"}
    deployment = client.AppsV1Api(api_client).read_namespaced_deployment("first-widget", ns)
    assert deployment.spec.replicas == 2

    # kopf leaves nothing of its own on the object
    meta = obj["metadata"]
    assert not [k for k in (meta.get("annotations") or {}) if "kopf" in k]
    assert not meta.get("finalizers")
    # The status holds the reference's conditions and our restart record
    # (docs/runner.md: "No restart storm"), nothing of kopf's.
    assert set(obj["status"]) == {"conditions", "reconciledDigest"}
    assert obj["status"]["reconciledDigest"].startswith(f"{meta['generation']}:")


def test_a_spec_change_runs_the_role_again(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "widgets", "Widget", "changing", {"size": 1, "message": "one"})
    wait_condition(api_client, ns, "widgets", "changing", "Successful")
    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "widgets", "changing", {"spec": {"message": "two"}}
    )
    wait_for(
        "ConfigMap updated by the second run",
        lambda: (configmap(api_client, ns, "changing-config") or {}).get("message") == "two",
    )


def test_a_failing_role_reports_failure_and_an_event_then_recovers(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "widgets", "Widget", "broken", {"fail": True})
    obj = wait_condition(api_client, ns, "widgets", "broken", "Failure")
    failure = condition(obj, "Failure")
    assert failure is not None
    assert failure["reason"] == "Failed"
    assert failure["message"] == "widget broken was asked to fail"
    assert failure["ansibleResult"]["failures"] == 1
    assert condition(obj, "Successful")["status"] == "False"  # type: ignore[index]

    def failed_event() -> bool:
        return any(
            e.reason == "Failed"
            and e.type == "Warning"
            and 'Task "Refuse to deploy" failed: widget broken was asked to fail' in e.message
            for e in events_for(api_client, ns, "broken")
        )

    wait_for("Warning Event naming the failed task", failed_event, timeout=30)

    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "widgets", "broken", {"spec": {"fail": False}}
    )
    obj = wait_condition(api_client, ns, "widgets", "broken", "Successful")
    assert condition(obj, "Failure")["status"] == "False"  # type: ignore[index]


def test_a_playbook_kind_sees_watch_vars_and_the_raw_object(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "gadgets", "Gadget", "g1", {"color": "blue"})
    wait_condition(api_client, ns, "gadgets", "g1", "Successful")
    assert configmap(api_client, ns, "g1-gadget") == {
        "color": "blue",
        "from_watch": "watch-var",
        "raw_kind": "Gadget",
    }


def _finalized(api_client: Any, ns: str, name: str) -> bool:
    return any(e.reason == "Finalized" for e in events_for(api_client, ns, name))


def _task_ran(operator: OperatorProcess, name: str, task: str) -> bool:
    return bool(
        operator.logged(
            lambda e: (
                e.get("name") == name
                and e.get("task") == task
                and e.get("event_type") == "runner_on_ok"
            )
        )
    )


def test_finalizer_runs_on_delete_then_the_cr_goes(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "cleanables", "Cleanable", "c1", {})
    obj = wait_condition(api_client, ns, "cleanables", "c1", "Successful")
    assert obj["metadata"]["finalizers"] == ["e2e.example.com/finalizer"]
    assert configmap(api_client, ns, "c1-resource") is not None

    run_dir = shared_operator.runner_dir / GROUP / VERSION / "Cleanable" / ns / "c1"
    assert (run_dir / "artifacts" / "latest").exists()
    # Each run's TMPDIR is gone; kubernetes.core's discovery cache outlives it.
    wait_for("no run's TMPDIR left", lambda: not list(run_dir.glob("tmp-*")), timeout=30)
    assert list((shared_operator.runner_dir / ".discovery").glob("k8srcp-*.json"))

    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "cleanables", "c1")
    wait_for("CR gone", lambda: get_cr(api_client, ns, "cleanables", "c1") is None)
    # The finalizer role ran to the end, and what it created outlives the CR:
    # a finalizer run never makes the CR an owner.
    # Events are posted by a background thread, so the Event may trail the CR.
    wait_for("Finalized Event", lambda: _finalized(api_client, ns, "c1"), timeout=30)
    assert _task_ran(shared_operator, "c1", "Record that cleanup ran")
    assert configmap(api_client, ns, "c1-finalized") is not None
    wait_for("owned resource gone", lambda: configmap(api_client, ns, "c1-resource") is None)
    # Unlike the reference, the CR's ansible-runner directory goes with it.
    wait_for("run directory removed", lambda: not run_dir.exists(), timeout=30)


def test_a_failing_finalizer_keeps_the_cr_until_it_succeeds(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "cleanables", "Cleanable", "stuck", {"blockCleanup": True})
    wait_condition(api_client, ns, "cleanables", "stuck", "Successful")
    custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "cleanables", "stuck")
    obj = wait_condition(api_client, ns, "cleanables", "stuck", "Failure")
    assert condition(obj, "Failure")["message"] == "cleanup of stuck refused"  # type: ignore[index]
    assert obj["metadata"]["finalizers"] == ["e2e.example.com/finalizer"]
    assert obj["metadata"]["deletionTimestamp"]

    custom(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "cleanables", "stuck", {"spec": {"blockCleanup": False}}
    )
    wait_for(
        "CR gone after the finalizer succeeded",
        lambda: get_cr(api_client, ns, "cleanables", "stuck") is None,
    )
    wait_for("Finalized Event", lambda: _finalized(api_client, ns, "stuck"), timeout=30)
    assert _task_ran(shared_operator, "stuck", "Record that cleanup ran")


def test_manage_status_false_runs_but_never_writes_status(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "quiets", "Quiet", "q1", {"value": "x"})
    wait_for("the playbook ran", lambda: configmap(api_client, ns, "q1-ran") == {"value": "x"})
    assert "status" not in (get_cr(api_client, ns, "quiets", "q1") or {})


def test_a_crd_without_status_subresource_gets_an_event_not_a_loop(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "statuslesses", "Statusless", "s1", {"value": "y"})
    wait_for("the playbook ran", lambda: configmap(api_client, ns, "s1-ran") == {"value": "y"})

    def warned() -> bool:
        return any(e.reason == "StatusSubresourceMissing" for e in events_for(api_client, ns, "s1"))

    wait_for("StatusSubresourceMissing Event", warned, timeout=30)
    assert "status" not in (get_cr(api_client, ns, "statuslesses", "s1") or {})


def _sample(metrics_text: str, name: str, **labels: str) -> float:
    """The value of the series `name{labels}` in Prometheus text, 0 when absent."""
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def _successful_runs(api_client: Any, ns: str, name: str) -> int:
    # Successful Events: a Running Event comes only for runs that last (runningmark.py).
    return sum(e.count or 1 for e in events_for(api_client, ns, name) if e.reason == "Successful")


def test_the_reconcile_period_annotation_causes_periodic_runs(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(
        api_client,
        ns,
        "gadgets",
        "Gadget",
        "periodic",
        {"color": "red"},
        annotations={"ansible.sdk.operatorframework.io/reconcile-period": "2s"},
    )
    wait_condition(api_client, ns, "gadgets", "periodic", "Successful")
    wait_for(
        "at least 3 runs from the 2s period",
        lambda: _successful_runs(api_client, ns, "periodic") >= 3,
        timeout=60,
    )


def test_a_bad_reconcile_period_annotation_is_reported_in_status(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(
        api_client,
        ns,
        "gadgets",
        "Gadget",
        "badperiod",
        {},
        annotations={"ansible.sdk.operatorframework.io/reconcile-period": "soon"},
    )
    obj = wait_condition(api_client, ns, "gadgets", "badperiod", "Failure")
    message = condition(obj, "Failure")["message"]  # type: ignore[index]
    assert message == 'Unable to parse reconcile period annotation: time: invalid duration "soon"'


def test_the_label_selector_filters(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "pickies", "Picky", "chosen", {"value": "in"}, labels={"pick": "yes"})
    create_cr(api_client, ns, "pickies", "Picky", "ignored", {"value": "out"})
    wait_for("the selected CR ran", lambda: configmap(api_client, ns, "chosen-ran") is not None)
    wait_condition(api_client, ns, "pickies", "chosen", "Successful")
    # The selected CR's run is done; the other one was never queued.
    assert configmap(api_client, ns, "ignored-ran") is None
    assert "status" not in (get_cr(api_client, ns, "pickies", "ignored") or {})


def test_probes_metrics_and_logs(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    create_cr(api_client, ns, "gadgets", "Gadget", "observed", {"color": "green"})
    wait_condition(api_client, ns, "gadgets", "observed", "Successful")

    assert shared_operator.get("/healthz")[0] == 200
    assert shared_operator.get("/readyz")[0] == 200
    text = shared_operator.metrics()
    gvk = 'GVK="e2e.example.com/v1alpha1, Kind=Gadget"'
    assert f'ansible_operator_reconcile_result{{{gvk},result="succeeded"}}' in text
    assert f"ansible_operator_reconciles_count{{{gvk}}}" in text
    # The series exists from start-up at 0; this reconcile must count in it
    # (counted after the status write, so it may trail the condition).
    wait_for(
        "the reconcile counted",
        lambda: (
            _sample(
                shared_operator.metrics(),
                "controller_runtime_reconcile_total",
                controller="gadget-v1alpha1-controller",
                result="requeue_after",
            )
            >= 1
        ),
        timeout=30,
    )
    assert (
        'resource_created_at_seconds{group="e2e.example.com",kind="Gadget",name="observed",'
        f'namespace="{ns}",version="v1alpha1"}}'
    ) in text
    assert (
        'ansible_operator_run_duration_seconds_count{gvk="e2e.example.com/v1alpha1, Kind=Gadget",outcome="successful"}'
        in text
    )

    mine = shared_operator.logged(lambda e: e.get("name") == "observed")
    assert any(e["msg"] == "Ansible-runner exited successfully" for e in mine)
    tasks = [e for e in mine if e["msg"].startswith("[playbook task")]
    assert any(e.get("task") == "ConfigMap with what the playbook saw" for e in tasks)
    assert all(e.get("namespace") == ns for e in mine)


def test_a_crd_created_after_start_up_is_picked_up(
    api_client: Any, shared_namespace: str, shared_operator: OperatorProcess
) -> None:
    ns = shared_namespace
    ext = client.ApiextensionsV1Api(api_client)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "latecomers.e2e.example.com"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "latecomers", "singular": "latecomer", "kind": "Latecomer"},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    ext.create_custom_resource_definition(crd)
    try:
        wait_for("CRD served", lambda: _served(api_client), timeout=30)
        create_cr(api_client, ns, "latecomers", "Latecomer", "late", {"value": "z"})
        wait_condition(api_client, ns, "latecomers", "late", "Successful", timeout=120)
        assert configmap(api_client, ns, "late-ran") == {"value": "z"}
    finally:
        ext.delete_custom_resource_definition("latecomers.e2e.example.com")


def _served(api_client: Any) -> bool:
    try:
        client.CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, "latecomers")
    except client.ApiException:
        return False
    return True
