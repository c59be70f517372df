"""The Backup kind on the real node, through the real operator.

A SampleDB with rows is backed up on a schedule to its backup volume and to an
S3 store (moto's server, on the address the node's pods reach the host on).
Each scheduled Job prunes the dumps older than `retentionDays` (files aged
with `touch -d` stand in for old dumps: no waiting for days), keeps newer
ones, and its dump restores. Then a backup that fails (a wrong password in the
Secret the Jobs read) shows in the Backup's status and as a Warning Event,
and the dump of the last good backup is still there.
"""

from __future__ import annotations

import base64
import subprocess
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.layout import Layout, read_versions
from testbed.probes import http_ok
from tests.e2e.harness import OperatorProcess
from tests.examples.test_examples import GROUP, VERSION, patch_cr, reconciled
from tests.realnode.support import psql, run_pod, wait
from tests.realnode.test_sampledb import _sampledb, through_service

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

DB, BUCKET = "ledger", "dumps"
PG = "testbed.local/postgresql:15"


@pytest.fixture(scope="module")
def s3(real_node: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server on the host end of the node's link; yields its URL."""
    moto = (
        Layout.default().cache_dir
        / f"moto-{read_versions()['MOTO_VERSION']}"
        / "bin"
        / "moto_server"
    )
    assert moto.exists(), f"{moto} missing: `testbed/build.sh s3` installs it"
    host = str(real_node["host_ip"])
    port = 20000 + (hash(str(tmp_path_factory.getbasetemp())) % 20000)
    log = (tmp_path_factory.mktemp("s3") / "moto.log").open("wb")
    server = subprocess.Popen(
        [str(moto), "-H", host, "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://{host}:{port}"
    try:
        wait("moto S3 server", lambda: http_ok(f"{url}/moto-api/"), timeout=60)
        urllib.request.urlopen(urllib.request.Request(f"{url}/{BUCKET}", method="PUT"), timeout=10)
        yield url
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def _objects(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/{BUCKET}?list-type=2", timeout=10) as resp:
        tree = ET.fromstring(resp.read())
    ns = {"s3": tree.tag.split("}")[0].strip("{")}
    return {
        c.findtext("s3:Key", namespaces=ns) or "": int(c.findtext("s3:Size", namespaces=ns) or 0)
        for c in tree.findall("s3:Contents", ns)
    }


def _on_volume(api: Any, ns: str, name: str, script: str) -> str:
    """Run a shell script in a pod that mounts the database's backup claim at /backups."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        ns,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(
                restart_policy="Never",
                containers=[
                    client.V1Container(
                        name="main",
                        image=PG,
                        command=["sh", "-ec", script],
                        volume_mounts=[client.V1VolumeMount(name="b", mount_path="/backups")],
                    )
                ],
                volumes=[
                    client.V1Volume(
                        name="b",
                        persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(
                            claim_name=f"{DB}-backups"
                        ),
                    )
                ],
            ),
        ),
    )
    phase = lambda: core.read_namespaced_pod(name, ns).status.phase  # noqa: E731
    wait(f"pod {name}", lambda: phase() in {"Succeeded", "Failed"})
    log = str(core.read_namespaced_pod_log(name, ns))
    assert phase() == "Succeeded", log
    return log


def _backup(name: str, destination: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Backup",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "target": {"kind": "SampleDB", "name": DB},
            "destination": destination,
            "retentionDays": 7,
        },
    }


def _finished_job(api: Any, ns: str, backup: str) -> str:
    """The first Job of `backup` that completed (waits for the schedule to start one)."""
    batch = client.BatchV1Api(api)
    done: list[str] = []

    def check() -> bool:
        jobs = batch.list_namespaced_job(
            ns, label_selector=f"examples.ansible-operator.dev/backup={backup}"
        ).items
        done[:] = sorted(j.metadata.name for j in jobs if (j.status.succeeded or 0) >= 1)
        return bool(done)

    wait(f"a scheduled Job of {backup} complete", check, timeout=240)
    return done[0]


def test_backups_land_on_the_volume_and_in_s3_prune_old_dumps_restore_and_report_failure(
    api_client: Any, kubeconfig_path: Path, rn_namespace: str, rn_operator: OperatorProcess, s3: str
) -> None:
    ns, custom, core = (
        rn_namespace,
        client.CustomObjectsApi(api_client),
        client.CoreV1Api(api_client),
    )
    custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, "sampledbs", _sampledb(DB, finalSnapshot=False)
    )
    reconciled(api_client, ns, "SampleDB", DB, until=lambda o: o["status"].get("phase") == "Ready")
    through_service(
        api_client,
        ns,
        DB,
        DB,
        "CREATE TABLE entries (n int); INSERT INTO entries VALUES (7)",
        "write",
    )
    # Two dumps of earlier days: one past retentionDays (7), one within it.
    _on_volume(
        api_client,
        ns,
        "age",
        "touch -d '30 days ago' /backups/vol-old.dump; touch -d '2 days ago' /backups/vol-recent.dump",
    )
    core.create_namespaced_secret(
        ns,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="s3"),
            string_data={"AWS_ACCESS_KEY_ID": "testbed", "AWS_SECRET_ACCESS_KEY": "testbed-secret"},
        ),
    )
    store = {"endpoint": s3, "bucket": BUCKET, "prefix": f"{DB}/", "credentialsSecret": "s3"}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, "backups", _backup("vol", {"volume": {"claimName": f"{DB}-backups"}})
    )
    custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, "backups", _backup("obj", {"objectStore": store})
    )

    vol_job = _finished_job(api_client, ns, "vol")
    listing = _on_volume(api_client, ns, "list", "ls -1 /backups").split()
    assert f"{vol_job}.dump" in listing
    assert "vol-recent.dump" in listing
    assert "vol-old.dump" not in listing
    obj_job = _finished_job(api_client, ns, "obj")
    objects = _objects(s3)
    assert objects.get(f"{DB}/{obj_job}.dump", 0) > 0, objects
    # pg_dump's custom format, read back from the store with the AWS CLI.
    head = run_pod(
        api_client, ns, "s3-head", "testbed.local/awscli:2.9",
        ["sh", "-c", f"aws --endpoint-url {s3} s3 cp s3://{BUCKET}/{DB}/{obj_job}.dump - | head -c 5"],
        env={"AWS_ACCESS_KEY_ID": "testbed", "AWS_SECRET_ACCESS_KEY": "testbed-secret",
             "AWS_DEFAULT_REGION": "us-east-1"},
    )  # fmt: skip
    assert head.startswith("PGDMP"), head

    # The scheduled dump restores.
    psql(kubeconfig_path, ns, f"{DB}-0", "DROP TABLE entries", database="app")
    patch_cr(api_client, ns, "SampleDB", DB, {"restore": {"from": vol_job}})
    reconciled(
        api_client, ns, "SampleDB", DB, until=lambda o: o["status"].get("restoredFrom") == vol_job
    )
    assert through_service(api_client, ns, DB, DB, "SELECT n FROM entries", "read") == "7"

    _a_failed_backup_is_reported_and_keeps_the_good_dump(api_client, ns, vol_job)


def _a_failed_backup_is_reported_and_keeps_the_good_dump(api: Any, ns: str, good_job: str) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    patch_cr(api, ns, "Backup", "obj", {"suspend": True})
    secret = f"{DB}-credentials"
    core.patch_namespaced_secret(
        secret, ns, {"data": {"postgres-password": base64.b64encode(b"wrong").decode()}}
    )
    patch_cr(api, ns, "Backup", "vol", {"retentionDays": 8})

    def failed() -> bool:
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "backups", "vol")
        return (obj.get("status") or {}).get("lastResult") == "Failed"

    wait("the Backup reports a failed Job", failed, timeout=420)
    status = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "backups", "vol")["status"]
    assert status["lastFailure"], status
    events = core.list_namespaced_event(
        ns, field_selector="involvedObject.name=vol,type=Warning"
    ).items
    assert any(e.reason == "BackupFailed" and status["lastJob"] in e.message for e in events), [
        (e.reason, e.message) for e in events
    ]
    patch_cr(api, ns, "Backup", "vol", {"suspend": True})
    assert f"{good_job}.dump" in _on_volume(api, ns, "list-after", "ls -1 /backups").split()
