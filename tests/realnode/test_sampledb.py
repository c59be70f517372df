"""SampleDB on the real node, through the real operator: the operations happen.

One database goes through its whole life as a user would drive it: rows
written through its Service, a backup taken from the CronJob (as `kubectl
create job --from=cronjob/...` does), the table dropped and restored from
that backup, the major version raised 15 -> 17 by pg_upgrade with the rows
kept, and the CR deleted with a final snapshot that a new SampleDB restores.
Each step checks PostgreSQL itself, not only what the role asked Kubernetes for.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.harness import OperatorProcess
from tests.examples.test_examples import GROUP, VERSION, get_cr, patch_cr, reconciled
from tests.realnode.support import kubectl, psql, run_pod, wait

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

DB = "shop"


def _secret(api: Any, ns: str, name: str) -> dict[str, str]:
    data = client.CoreV1Api(api).read_namespaced_secret(name, ns).data or {}
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def through_service(api: Any, ns: str, name: str, db: str, sql: str, pod: str) -> str:
    """Run SQL as the application user from another pod, through the Service's DNS name."""
    creds = _secret(api, ns, f"{db}-credentials")
    image = "testbed.local/postgresql:17"
    command = ["psql", "-h", creds["host"], "-U", creds["username"], "-d", creds["database"]]
    out = run_pod(
        api,
        ns,
        pod,
        image,
        [*command, "-v", "ON_ERROR_STOP=1", "-tAc", sql],
        env={"PGPASSWORD": creds["password"]},
    )
    return out.strip()


def _backup_now(api: Any, kubeconfig: Path, ns: str, name: str) -> None:
    kubectl(kubeconfig, "-n", ns, "create", "job", f"--from=cronjob/{DB}-backup", name)
    batch = client.BatchV1Api(api)
    wait(
        f"backup Job {name} complete",
        lambda: (batch.read_namespaced_job(name, ns).status.succeeded or 0) >= 1,
    )


def _sampledb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SampleDB",
        "metadata": {"name": name},
        "spec": {
            "version": "15",
            "storageSize": "1Gi",
            "backup": {"schedule": "0 3 * * *", "keep": 3, "storageSize": "1Gi"},
            **spec,
        },
    }


def test_sampledb_writes_backs_up_restores_upgrades_and_snapshots(
    api_client: Any, kubeconfig_path: Path, rn_namespace: str, rn_operator: OperatorProcess
) -> None:
    ns, custom = rn_namespace, client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "sampledbs", _sampledb(DB))
    reconciled(api_client, ns, "SampleDB", DB, until=lambda o: o["status"].get("phase") == "Ready")

    sql = "CREATE TABLE orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES (1, 'tea'), (2, 'cake')"
    through_service(api_client, ns, DB, DB, sql, "write")
    _backup_now(api_client, kubeconfig_path, ns, "shop-backup-manual")
    psql(kubeconfig_path, ns, f"{DB}-0", "DROP TABLE orders", database="app")

    patch_cr(api_client, ns, "SampleDB", DB, {"restore": {"from": "shop-backup-manual"}})
    obj = reconciled(
        api_client, ns, "SampleDB", DB,
        until=lambda o: o["status"].get("restoredFrom") == "shop-backup-manual",
    )  # fmt: skip
    assert obj["status"]["phase"] == "Ready"
    rows = "SELECT string_agg(item, ',' ORDER BY id) FROM orders"
    assert through_service(api_client, ns, DB, DB, rows, "read-restored") == "tea,cake"

    patch_cr(api_client, ns, "SampleDB", DB, {"version": "17"})
    reconciled(api_client, ns, "SampleDB", DB, until=lambda o: o["status"].get("version") == "17")
    assert through_service(api_client, ns, DB, DB, rows, "read-upgraded") == "tea,cake"
    version = through_service(api_client, ns, DB, DB, "SHOW server_version_num", "version")
    assert version.startswith("17"), version

    # Deletion: the finalizer dumps the database; the volume with the dump stays.
    claim = client.CoreV1Api(api_client).read_namespaced_persistent_volume_claim(
        f"{DB}-backups", ns
    )
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "sampledbs", DB)
    wait("SampleDB gone", lambda: get_cr(api_client, ns, "SampleDB", DB) is None, timeout=300)
    core = client.CoreV1Api(api_client)
    pv = core.read_persistent_volume(claim.spec.volume_name)
    snapshot = pv.metadata.annotations["examples.ansible-operator.dev/final-snapshot"]
    _restore_snapshot_into_a_new_database(api_client, ns, pv, snapshot, rows)


def _restore_snapshot_into_a_new_database(
    api: Any, ns: str, pv: Any, snapshot: str, rows: str
) -> None:
    """docs/examples/sampledb.md, "Deletion and the final snapshot": claim the
    kept volume again, then a new SampleDB restores the snapshot from it."""
    core = client.CoreV1Api(api)
    wait("backup claim gone", lambda: _claim_gone(core, ns, f"{DB}-backups"))
    core.patch_persistent_volume(pv.metadata.name, [{"op": "remove", "path": "/spec/claimRef"}])
    new = "shop2"
    core.create_namespaced_persistent_volume_claim(
        ns,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name=f"{new}-backups"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                storage_class_name=pv.spec.storage_class_name,
                volume_name=pv.metadata.name,
            ),
        ),
    )
    body = _sampledb(new, version="17", finalSnapshot=False, restore={"from": snapshot})
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, ns, "sampledbs", body
    )
    reconciled(
        api, ns, "SampleDB", new, until=lambda o: o["status"].get("restoredFrom") == snapshot
    )
    assert through_service(api, ns, new, new, rows, "read-snapshot") == "tea,cake"
    print(json.dumps({"final_snapshot": snapshot, "volume": pv.metadata.name}))


def _claim_gone(core: client.CoreV1Api, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_persistent_volume_claim(name, ns)
    except client.ApiException as err:
        return err.status == 404
    return False
