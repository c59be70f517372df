"""ReplicatedDB on the real node, through the real operator: streaming replication happens.

A primary and two replicas: the replicas start only once the primary is
ready, a row written on the primary is readable on every replica within 10
seconds of its insert, and a Backup of the ReplicatedDB (through its primary Service)
writes a dump that pg_restore can read.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.harness import OperatorProcess
from tests.examples.test_examples import GROUP, VERSION, pod_ready_since, reconciled, ts
from tests.realnode.support import KUBECTL, kubectl, psql, run_pod, wait

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


# Runs in a replica before the row exists: polls until it shows and prints how
# long after its insert on the primary that was (all pods share the host's clock).
WATCH_FOR_ROW = (
    "until lag=$(psql -U postgres -d app -tAc "
    "\"SELECT extract(epoch FROM clock_timestamp() - at) FROM shelf WHERE title = 'Dune'\" "
    '2>/dev/null) && [ -n "$lag" ]; do sleep 0.1; done; echo "$lag"'
)


def _replication_lags(kubeconfig: Path, ns: str, primary: str, replicas: list[str]) -> list[float]:
    """Write a row on the primary; seconds until each replica has it."""
    watchers = [
        subprocess.Popen(
            [
                str(KUBECTL),
                f"--kubeconfig={kubeconfig}",
                "-n",
                ns,
                "exec",
                pod,
                "--",
                "sh",
                "-c",
                WATCH_FOR_ROW,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pod in replicas
    ]
    try:
        psql(kubeconfig, ns, primary,
             "CREATE TABLE shelf (title text, at timestamptz DEFAULT clock_timestamp());"
             " INSERT INTO shelf (title) VALUES ('Dune')", database="app")  # fmt: skip
        outputs = [w.communicate(timeout=120) for w in watchers]
    finally:
        for watcher in watchers:
            watcher.kill()
    return [float(out.strip().splitlines()[-1]) for out, _ in outputs]


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

    lags = _replication_lags(
        kubeconfig_path, ns, primary.metadata.name, [r.metadata.name for r in replicas]
    )
    print(f"replication lag: {lags} s")
    assert all(lag < REPLICATION_DEADLINE for lag in lags), lags
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
    # A one-shot pod read after it ended: `kubectl run --rm -i` can miss the output
    # of a container that finishes before it attaches.
    listing = run_pod(
        api, ns, "list-dump", "testbed.local/postgresql:15",
        ["pg_restore", "--list", "/d/books-now.dump"], claims={"/d": "books-dumps"},
    )  # fmt: skip
    assert "TABLE public shelf" in listing, (pod, listing)
