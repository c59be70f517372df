"""config/default on a real API server, and the operator working under its RBAC alone.

The manifests are applied with a unique name prefix into the test's own
namespace (an overlay of config/default), so the cluster-scoped ClusterRole
and ClusterRoleBinding cannot collide with anyone's; they are deleted
afterwards. The CRDs are shared: created when missing, never deleted.

Then the operator runs as a local process with the ServiceAccount's identity
(a token from the TokenRequest API), with the Deployment's arguments and
environment, watching a second namespace that holds the samples of
config/samples. Every sample must become Successful and the SampleDB's
finalizer must run: so manager-role is enough for the operator and for every
role, whose API requests go through the operator's proxy with that identity.
Requests outside the rules must be denied, and the operator must never have
been denied anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.deploy import support
from tests.e2e.harness import OperatorProcess, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@dataclass
class Deployed:
    namespace: str
    objects: list[dict[str, Any]]

    def one(self, kind: str) -> dict[str, Any]:
        (found,) = [o for o in self.objects if o["kind"] == kind]
        return found

    @property
    def service_account(self) -> str:
        return str(self.one("ServiceAccount")["metadata"]["name"])

    @property
    def container(self) -> dict[str, Any]:
        return dict(self.one("Deployment")["spec"]["template"]["spec"]["containers"][0])


def _delete_cluster_scoped(api: Any, objects: list[dict[str, Any]]) -> None:
    rbac: Any = client.RbacAuthorizationV1Api(api)
    for obj in objects:
        name = obj["metadata"]["name"]
        try:
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(name)
            elif obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(name)
        except client.ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture
def deployed(
    api_client: Any, kubeconfig_path: Path, namespace: str, tmp_path: Path
) -> Iterator[Deployed]:
    overlay = support.write_overlay(
        tmp_path / "overlay",
        base=support.REPO / "config" / "default",
        namespace=namespace,
        prefix=support.unique("t") + "-",
    )
    objects = support.build(overlay)
    assert {o["kind"] for o in objects} >= {"Namespace", "ClusterRole", "Deployment"}
    support.ensure_crds(api_client)
    try:
        # Everything, CRDs included, passes the API server's validation and admission...
        support.kubectl(
            kubeconfig_path, "apply", "--dry-run=server", "-f", "-", stdin=support.to_yaml(objects)
        )
        # ...and everything but the shared CRDs is created for real. The Namespace
        # object is the test's namespace (the overlay renamed it): applying it
        # adds the Pod Security labels.
        mine = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
        support.kubectl(kubeconfig_path, "apply", "-f", "-", stdin=support.to_yaml(mine))
        yield Deployed(namespace=namespace, objects=objects)
    finally:
        _delete_cluster_scoped(api_client, objects)


def test_deployment_is_admitted_under_the_restricted_pod_security_standard(
    api_client: Any, deployed: Deployed
) -> None:
    core: Any = client.CoreV1Api(api_client)
    labels = core.read_namespace(deployed.namespace).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    apps: Any = client.AppsV1Api(api_client)
    name = deployed.one("Deployment")["metadata"]["name"]
    # kwok plays the kubelet: a pod exists only if admission let the ReplicaSet create it.
    support.wait_for(
        "the operator Deployment available",
        lambda: (
            (
                apps.read_namespaced_deployment(name, deployed.namespace).status.available_replicas
                or 0
            )
            == 1
        ),
        90,
    )


def _sa_client(path: Path) -> Any:
    return config.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]


def _denied(call: Callable[[], object]) -> bool:
    try:
        call()
    except client.ApiException as err:
        return bool(err.status == 403)
    return False


def _clear_finalizers(api: Any, namespace: str) -> None:
    custom: Any = client.CustomObjectsApi(api)
    for plural in support.plurals().values():
        for item in custom.list_namespaced_custom_object(
            support.GROUP, support.VERSION, namespace, plural
        )["items"]:
            if item["metadata"].get("finalizers"):
                custom.patch_namespaced_custom_object(
                    support.GROUP,
                    support.VERSION,
                    namespace,
                    plural,
                    item["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )


def test_operator_reconciles_every_sample_with_only_its_rbac(
    api_client: Any, kubeconfig_path: Path, deployed: Deployed, tmp_path: Path
) -> None:
    home = deployed.namespace
    core: Any = client.CoreV1Api(api_client)
    watched = support.unique("t-rbac-crs")
    core.create_namespace({"metadata": {"name": watched}})
    samples = support.samples()
    volumes: list[str] = []
    operator: OperatorProcess | None = None
    try:
        volumes = support.create_volumes(api_client, watched, support.sample_claims(samples))
        sa_kubeconfig = support.service_account_kubeconfig(
            api_client,
            namespace=home,
            service_account=deployed.service_account,
            path=tmp_path / "sa.kubeconfig",
        )
        container = deployed.container
        own = ("--health-probe-bind-address", "--metrics-bind-address")
        args = [a for a in container["args"] if not a.startswith(own)]
        args += [
            # Out of a cluster the operator cannot find its own namespace.
            f"--leader-election-namespace={home}",
            # Ports of their own: other operators may run on this machine.
            "--proxy-port=0",
            "--user-metrics-bind-address=0",
        ]
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        operator = OperatorProcess(
            kubeconfig=sa_kubeconfig,
            workdir=tmp_path,
            cwd=support.REPO,
            args=args,
            env={**env, "WATCH_NAMESPACE": watched},
            name="rbac",
        ).start()
        support.kubectl(
            kubeconfig_path, "apply", "-n", watched, "-k", str(support.REPO / "config" / "samples")
        )
        support.wait_successful(api_client, watched, samples, timeout=480)

        # Leader election used the Role in the operator's namespace.
        coordination: Any = client.CoordinationV1Api(api_client)
        lease = coordination.read_namespaced_lease(
            next(a.split("=", 1)[1] for a in args if a.startswith("--leader-election-id=")), home
        )
        assert lease.spec.holder_identity

        # The operator's Events were recorded (posted in the background, so
        # the last one may trail the status write).
        def reasons() -> set[str]:
            return {
                e.reason
                for e in core.list_namespaced_event(watched).items
                if e.involved_object.api_version == f"{support.GROUP}/{support.VERSION}"
            }

        # (Running Events come only for runs that last: controller/runningmark.py.)
        wait_for("Successful Events", lambda: "Successful" in reasons())

        # Deleting a SampleDB runs its finalizer role under the same identity.
        for obj in samples:
            if obj["kind"] == "SampleDB":
                client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
                    support.GROUP,
                    support.VERSION,
                    watched,
                    support.plurals()["SampleDB"],
                    obj["metadata"]["name"],
                )
                support.wait_for(
                    f"SampleDB {obj['metadata']['name']} finalized and gone",
                    lambda name=obj["metadata"]["name"]: (
                        support.get_cr(api_client, watched, "SampleDB", name) is None
                    ),
                    300,
                )

        # Outside the rules, the same identity is refused.
        sa = _sa_client(sa_kubeconfig)
        sa_core: Any = client.CoreV1Api(sa)
        sa_rbac: Any = client.RbacAuthorizationV1Api(sa)
        role_name = deployed.one("ClusterRole")["metadata"]["name"]
        assert _denied(sa_core.list_node)
        assert _denied(lambda: sa_rbac.delete_cluster_role(role_name))
        assert _denied(lambda: sa_core.create_namespace({"metadata": {"name": watched + "-x"}}))
        assert _denied(lambda: sa_core.patch_namespaced_secret("any", "kube-system", {"data": {}}))
        assert _denied(lambda: client.AppsV1Api(sa).delete_namespaced_deployment("any", watched))
        assert _denied(
            lambda: client.CoordinationV1Api(sa).list_namespaced_lease("kube-node-lease")
        )
        # ...while what it needs is allowed.
        assert sa_core.list_namespaced_pod(watched).items is not None

        assert operator.stop() == 0
        refused = list(support.log_lines_matching(operator.log_path, "forbidden", " 403"))
        assert not refused, "\n".join(refused[:20])
    finally:
        if operator is not None:
            operator.stop()
        _clear_finalizers(api_client, watched)
        core.delete_namespace(watched, propagation_policy="Background")
        # Give the garbage collector a moment before the volumes go.
        time.sleep(1)
        support.delete_volumes(api_client, volumes)
