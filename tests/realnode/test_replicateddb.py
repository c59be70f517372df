"""ReplicatedDB on the real node, through the real operator: streaming replication happens.

A primary and two replicas: the replicas start only once the primary is
ready, a row written on the primary is readable on every replica within 10
seconds, and a Backup of the ReplicatedDB (through its primary Service)
writes a dump that pg_restore can read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.harness import OperatorProcess
from tests.examples.test_examples import GROUP, VERSION, pod_ready_since, reconciled, ts
from tests.realnode.support import kubectl, psql, wait

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.realnode]

RDB = "books"
REPLICATION_DEADLINE = 10.0


def _replicated(api: Any, ns: str) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ReplicatedDB",
        "metadata": {"name": RDB},
        "spec": {"version": "15", "replicas": 2, "replicationMode": "asynchronous"},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, ns, "replicateddbs", body
    )


def _read_on_replicas(kubeconfig: Path, ns: str, replicas: list[str], sql: str, want: str) -> float:
    """Seconds until every replica returns `want` (fails after REPLICATION_DEADLINE)."""
    began = time.monotonic()
    pending = set(replicas)
    while pending and time.monotonic() - began < REPLICATION_DEADLINE:
        for pod in sorted(pending):
            out = kubectl(kubeconfig, "-n", ns, "exec", pod, "--", "psql", "-U", "postgres", "-d", "app",
                          "-tAc", sql, check=False)  # fmt: skip
            if out.strip() == want:
                pending.discard(pod)
    assert not pending, f"not replicated within {REPLICATION_DEADLINE} s: {sorted(pending)}"
    return time.monotonic() - began


def test_replicas_follow_the_primary_and_backups_dump_it(
    api_client: Any, kubeconfig_path: Path, rn_namespace: str, rn_operator: OperatorProcess
) -> None:
    ns, core = rn_namespace, client.CoreV1Api(api_client)
    _replicated(api_client, ns)
    obj = reconciled(
        api_client, ns, "ReplicatedDB", RDB, until=lambda o: o["status"].get("readyReplicas") == 2
    )
    assert obj["status"]["primaryReady"] is True
    primary = core.read_namespaced_pod(f"{RDB}-primary-0", ns)
    replicas = [core.read_namespaced_pod(f"{RDB}-replica-{i}", ns) for i in range(2)]
    assert all(ts(r.metadata.creation_timestamp) >= pod_ready_since(primary) for r in replicas)
    # Streaming, as the primary sees it.
    senders = psql(kubeconfig_path, ns, primary.metadata.name,
                   "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")  # fmt: skip
    assert senders == "2"

    psql(kubeconfig_path, ns, primary.metadata.name,
         "CREATE TABLE shelf (title text); INSERT INTO shelf VALUES ('Dune')", database="app")  # fmt: skip
    took = _read_on_replicas(
        kubeconfig_path, ns, [r.metadata.name for r in replicas], "SELECT title FROM shelf", "Dune"
    )
    print(f"replicated to both replicas in {took:.2f} s")
    for replica in replicas:
        in_recovery = psql(kubeconfig_path, ns, replica.metadata.name, "SELECT pg_is_in_recovery()")
        assert in_recovery == "t"

    _backup_of_the_primary(api_client, kubeconfig_path, ns)


def _backup_of_the_primary(api: Any, kubeconfig: Path, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_persistent_volume_claim(
        ns,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="books-dumps"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        ),
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Backup",
        "metadata": {"name": "books-nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "target": {"kind": "ReplicatedDB", "name": RDB, "database": "app"},
            "destination": {"volume": {"claimName": "books-dumps"}},
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, ns, "backups", body
    )
    reconciled(
        api,
        ns,
        "Backup",
        "books-nightly",
        until=lambda o: o["status"].get("cronJob") == "books-nightly",
    )
    kubectl(kubeconfig, "-n", ns, "create", "job", "--from=cronjob/books-nightly", "books-now")
    batch = client.BatchV1Api(api)
    wait(
        "backup of the ReplicatedDB",
        lambda: (batch.read_namespaced_job("books-now", ns).status.succeeded or 0) >= 1,
    )
    # The dump holds the table (pg_restore --list reads the archive's catalogue).
    pod = f"{RDB}-primary-0"
    listing = kubectl(kubeconfig, "-n", ns, "run", "list-dump", "--rm", "-i", "--restart=Never",
                      "--image=testbed.local/postgresql:15", "--overrides",
                      '{"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"books-dumps"}}],'
                      '"containers":[{"name":"list-dump","image":"testbed.local/postgresql:15",'
                      '"command":["pg_restore","--list","/d/books-now.dump"],'
                      '"volumeMounts":[{"name":"d","mountPath":"/d"}]}]}}')  # fmt: skip
    assert "TABLE public shelf" in listing, (pod, listing)
