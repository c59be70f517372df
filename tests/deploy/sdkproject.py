"""The Operator SDK project of tests/deploy/sdk_project, on the test cluster.

Used by test_sdk_project.py (built FROM the replayed base image) and
test_wheel.py (`make run` with the wheel's `ansible-operator` on PATH): its
CRD, its sample custom resource, what a successful reconcile must have left
(the role's Deployment and ConfigMap, `status.test` written with
operator_sdk.util.k8s_status, the Successful condition), and which module
files the runs' Ansible used, read from the runs' artifacts.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from testbed.probes import wait_until
from tests.e2e import harness

PROJECT = Path(__file__).resolve().parent / "sdk_project"
GROUP, VERSION, KIND, PLURAL = "cache.sdk-sample.example.com", "v1alpha1", "Memcached", "memcacheds"
VERBOSITY = "ansible.sdk.operatorframework.io/verbosity"
# Printed by ansible-playbook at -vvv for every module task.
_MODULE_FILE = re.compile(r"Using module file (\S+)")


def install_crd(api: Any) -> None:
    """`make install`: the project's CRD (left in place for the next test)."""
    crds = PROJECT / "config" / "crd" / "bases"
    docs = [yaml.safe_load(path.read_text()) for path in sorted(crds.glob("*.yaml"))]
    harness.apply_crds(api, docs, what="SDK project")


def create_sample(api: Any, namespace: str) -> dict[str, Any]:
    """The project's sample, at verbosity 3 so that the runs name the module files they use."""
    path = PROJECT / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
    body = copy.deepcopy(yaml.safe_load(path.read_text()))
    body["metadata"].setdefault("annotations", {})[VERBOSITY] = "3"
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return dict(created)


def wait_reconciled(api: Any, namespace: str, name: str, *, alive: Any, timeout: float) -> None:
    """Until the CR is Successful; then what the role did must be there."""
    found: dict[str, Any] = {}

    def successful() -> bool:
        obj = harness.get_cr(api, namespace, PLURAL, name, group=GROUP, version=VERSION)
        cond = harness.condition(obj, "Successful")
        if cond is not None and cond.get("status") == "True":
            found.update(obj or {})
            return True
        return False

    wait_until(f"{PLURAL}/{name} Successful", successful, timeout=timeout, alive=alive)
    assert found["status"].get("test") == "hello world", found["status"]
    deployment = client.AppsV1Api(api).read_namespaced_deployment(f"{name}-memcached", namespace)
    assert deployment.spec.replicas == 1
    assert harness.configmap(api, namespace, f"{name}-memcached") == {"size": "1"}


def module_files(runner_dir: Path) -> set[str]:
    """Every module file the runs under `runner_dir` used (from their artifacts' stdout)."""
    used: set[str] = set()
    for stdout in runner_dir.rglob("artifacts/*/stdout"):
        used.update(_MODULE_FILE.findall(stdout.read_text(errors="replace")))
    return used
