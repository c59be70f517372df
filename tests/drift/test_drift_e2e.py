"""Drift checks and observe-only with the real operator on the testbed (docs/plan.md).

The Scaler kind of the plan project owns one Deployment scaled to `spec.size`.
Drift is a hand-made change of that Deployment's replicas: the drift check
must report it in the `Drifted` condition, with one Event and the gauge,
without touching the Deployment; observe-only must keep the operator's hands
off until it is switched off.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from testbed.probes import wait_until
from tests.drift.conftest import (
    PERIOD,
    get_scaler,
    patch_scaler,
    replicas,
    scale,
    scaler,
)
from tests.e2e.harness import OperatorProcess, condition, custom, events_for
from tests.plan.conftest import GROUP, PROJECT, VERSION

pytestmark = pytest.mark.cluster

PREFIX = "ansible.sdk.operatorframework.io/"
GVK = f"{GROUP}/{VERSION}, Kind=Scaler"
CONTROLLER = "scaler-v1alpha1-controller"
# A check is due at most PERIOD after the change, then plans for a few seconds
# (more on a loaded machine): "within one check period" plus the plan itself.
WITHIN_ONE_PERIOD = 3.0 + 30.0


def _sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def _drifted(api: Any, ns: str, name: str) -> dict[str, Any] | None:
    return condition(get_scaler(api, ns, name), "Drifted")


def _wait_drifted(api: Any, ns: str, name: str, status: str, timeout: float) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def check() -> bool:
        cond = _drifted(api, ns, name)
        if cond is not None and cond["status"] == status:
            found.update(cond)
            return True
        return False

    wait_until(f"{name} Drifted={status}", check, timeout=timeout)
    return found


def _events(api: Any, ns: str, name: str, reason: str) -> int:
    return sum(e.count or 1 for e in events_for(api, ns, name) if e.reason == reason)


def _one_event(api: Any, ns: str, name: str, reason: str) -> None:
    """Exactly one Event `reason` of `name`: the recorder posts it after the status
    write, from a thread of its own, so it may trail the condition a little."""
    wait_until(f"{reason} Event", lambda: _events(api, ns, name, reason) > 0, timeout=15)
    assert _events(api, ns, name, reason) == 1


def _reconciles(operator: OperatorProcess) -> float:
    text = operator.metrics()
    return sum(
        _sample(text, "controller_runtime_reconcile_total", controller=CONTROLLER, result=result)
        for result in ("success", "error", "requeue", "requeue_after")
    )


def _operator(kubeconfig: Path, workdir: Path, ns: str, cwd: Path = PROJECT) -> OperatorProcess:
    return OperatorProcess(
        kubeconfig=kubeconfig, workdir=workdir, cwd=cwd, env={"WATCH_NAMESPACE": ns}
    ).start()


def _successful(api: Any, ns: str, name: str) -> None:
    def check() -> bool:
        cond = condition(get_scaler(api, ns, name), "Successful")
        return cond is not None and cond["status"] == "True"

    wait_until(f"{name} Successful", check, timeout=90)


def test_observe_only_reports_drift_and_keeps_its_hands_off(
    api_client: Any, namespace: str, kubeconfig_path: Path, tmp_path: Path, plan_crds: list[str]
) -> None:
    ns = namespace
    custom(api_client).create_namespaced_custom_object(
        GROUP, VERSION, ns, "scalers", scaler(ns, "web", 1)
    )
    operator = _operator(kubeconfig_path, tmp_path, ns)
    try:
        _successful(api_client, ns, "web")
        assert replicas(api_client, ns, "web") == 1
        patch_scaler(
            api_client,
            ns,
            "web",
            {
                "metadata": {
                    "annotations": {
                        PREFIX + "observe-only": "true",
                        PREFIX + "drift-check-period": PERIOD,
                    }
                }
            },
        )
        in_sync = _wait_drifted(api_client, ns, "web", "False", WITHIN_ONE_PERIOD)
        assert (
            in_sync["observedGeneration"]
            == get_scaler(api_client, ns, "web")["metadata"]["generation"]
        )
        runs = _reconciles(operator)

        # By hand: the dependent watch enqueues the CR, which must not run.
        scale(api_client, ns, "web", 3)
        scaled_at = time.monotonic()
        drifted = _wait_drifted(api_client, ns, "web", "True", WITHIN_ONE_PERIOD)
        assert time.monotonic() - scaled_at < WITHIN_ONE_PERIOD
        assert drifted["reason"] == "Drifted"
        assert drifted["message"] == f"Drifted: Deployment {ns}/web"
        assert replicas(api_client, ns, "web") == 3
        assert _sample(operator.metrics(), "ansible_operator_drifted_resources", GVK=GVK) == 1
        # A later check finds the same drift: no second Event, still hands off.
        stamp = drifted["lastTransitionTime"]
        checks = len(operator.logged(lambda e: str(e.get("msg", "")).startswith("Drift check")))
        wait_until(
            "another drift check",
            lambda: (
                len(operator.logged(lambda e: str(e.get("msg", "")).startswith("Drift check")))
                > checks + 1
            ),
            timeout=WITHIN_ONE_PERIOD,
        )
        assert _drifted(api_client, ns, "web")["lastTransitionTime"] == stamp  # type: ignore[index]
        assert replicas(api_client, ns, "web") == 3
        assert _events(api_client, ns, "web", "Drifted") == 1
        assert _reconciles(operator) == runs  # drift checks are no reconciles

        scale(api_client, ns, "web", 1)  # reverted by hand
        resolved = _wait_drifted(api_client, ns, "web", "False", WITHIN_ONE_PERIOD)
        assert resolved["reason"] == "InSync"
        _one_event(api_client, ns, "web", "DriftResolved")
        assert _sample(operator.metrics(), "ansible_operator_drifted_resources", GVK=GVK) == 0
        others = {c["type"] for c in get_scaler(api_client, ns, "web")["status"]["conditions"]}
        assert {"Running", "Successful", "Drifted"} <= others

        # Off again: the role runs at once (no drift period, no reconcile period waited for).
        scale(api_client, ns, "web", 2)
        patch_scaler(
            api_client, ns, "web", {"metadata": {"annotations": {PREFIX + "observe-only": None}}}
        )
        wait_until("the role scaled back", lambda: replicas(api_client, ns, "web") == 1, timeout=60)
        # Counted after the run's status write, so it may trail the Deployment.
        wait_until("the reconcile counted", lambda: _reconciles(operator) > runs, timeout=30)
    finally:
        operator.stop()


def test_an_observe_only_cr_is_deleted_without_its_finalizer_running(
    api_client: Any, namespace: str, kubeconfig_path: Path, tmp_path: Path, plan_crds: list[str]
) -> None:
    ns = namespace
    body = scaler(ns, "gone", 1)
    custom(api_client).create_namespaced_custom_object(GROUP, VERSION, ns, "scalers", body)
    operator = _operator(kubeconfig_path, tmp_path, ns)
    try:
        _successful(api_client, ns, "gone")
        observe = {PREFIX + "observe-only": "true", PREFIX + "drift-check-period": PERIOD}
        patch_scaler(api_client, ns, "gone", {"metadata": {"annotations": observe}})
        _wait_drifted(api_client, ns, "gone", "False", WITHIN_ONE_PERIOD)  # the operator saw it
        custom(api_client).delete_namespaced_custom_object(GROUP, VERSION, ns, "scalers", "gone")

        def deleted() -> bool:
            items = custom(api_client).list_namespaced_custom_object(GROUP, VERSION, ns, "scalers")
            return not cast(dict[str, Any], items)["items"]

        wait_until("the CR deleted", deleted, timeout=30)
        assert _events(api_client, ns, "gone", "Finalized") == 0
        assert not operator.logged(
            lambda e: e.get("name") == "gone" and "remove the Deployment" in str(e.get("task"))
        )
    finally:
        operator.stop()


def test_a_watch_with_a_drift_period_reports_drift_until_a_reconcile_corrects_it(
    api_client: Any, namespace: str, kubeconfig_path: Path, tmp_path: Path, plan_crds: list[str]
) -> None:
    ns = namespace
    project = tmp_path / "project"
    project.mkdir()
    # Without dependent watches a hand-made change waits for the next reconcile.
    watches = [
        {
            "group": GROUP,
            "version": VERSION,
            "kind": "Scaler",
            "role": str(PROJECT / "roles" / "scaler"),
            "watchDependentResources": False,
            "driftCheckPeriod": PERIOD,
        }
    ]
    (project / "watches.yaml").write_text(yaml.safe_dump(watches))
    custom(api_client).create_namespaced_custom_object(
        GROUP, VERSION, ns, "scalers", scaler(ns, "api", 1)
    )
    operator = _operator(kubeconfig_path, tmp_path, ns, cwd=project)
    try:
        _successful(api_client, ns, "api")
        _wait_drifted(api_client, ns, "api", "False", WITHIN_ONE_PERIOD)
        scale(api_client, ns, "api", 4)
        drifted = _wait_drifted(api_client, ns, "api", "True", WITHIN_ONE_PERIOD)
        assert drifted["message"] == f"Drifted: Deployment {ns}/api"
        assert replicas(api_client, ns, "api") == 4
        _one_event(api_client, ns, "api", "Drifted")

        # The next reconcile (here: a spec change) corrects it; the next check sees it.
        patch_scaler(api_client, ns, "api", {"spec": {"size": 2}})
        wait_until("reconciled to 2", lambda: replicas(api_client, ns, "api") == 2, timeout=60)
        _wait_drifted(api_client, ns, "api", "False", WITHIN_ONE_PERIOD)
        _one_event(api_client, ns, "api", "DriftResolved")
        generation = get_scaler(api_client, ns, "api")["metadata"]["generation"]
        assert _drifted(api_client, ns, "api")["observedGeneration"] == generation  # type: ignore[index]
    finally:
        operator.stop()
    # The operator is gone: let the namespace go without the finalizer (none here).
