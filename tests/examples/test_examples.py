"""End to end: the example operator project (watches.yaml, roles/, playbooks/, crds/).

One operator process runs from the repository root with the top-level
watches.yaml, watching one namespace of its own. The tests run in three
phases, in file order, each acting on every kind at once so that the Ansible
runs of the five kinds overlap: the samples of config/samples are created
(`samples`) and their objects and status checked; one update per kind is
applied (`updated`) and checked; every CR is deleted (`deleted`) and what goes
or stays checked.

The `*_delete_remove*` tests rely on the operator adding ownerReferences to
what the roles create (its API proxy does), so that Kubernetes garbage
collection removes those objects with the CR: the roles never set
ownerReferences. The final-snapshot test relies on the finalizer only.

Kubernetes here runs no containers (kwok marks pods Running and Ready and
makes Job pods succeed), so these tests check what the roles ask Kubernetes
for, not PostgreSQL itself.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from testbed.probes import wait_until
from tests.e2e.harness import OperatorProcess, apply_crds, free_port

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "examples.ansible-operator.dev", "v1alpha1"
SAMPLES = ROOT / "config" / "samples"
# Reconciles of several kinds share two CPUs here; be generous.
TIMEOUT = 240
# Garbage collection after a CR is gone normally takes a second or two.
GC_TIMEOUT = 30

PLURALS = {
    "Memcached": "memcacheds",
    "WebServer": "webservers",
    "SampleDB": "sampledbs",
    "ReplicatedDB": "replicateddbs",
    "Backup": "backups",
}


# -- helpers --------------------------------------------------------------------------


def custom(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def get_cr(api: Any, ns: str, kind: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(
            custom(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)
        )
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def patch_cr(api: Any, ns: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    custom(api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURALS[kind], name, {"spec": spec}
    )


def delete_cr(api: Any, ns: str, kind: str, name: str) -> None:
    custom(api).delete_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name)


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return {}


def reconciled(
    api: Any,
    ns: str,
    kind: str,
    name: str,
    until: Callable[[dict[str, Any]], bool] = lambda obj: True,
) -> dict[str, Any]:
    """The CR once a run has succeeded and `until(CR)` holds.

    The operator sets Successful to False when a run starts and to True when
    it ends, after the role wrote its status: so `until` should test status
    fields that only a run which saw the change can write. (A completion time
    later than the change is not enough: a run that started before it, for
    example one triggered by a dependent object, may finish after it.)
    """
    found: dict[str, Any] = {}

    def check() -> bool:
        obj = get_cr(api, ns, kind, name)
        if obj is None or condition(obj, "Successful").get("status") != "True":
            return False
        if not until(obj):
            return False
        found.update(obj)
        return True

    try:
        wait_until(f"{kind}/{name} reconciled", check, timeout=TIMEOUT)
    except Exception as err:
        obj = get_cr(api, ns, kind, name)
        raise AssertionError(
            f"{kind}/{name} not reconciled; status: {(obj or {}).get('status')}"
        ) from err
    return found


def wait_for(what: str, check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    wait_until(what, check, timeout=timeout)


def gone(read: Callable[[], Any]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            read()
        except client.ApiException as err:
            if err.status == 404:
                return True
            raise
        return False

    return check


def ts(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def pod_ready_since(pod: Any) -> datetime.datetime:
    ready = [c for c in pod.status.conditions or [] if c.type == "Ready" and c.status == "True"]
    assert ready, f"pod {pod.metadata.name} is not ready"
    return ts(ready[0].last_transition_time)


def core(api: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def apps(api: Any) -> client.AppsV1Api:
    return client.AppsV1Api(api)


def batch(api: Any) -> client.BatchV1Api:
    return client.BatchV1Api(api)


def env_of(container: Any) -> dict[str, Any]:
    return {e.name: e.value if e.value is not None else e.value_from for e in container.env or []}


def _assert_secret_never_logged(api: Any, ns: str, secret: str, operator: OperatorProcess) -> None:
    """The generated credentials appear neither in the operator's log nor in Ansible's artifacts."""
    data = core(api).read_namespaced_secret(secret, ns).data or {}
    values = [
        base64.b64decode(data[k]).decode()
        for k in ("password", "postgres-password", "replication-password")
        if k in data
    ]
    assert values
    assert all(len(v) == 32 for v in values)
    # Runs of other samples may still be going and remove their own TMPDIRs,
    # module payloads and old artifacts meanwhile: os.walk skips a directory
    # that vanishes (Path.rglob raises), and a file that is gone leaks nothing.
    texts = [operator.log_path]
    texts += [Path(top, f) for top, _, files in os.walk(operator.runner_dir) for f in files]
    for path in texts:
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                continue  # the warm servers' sockets: nothing stored in them
            content = path.read_text(errors="replace")
        except FileNotFoundError:
            continue
        for value in values:
            assert value not in content, f"a generated credential appears in {path}"


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_crds(api_client: Any) -> list[str]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    return apply_crds(api_client, docs, what="example")


@pytest.fixture(scope="module")
def ns(api_client: Any, example_crds: list[str]) -> Iterator[str]:
    name = f"t-examples-{uuid.uuid4().hex[:6]}"
    core(api_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    # The operator is stopped by now: drop SampleDB finalizers it can no longer
    # run, or the namespace would stay Terminating.
    for item in custom(api_client).list_namespaced_custom_object(GROUP, VERSION, name, "sampledbs")[
        "items"
    ]:
        if item["metadata"].get("finalizers"):
            custom(api_client).patch_namespaced_custom_object(
                GROUP,
                VERSION,
                name,
                "sampledbs",
                item["metadata"]["name"],
                {"metadata": {"finalizers": None}},
            )
    core(api_client).delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def volumes(api_client: Any, ns: str) -> Iterator[None]:
    """PersistentVolumes for the SampleDB sample's claims, when nothing provisions them.

    The testbed has no storage provisioner: a claim would stay Pending and the
    database pod unschedulable. Each PV is pre-bound to its claim by claimRef.
    Clusters with a default StorageClass (kind, real ones) need none of this.
    """
    classes = client.StorageV1Api(api_client).list_storage_class().items
    if any(
        (c.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
        for c in classes
    ):
        yield
        return
    created = []
    for claim in ("sampledb-sample-data", "sampledb-sample-backups"):
        pv = client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(
                name=f"{ns}-{claim}", labels={"examples.ansible-operator.dev/test": ns}
            ),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "10Gi"},
                access_modes=["ReadWriteOnce"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                host_path=client.V1HostPathVolumeSource(path=f"/tmp/{ns}/{claim}"),
                claim_ref=client.V1ObjectReference(namespace=ns, name=claim),
            ),
        )
        core(api_client).create_persistent_volume(pv)
        created.append(pv.metadata.name)
    yield
    for name in created:
        try:
            core(api_client).delete_persistent_volume(name)
        except client.ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture(scope="module")
def operator(
    kubeconfig_path: Path, ns: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    env = {"WATCH_NAMESPACE": ns}
    collections = ROOT / "collections"
    if collections.is_dir():  # operator_sdk.util, for k8s_status
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    proc = OperatorProcess(
        kubeconfig=kubeconfig_path,
        workdir=tmp_path_factory.mktemp("examples"),
        env=env,
        args=[f"--proxy-port={free_port()}"],
        name="examples",
        cwd=ROOT,
    ).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def samples(api_client: Any, ns: str, volumes: None, operator: OperatorProcess) -> dict[str, Any]:
    """Every sample CR, created together."""
    created = {}
    for path in sorted(SAMPLES.glob("examples_*.yaml")):
        body = yaml.safe_load(path.read_text())
        kind = body["kind"]
        created[kind] = custom(api_client).create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURALS[kind], body
        )
    assert set(created) == set(PLURALS)
    return created


MC, WS, DB, RDB, BK = (
    "memcached-sample",
    "webserver-sample",
    "sampledb-sample",
    "replicateddb-sample",
    "backup-sample",
)
MANUAL_BACKUP = f"{DB}-backup-manual"

# What each kind's status says once a run has seen the update of `updated`.
UPDATED: dict[str, Callable[[dict[str, Any]], bool]] = {
    "Memcached": lambda obj: obj["status"].get("readyReplicas") == 1,
    "WebServer": lambda obj: obj["status"].get("count") == 1,
    "ReplicatedDB": lambda obj: obj["status"].get("replicationMode") == "synchronous",
    "Backup": lambda obj: obj["status"].get("schedule") == "15 2 * * *",
    "SampleDB": lambda obj: obj["status"].get("restoredFrom") == MANUAL_BACKUP,
}


@pytest.fixture(scope="module")
def updated(api_client: Any, ns: str, samples: dict[str, Any]) -> None:
    """One update per kind, all sent together."""
    # SampleDB restores a backup: take one now with the scheduled CronJob's template.
    # As `kubectl create job --from=cronjob/...` does, the Job is owned by the
    # CronJob, so it goes with it (its pod would otherwise keep the claim).
    cronjob = batch(api_client).read_namespaced_cron_job(f"{DB}-backup", ns)
    template = cronjob.spec.job_template
    owner = client.V1OwnerReference(
        api_version="batch/v1", kind="CronJob", name=cronjob.metadata.name, uid=cronjob.metadata.uid
    )
    batch(api_client).create_namespaced_job(
        ns,
        client.V1Job(
            metadata=client.V1ObjectMeta(
                name=MANUAL_BACKUP, labels=template.metadata.labels, owner_references=[owner]
            ),
            spec=template.spec,
        ),
    )
    wait_for(
        "backup Job complete",
        lambda: (
            (batch(api_client).read_namespaced_job(MANUAL_BACKUP, ns).status.succeeded or 0) >= 1
        ),
    )
    patch_cr(api_client, ns, "Memcached", MC, {"size": 1})
    patch_cr(api_client, ns, "WebServer", WS, {"replicas": 1})
    patch_cr(api_client, ns, "ReplicatedDB", RDB, {"replicas": 1, "replicationMode": "synchronous"})
    patch_cr(api_client, ns, "Backup", BK, {"schedule": "15 2 * * *", "retentionDays": 30})
    patch_cr(api_client, ns, "SampleDB", DB, {"version": "17", "restore": {"from": MANUAL_BACKUP}})


@pytest.fixture(scope="module")
def deleted(api_client: Any, ns: str, updated: None) -> Iterator[str]:
    """Every sample CR deleted together, once the updates have been reconciled.

    Yields the name of the SampleDB's backup PersistentVolume, which the
    finalizer keeps (reclaim policy Retain), and deletes it afterwards.
    """
    for kind, name in (("ReplicatedDB", RDB), ("Backup", BK), ("SampleDB", DB)):
        reconciled(api_client, ns, kind, name, until=UPDATED[kind])
    claim = core(api_client).read_namespaced_persistent_volume_claim(f"{DB}-backups", ns)
    for kind, name in (
        ("Memcached", MC),
        ("WebServer", WS),
        ("ReplicatedDB", RDB),
        ("Backup", BK),
        ("SampleDB", DB),
    ):
        delete_cr(api_client, ns, kind, name)
    yield claim.spec.volume_name
    try:
        core(api_client).delete_persistent_volume(claim.spec.volume_name)
    except client.ApiException as err:
        if err.status != 404:
            raise


def _webserver_pods(api: Any, ns: str) -> list[Any]:
    pods = (
        core(api)
        .list_namespaced_pod(ns, label_selector=f"examples.ansible-operator.dev/webserver={WS}")
        .items
    )
    return sorted(
        (p for p in pods if not p.metadata.deletion_timestamp),
        key=lambda p: int(p.metadata.name.rsplit("-", 1)[1]),
    )


def _wait_gone(api: Any, ns: str, kind: str, name: str) -> None:
    wait_for(f"{kind}/{name} gone", lambda: get_cr(api, ns, kind, name) is None)


# == phase 1: the samples ===============================================================


def test_memcached_sample_runs_a_deployment_and_lists_its_pods(
    api_client: Any, ns: str, samples: dict[str, Any]
) -> None:
    obj = reconciled(api_client, ns, "Memcached", MC)
    deployment = apps(api_client).read_namespaced_deployment(f"{MC}-memcached", ns)
    assert deployment.spec.replicas == 3
    assert deployment.spec.template.spec.containers[0].image.startswith(
        "docker.io/library/memcached:"
    )
    pods = (
        core(api_client)
        .list_namespaced_pod(
            ns, label_selector=f"app.kubernetes.io/name=memcached,app.kubernetes.io/instance={MC}"
        )
        .items
    )
    assert obj["status"]["nodes"] == sorted(p.metadata.name for p in pods)
    assert len(obj["status"]["nodes"]) == 3
    assert obj["status"]["readyReplicas"] == 3


def test_webserver_sample_creates_named_pods_one_at_a_time(
    api_client: Any, ns: str, samples: dict[str, Any]
) -> None:
    obj = reconciled(api_client, ns, "WebServer", WS)
    pods = _webserver_pods(api_client, ns)
    assert [p.metadata.name for p in pods] == [f"{WS}-0", f"{WS}-1", f"{WS}-2"]
    assert all(p.status.phase == "Running" for p in pods)
    # bare pods: no Deployment, ReplicaSet or StatefulSet behind them
    assert not [
        ref
        for p in pods
        for ref in p.metadata.owner_references or []
        if ref.kind in ("ReplicaSet", "StatefulSet", "Deployment")
    ]
    # one at a time: each pod was created once the previous one was ready
    for previous, following in itertools.pairwise(pods):
        assert ts(following.metadata.creation_timestamp) >= pod_ready_since(previous)
    assert obj["status"]["count"] == 3
    assert obj["status"]["pods"] == [p.metadata.name for p in pods]


def test_replicateddb_sample_starts_replicas_after_the_primary(
    api_client: Any, ns: str, samples: dict[str, Any], operator: OperatorProcess
) -> None:
    obj = reconciled(api_client, ns, "ReplicatedDB", RDB)
    primary = apps(api_client).read_namespaced_stateful_set(f"{RDB}-primary", ns)
    replica = apps(api_client).read_namespaced_stateful_set(f"{RDB}-replica", ns)
    assert primary.spec.replicas == 1
    assert replica.spec.replicas == 2
    assert replica.status.ready_replicas == 2
    # the replicas were only created once the primary was ready
    primary_pod = core(api_client).read_namespaced_pod(f"{RDB}-primary-0", ns)
    assert ts(replica.metadata.creation_timestamp) >= pod_ready_since(primary_pod)
    # replication settings: arguments of the primary, environment of the replicas
    args = primary.spec.template.spec.containers[0].args
    assert "wal_level=replica" in args
    assert not [a for a in args if a.startswith("synchronous_standby_names")]
    env = env_of(replica.spec.template.spec.containers[0])
    assert env["PRIMARY_HOST"] == f"{RDB}-primary"
    assert env["REPLICATION_MODE"] == "asynchronous"
    assert env["REPLICATION_PASSWORD"].secret_key_ref.name == f"{RDB}-credentials"
    assert [c.name for c in replica.spec.template.spec.init_containers] == ["clone-primary"]
    for svc, component in ((f"{RDB}-primary", "primary"), (f"{RDB}-replicas", "replica")):
        selector = core(api_client).read_namespaced_service(svc, ns).spec.selector
        assert selector["app.kubernetes.io/component"] == component
    assert obj["status"]["primaryReady"] is True
    assert obj["status"]["readyReplicas"] == 2
    assert obj["status"]["primaryService"] == f"{RDB}-primary"
    assert obj["status"]["replicaService"] == f"{RDB}-replicas"
    _assert_secret_never_logged(api_client, ns, f"{RDB}-credentials", operator)


def test_backup_sample_schedules_a_cronjob(
    api_client: Any, ns: str, samples: dict[str, Any]
) -> None:
    obj = reconciled(api_client, ns, "Backup", BK)
    cronjob = batch(api_client).read_namespaced_cron_job(BK, ns)
    assert cronjob.spec.schedule == "0 */6 * * *"
    assert cronjob.spec.suspend is False
    pod = cronjob.spec.job_template.spec.template.spec
    env = env_of(pod.containers[0])
    assert env["RETENTION_DAYS"] == "14"
    assert env["PGHOST"] == DB
    assert env["PGDATABASE"] == "app"
    assert env["PGPASSWORD"].secret_key_ref.name == f"{DB}-credentials"
    assert pod.containers[0].image == "docker.io/library/postgres:15"
    assert pod.volumes[0].persistent_volume_claim.claim_name == f"{DB}-backups"
    assert obj["status"]["cronJob"] == BK
    assert obj["status"]["schedule"] == "0 */6 * * *"
    assert obj["status"]["targetHost"] == DB


def test_sampledb_sample_creates_the_database_objects(
    api_client: Any, ns: str, samples: dict[str, Any], operator: OperatorProcess
) -> None:
    obj = reconciled(api_client, ns, "SampleDB", DB)
    secret = core(api_client).read_namespaced_secret(f"{DB}-credentials", ns)
    assert set(secret.data) >= {"postgres-password", "username", "password", "database"}
    for claim in (f"{DB}-data", f"{DB}-backups"):
        # The data claim is bound before the role's pod wait ends; nothing
        # waits on the backups claim, which the controller-manager binds soon.
        wait_for(
            f"{claim} Bound",
            lambda claim=claim: (
                core(api_client).read_namespaced_persistent_volume_claim(claim, ns).status.phase
                == "Bound"
            ),
        )
    sts = apps(api_client).read_namespaced_stateful_set(DB, ns)
    assert sts.metadata.labels["examples.ansible-operator.dev/postgres-version"] == "15"
    container = sts.spec.template.spec.containers[0]
    assert container.image == "docker.io/library/postgres:15"
    assert env_of(container)["POSTGRES_PASSWORD"].secret_key_ref.name == f"{DB}-credentials"
    assert sts.status.ready_replicas == 1
    assert core(api_client).read_namespaced_service(DB, ns).spec.ports[0].port == 5432
    assert batch(api_client).read_namespaced_job(f"{DB}-init", ns).status.succeeded == 1
    cronjob = batch(api_client).read_namespaced_cron_job(f"{DB}-backup", ns)
    assert cronjob.spec.schedule == "0 3 * * *"
    assert cronjob.spec.successful_jobs_history_limit == 7
    assert obj["metadata"]["finalizers"] == ["examples.ansible-operator.dev/final-snapshot"]
    status = obj["status"]
    assert status["version"] == "15"
    assert status["phase"] == "Ready"
    assert status["credentialsSecret"] == f"{DB}-credentials"
    assert status["service"] == DB
    assert status["backupVolume"] == f"{DB}-backups"
    assert status["backups"] == []
    assert "restoredFrom" not in status
    _assert_secret_never_logged(api_client, ns, f"{DB}-credentials", operator)


# == phase 2: one update per kind =======================================================


def test_memcached_size_change_scales_the_deployment(
    api_client: Any, ns: str, updated: None
) -> None:
    obj = reconciled(api_client, ns, "Memcached", MC, until=UPDATED["Memcached"])
    assert apps(api_client).read_namespaced_deployment(f"{MC}-memcached", ns).spec.replicas == 1
    assert len(obj["status"]["nodes"]) == 1
    assert obj["status"]["readyReplicas"] == 1


def test_webserver_replicas_change_deletes_the_highest_ordinals(
    api_client: Any, ns: str, updated: None
) -> None:
    obj = reconciled(api_client, ns, "WebServer", WS, until=UPDATED["WebServer"])
    assert [p.metadata.name for p in _webserver_pods(api_client, ns)] == [f"{WS}-0"]
    assert obj["status"]["count"] == 1
    assert obj["status"]["pods"] == [f"{WS}-0"]


def test_replicateddb_update_scales_replicas_and_switches_to_synchronous(
    api_client: Any, ns: str, updated: None
) -> None:
    obj = reconciled(api_client, ns, "ReplicatedDB", RDB, until=UPDATED["ReplicatedDB"])
    replica = apps(api_client).read_namespaced_stateful_set(f"{RDB}-replica", ns)
    assert replica.spec.replicas == 1
    assert env_of(replica.spec.template.spec.containers[0])["REPLICATION_MODE"] == "synchronous"
    primary = apps(api_client).read_namespaced_stateful_set(f"{RDB}-primary", ns)
    assert "synchronous_standby_names=ANY 1 (*)" in primary.spec.template.spec.containers[0].args
    assert obj["status"]["readyReplicas"] == 1
    assert obj["status"]["replicationMode"] == "synchronous"


def test_backup_schedule_and_retention_changes_update_the_cronjob(
    api_client: Any, ns: str, updated: None
) -> None:
    obj = reconciled(api_client, ns, "Backup", BK, until=UPDATED["Backup"])
    cronjob = batch(api_client).read_namespaced_cron_job(BK, ns)
    assert cronjob.spec.schedule == "15 2 * * *"
    env = env_of(cronjob.spec.job_template.spec.template.spec.containers[0])
    assert env["RETENTION_DAYS"] == "30"
    assert obj["status"]["schedule"] == "15 2 * * *"


def test_sampledb_version_change_upgrades_then_restores(
    api_client: Any, ns: str, updated: None
) -> None:
    obj = reconciled(api_client, ns, "SampleDB", DB, until=UPDATED["SampleDB"])
    upgrade = batch(api_client).read_namespaced_job(f"{DB}-upgrade-15-to-17", ns)
    assert upgrade.status.succeeded == 1
    assert upgrade.spec.template.spec.containers[0].image.endswith(":15-to-17")
    sts = apps(api_client).read_namespaced_stateful_set(DB, ns)
    assert sts.spec.template.spec.containers[0].image == "docker.io/library/postgres:17"
    assert sts.metadata.labels["examples.ansible-operator.dev/postgres-version"] == "17"
    # the StatefulSet rolled only after the upgrade Job had finished
    pod = core(api_client).read_namespaced_pod(f"{DB}-0", ns)
    assert ts(pod.metadata.creation_timestamp) >= ts(upgrade.status.completion_time)
    restores = [
        job
        for job in batch(api_client)
        .list_namespaced_job(ns, label_selector="app.kubernetes.io/component=restore")
        .items
        if (job.metadata.annotations or {}).get("examples.ansible-operator.dev/restore-from")
        == MANUAL_BACKUP
    ]
    assert len(restores) == 1
    assert restores[0].status.succeeded == 1
    assert env_of(restores[0].spec.template.spec.containers[0])["FROM"] == MANUAL_BACKUP
    status = obj["status"]
    assert status["version"] == "17"
    assert status["phase"] == "Ready"
    assert status["restoredFrom"] == MANUAL_BACKUP
    assert status["backups"] == [MANUAL_BACKUP]
    # the version never goes down
    with pytest.raises(client.ApiException) as refused:
        patch_cr(api_client, ns, "SampleDB", DB, {"version": "16"})
    assert "downgrades are not supported" in refused.value.body


# == phase 3: deletion (garbage collection of what the operator owns) ===================


def test_memcached_delete_removes_the_deployment(api_client: Any, ns: str, deleted: str) -> None:
    _wait_gone(api_client, ns, "Memcached", MC)
    wait_for(
        "Deployment garbage-collected",
        gone(lambda: apps(api_client).read_namespaced_deployment(f"{MC}-memcached", ns)),
        timeout=GC_TIMEOUT,
    )


def test_webserver_delete_removes_its_pods(api_client: Any, ns: str, deleted: str) -> None:
    _wait_gone(api_client, ns, "WebServer", WS)
    wait_for(
        "pods garbage-collected", lambda: not _webserver_pods(api_client, ns), timeout=GC_TIMEOUT
    )


def test_replicateddb_delete_removes_statefulsets_and_services(
    api_client: Any, ns: str, deleted: str
) -> None:
    _wait_gone(api_client, ns, "ReplicatedDB", RDB)
    for name in (f"{RDB}-primary", f"{RDB}-replica"):
        wait_for(
            f"StatefulSet {name} garbage-collected",
            gone(lambda n=name: apps(api_client).read_namespaced_stateful_set(n, ns)),
            timeout=GC_TIMEOUT,
        )
    for name in (f"{RDB}-primary", f"{RDB}-replicas"):
        wait_for(
            f"Service {name} garbage-collected",
            gone(lambda n=name: core(api_client).read_namespaced_service(n, ns)),
            timeout=GC_TIMEOUT,
        )


def test_backup_delete_removes_the_cronjob(api_client: Any, ns: str, deleted: str) -> None:
    _wait_gone(api_client, ns, "Backup", BK)
    wait_for(
        "CronJob garbage-collected",
        gone(lambda: batch(api_client).read_namespaced_cron_job(BK, ns)),
        timeout=GC_TIMEOUT,
    )


def test_sampledb_delete_takes_a_final_snapshot_and_keeps_the_backup_volume(
    api_client: Any, ns: str, deleted: str
) -> None:
    _wait_gone(api_client, ns, "SampleDB", DB)
    # the finalizer ran a snapshot Job, then kept the backup volume's PV
    pv = core(api_client).read_persistent_volume(deleted)
    snapshot = (pv.metadata.annotations or {}).get("examples.ansible-operator.dev/final-snapshot")
    assert snapshot is not None
    assert snapshot.startswith(f"{DB}-final-")
    assert pv.spec.persistent_volume_reclaim_policy == "Retain"
    job = batch(api_client).list_namespaced_job(
        ns, label_selector="app.kubernetes.io/component=final-snapshot"
    )
    # (the Job itself may already be garbage-collected with the SampleDB)
    assert all(j.metadata.name == snapshot for j in job.items)


def test_sampledb_delete_removes_the_owned_objects(api_client: Any, ns: str, deleted: str) -> None:
    _wait_gone(api_client, ns, "SampleDB", DB)
    reads: dict[str, Callable[[], Any]] = {
        "StatefulSet": lambda: apps(api_client).read_namespaced_stateful_set(DB, ns),
        "Service": lambda: core(api_client).read_namespaced_service(DB, ns),
        "Secret": lambda: core(api_client).read_namespaced_secret(f"{DB}-credentials", ns),
        "CronJob": lambda: batch(api_client).read_namespaced_cron_job(f"{DB}-backup", ns),
        "init Job": lambda: batch(api_client).read_namespaced_job(f"{DB}-init", ns),
        "data claim": lambda: core(api_client).read_namespaced_persistent_volume_claim(
            f"{DB}-data", ns
        ),
        "backup claim": lambda: core(api_client).read_namespaced_persistent_volume_claim(
            f"{DB}-backups", ns
        ),
    }
    for what, read in reads.items():
        wait_for(f"{what} garbage-collected", gone(read), timeout=GC_TIMEOUT)
