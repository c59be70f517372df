"""Dependent watches against the real API server, fed by the proxy's touches.

Objects are written through an ApiProxy whose on_touch is
`DependentWatches.touched`; changes are then made with the admin client (as
a user or another controller would), and a real WorkQueue shows what was
enqueued.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.dependents import DependentWatches
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.kube.client import Kube
from ansible_operator.proxy import Owner
from tests.proxy.conftest import OwnerKinds, Running

pytestmark = pytest.mark.cluster

Start = Callable[..., Running]


def drain(queue: WorkQueue, *, quiet: float = 3.0) -> list[Key]:
    """Everything enqueued until nothing more comes for `quiet` seconds."""
    keys = []
    while (key := queue.get(timeout=quiet)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def next_key(queue: WorkQueue, timeout: float = 15.0) -> Key | None:
    key = queue.get(timeout=timeout)
    if key is not None:
        queue.done(key)
    return key


@pytest.fixture
def queue() -> WorkQueue:
    return WorkQueue(total_limit=10, backoff_base=0.1, backoff_max=1.0)


@pytest.fixture
def make_dependents(
    kube: Kube, queue: WorkQueue, owner_kinds: OwnerKinds
) -> Iterator[Callable[..., DependentWatches]]:
    made: list[DependentWatches] = []

    def make(*, namespaces: tuple[str, ...] = (), **options: object) -> DependentWatches:
        primaries = {
            owner_kinds.controller: Watch(
                gvk=GVK(owner_kinds.group, owner_kinds.version, owner_kinds.kind), **options
            ),  # type: ignore[arg-type]
            owner_kinds.cluster_controller: Watch(
                gvk=GVK(owner_kinds.group, owner_kinds.version, owner_kinds.cluster_kind)
            ),
        }
        dependents = DependentWatches(
            kube=kube, queue=queue, namespaces=namespaces, primaries=primaries
        )
        made.append(dependents)
        return dependents

    yield make
    for dependents in made:
        dependents.stop()


@pytest.fixture
def other_namespace(api_client: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(api_client)
    name = f"t-deps-other-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def deployment(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/c:1"}]},
            },
        },
    }


def test_changes_and_deletes_enqueue_the_owner_status_changes_do_not(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    make_dependents: Callable[..., DependentWatches],
    queue: WorkQueue,
    api_client: client.ApiClient,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    # Per-namespace streams: the operator watches these two namespaces only.
    dependents = make_dependents(namespaces=(namespace, other_namespace))
    running = start_proxy(on_touch=dependents.touched)
    owner = make_owner(namespace, "owner")
    run_api = running.client_for(owner, tmp_path / "kc")
    client.CoreV1Api(run_api).create_namespaced_config_map(
        namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    client.AppsV1Api(run_api).create_namespaced_deployment(namespace, deployment("web"))
    assert dependents.watched() == {GVK("", "v1", "ConfigMap"), GVK("apps", "v1", "Deployment")}
    assert dependents.synced(30)
    drain(queue)  # the deployment controller's own first writes settle
    key = Key(owner.controller, namespace, "owner")
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)

    core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}})
    assert next_key(queue) == key

    apps.patch_namespaced_deployment_status(
        "web", namespace, {"status": {"observedGeneration": 12345}}
    )
    assert drain(queue, quiet=5) == []

    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 2}})
    assert next_key(queue) == key
    drain(queue)

    core.delete_namespaced_config_map("cm", namespace)
    assert next_key(queue) == key


def test_annotated_and_cluster_owned_dependents(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    make_dependents: Callable[..., DependentWatches],
    queue: WorkQueue,
    api_client: client.ApiClient,
    namespace: str,
    other_namespace: str,
    tmp_path: Path,
) -> None:
    dependents = make_dependents()
    running = start_proxy(on_touch=dependents.touched)
    owner = make_owner(namespace, "owner")
    cluster_owner = make_owner("", f"cluster-{uuid.uuid4().hex[:6]}")
    # Another namespace: owned through the annotations.
    client.CoreV1Api(running.client_for(owner, tmp_path / "kc1")).create_namespaced_config_map(
        other_namespace, {"metadata": {"name": "elsewhere"}, "data": {"a": "1"}}
    )
    # A cluster-scoped owner: its key has no namespace.
    client.CoreV1Api(
        running.client_for(cluster_owner, tmp_path / "kc2")
    ).create_namespaced_config_map(
        namespace, {"metadata": {"name": "of-cluster"}, "data": {"a": "1"}}
    )
    assert dependents.synced(30)
    drain(queue, quiet=2)
    core = client.CoreV1Api(api_client)
    core.patch_namespaced_config_map("elsewhere", other_namespace, {"data": {"a": "2"}})
    assert next_key(queue) == Key(owner.controller, namespace, "owner")
    core.patch_namespaced_config_map("of-cluster", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert next_key(queue) == Key(cluster_owner.controller, "", cluster_owner.name)


@pytest.mark.parametrize(
    "options",
    [
        {"watch_dependent_resources": False},
        {"blacklist": (GVK("", "v1", "ConfigMap"),)},
    ],
    ids=["watchDependentResources-false", "blacklisted"],
)
def test_kinds_not_to_watch_are_never_watched(
    options: dict[str, object],
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    make_dependents: Callable[..., DependentWatches],
    queue: WorkQueue,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    dependents = make_dependents(**options)
    running = start_proxy(on_touch=dependents.touched)
    owner = make_owner(namespace, "owner")
    client.CoreV1Api(running.client_for(owner, tmp_path / "kc")).create_namespaced_config_map(
        namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    )
    assert running.touches  # the proxy did report the write
    assert dependents.watched() == set()
    assert not dependents.alive()
    client.CoreV1Api(api_client).patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}})
    assert drain(queue, quiet=4) == []


def test_stop_ends_the_watch_threads(
    start_proxy: Start,
    make_owner: Callable[..., Owner],
    make_dependents: Callable[..., DependentWatches],
    namespace: str,
    tmp_path: Path,
) -> None:
    dependents = make_dependents()
    running = start_proxy(on_touch=dependents.touched)
    owner = make_owner(namespace, "owner")
    client.CoreV1Api(running.client_for(owner, tmp_path / "kc")).create_namespaced_config_map(
        namespace, {"metadata": {"name": "cm"}}
    )
    assert dependents.synced(30)
    assert dependents.alive()
    started = time.monotonic()
    dependents.stop()
    assert not dependents.alive()
    assert time.monotonic() - started < 5
    # Touches after stop() start nothing.
    client.CoreV1Api(running.client_for(owner, tmp_path / "kc2")).create_namespaced_secret(
        namespace, {"metadata": {"name": "s"}}
    )
    assert GVK("", "v1", "Secret") not in dependents.watched()
