"""Dependent watches without a cluster: digests, owner extraction, the predicate, the rules.

The event handling is driven with watch events as the API server sends them
(`_KindWatch._event` and `_list`'s sync), into a real WorkQueue.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.dependents import (
    DependentWatches,
    _KindWatch,
    object_digest,
    should_enqueue,
)
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.kube.client import Kube, ListPage, ResourceInfo, WatchEvent
from ansible_operator.kube.login import StaticLogin
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.ownership import (
    OWNER_ANNOTATION,
    OWNER_TYPE_ANNOTATION,
    OwnerLink,
    PrimaryIndex,
    Touch,
    owner_links,
)

MEMCACHED = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"))
CLUSTERS = Watch(gvk=GVK("infra.example.com", "v1", "Cluster"))
PODS = Watch(gvk=GVK("", "v1", "Pod"))
PRIMARIES = {
    "memcached-v1alpha1-controller": MEMCACHED,
    "cluster-v1-controller": CLUSTERS,
    "pod-v1-controller": PODS,
}
INDEX = PrimaryIndex.of(PRIMARIES)
MC = "memcached-v1alpha1-controller"
OWNER = Owner("cache.example.com/v1alpha1", "Memcached", "mc", "ns1", "uid-mc", MC)
CLUSTER_OWNER = Owner(
    "infra.example.com/v1", "Cluster", "c1", "", "uid-c1", "cluster-v1-controller"
)
CONFIGMAPS = ResourceInfo("", "v1", "ConfigMap", "configmaps", namespaced=True, has_status=False)


def configmap(
    *, data: str = "1", rv: str = "1", refs: Any = None, annotations: Any = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "cm",
        "namespace": "ns1",
        "uid": "uid-cm",
        "resourceVersion": rv,
    }
    if refs is not None:
        meta["ownerReferences"] = refs
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": data}}


MC_REF = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "name": "mc",
    "uid": "uid-mc",
}


# -- digests -----------------------------------------------------------------


def test_digest_ignores_status_and_bookkeeping_metadata() -> None:
    base = configmap()
    changed = copy.deepcopy(base)
    changed["status"] = {"phase": "Ready"}
    changed["metadata"]["resourceVersion"] = "99"
    changed["metadata"]["generation"] = 7
    changed["metadata"]["managedFields"] = [{"manager": "kubectl", "time": "2025-01-01T00:00:00Z"}]
    assert object_digest(changed) == object_digest(base)


def test_digest_ignores_kind_and_api_version_which_list_items_lack() -> None:
    listed = configmap()
    del listed["kind"], listed["apiVersion"]
    assert object_digest(listed) == object_digest(configmap())


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o["data"].update(k="2"),
        lambda o: o["metadata"].setdefault("labels", {}).update(a="b"),
        lambda o: o["metadata"].setdefault("annotations", {}).update(a="b"),
        lambda o: o["metadata"].update(deletionTimestamp="2025-01-01T00:00:00Z"),
        lambda o: o["metadata"].update(ownerReferences=[]),
        lambda o: o.update(spec={"replicas": 3}),
    ],
)
def test_digest_sees_real_changes(change: Any) -> None:
    changed = configmap()
    change(changed)
    assert object_digest(changed) != object_digest(configmap())


def test_predicate() -> None:
    a, b = object_digest(configmap()), object_digest(configmap(data="2"))
    assert not should_enqueue("ADDED", None, a)
    assert not should_enqueue("BOOKMARK", a, a)
    assert should_enqueue("DELETED", a, a)
    assert should_enqueue("DELETED", None, a)
    assert not should_enqueue("MODIFIED", a, a)
    assert should_enqueue("MODIFIED", a, b)
    assert should_enqueue("MODIFIED", None, a)  # newly owned: counts as a change


# -- owners on a dependent ------------------------------------------------------


def test_owner_links_from_owner_references_of_any_version() -> None:
    refs = [
        {**MC_REF, "apiVersion": "cache.example.com/v1beta9"},
        {
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "name": "mc2",
            "uid": "u2",
            "controller": True,
        },
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u3"},
        {"apiVersion": "other.example.com/v1alpha1", "kind": "Memcached", "name": "x", "uid": "u4"},
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u5"},
    ]
    assert owner_links(configmap(refs=refs), INDEX) == {
        OwnerLink(MC, True, "ns1", "mc"),
        OwnerLink(MC, True, "ns1", "mc2"),
        OwnerLink("pod-v1-controller", True, "ns1", "p"),
    }


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("other/mc", OwnerLink(MC, False, "other", "mc")),
        ("a/b/c", OwnerLink(MC, False, "a", "b/c")),  # split at the first '/'
        ("mc", OwnerLink(MC, False, "", "mc")),
        ("/c1", OwnerLink(MC, False, "", "c1")),
        ("  ", None),
        ("ns/", None),
    ],
)
def test_owner_links_from_annotations(annotation: str, expected: OwnerLink | None) -> None:
    obj = configmap(
        annotations={
            OWNER_ANNOTATION: annotation,
            OWNER_TYPE_ANNOTATION: "Memcached.cache.example.com",
        }
    )
    assert owner_links(obj, INDEX) == ({expected} if expected else set())


def test_annotations_of_another_type_or_core_kinds() -> None:
    other = configmap(
        annotations={OWNER_ANNOTATION: "ns/x", OWNER_TYPE_ANNOTATION: "Memcached.other.com"}
    )
    core = configmap(annotations={OWNER_ANNOTATION: "ns/p", OWNER_TYPE_ANNOTATION: "Pod"})
    assert owner_links(other, INDEX) == set()
    assert owner_links(core, INDEX) == {OwnerLink("pod-v1-controller", False, "ns", "p")}


# -- event handling into the queue ------------------------------------------------


@pytest.fixture
def queue() -> WorkQueue:
    return WorkQueue(total_limit=10, backoff_base=0.1, backoff_max=1.0)


def kind_watch(queue: WorkQueue, *owners_and_touches: tuple[Owner, Touch]) -> _KindWatch:
    # The Kube is never used: events are fed by hand.
    watch = _KindWatch(
        kube=Kube(StaticLogin(host="http://localhost")),
        queue=queue,
        resource=CONFIGMAPS,
        index=INDEX,
        namespaces=(),
    )
    for owner, touch in owners_and_touches:
        watch.register(owner, touch)
    return watch


def touch(*, by_owner_reference: bool = True, cluster_scoped: bool = False) -> Touch:
    return Touch(
        "", "v1", "ConfigMap", "configmaps", "ns1", "cm", cluster_scoped, by_owner_reference
    )


def drain(queue: WorkQueue) -> list[Key]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def event(kind: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(kind, obj)


def test_events_through_the_predicate(queue: WorkQueue) -> None:
    watch = kind_watch(queue, (OWNER, touch()))
    store: dict[str, Any] = {}
    key = Key(MC, "ns1", "mc")
    watch._event(event("ADDED", configmap(refs=[MC_REF])), store)
    assert drain(queue) == []
    status_only = configmap(refs=[MC_REF], rv="2")
    status_only["status"] = {"x": 1}
    watch._event(event("MODIFIED", status_only), store)
    assert drain(queue) == []
    watch._event(event("MODIFIED", configmap(refs=[MC_REF], data="2", rv="3")), store)
    assert drain(queue) == [key]
    version = watch._event(event("BOOKMARK", {"metadata": {"resourceVersion": "10"}}), store)
    assert version == "10"
    watch._event(event("DELETED", configmap(refs=[MC_REF], data="2", rv="11")), store)
    assert drain(queue) == [key]
    assert store == {}


def test_owner_removed_from_the_object_is_still_told(queue: WorkQueue) -> None:
    watch = kind_watch(queue, (OWNER, touch()))
    store: dict[str, Any] = {}
    watch._event(event("ADDED", configmap(refs=[MC_REF])), store)
    watch._event(event("MODIFIED", configmap(refs=[], rv="2")), store)
    assert drain(queue) == [Key(MC, "ns1", "mc")]
    assert store == {}  # no longer owned: not remembered


def test_unowned_objects_are_not_remembered(queue: WorkQueue) -> None:
    watch = kind_watch(queue, (OWNER, touch()))
    store: dict[str, Any] = {}
    watch._event(event("ADDED", configmap()), store)
    watch._event(event("MODIFIED", configmap(data="2")), store)
    watch._event(event("DELETED", configmap(data="2")), store)
    assert store == {}
    assert drain(queue) == []


def test_only_registered_controllers_and_modes_are_enqueued(queue: WorkQueue) -> None:
    # Memcached registered this kind by ownerReference only: its annotation
    # links and other primaries' references are ignored.
    watch = kind_watch(queue, (OWNER, touch()))
    pod_ref = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u5"}
    annotated = {
        OWNER_ANNOTATION: "other/mc9",
        OWNER_TYPE_ANNOTATION: "Memcached.cache.example.com",
    }
    store: dict[str, Any] = {}
    watch._event(event("ADDED", configmap(refs=[MC_REF, pod_ref], annotations=annotated)), store)
    watch._event(event("DELETED", configmap(refs=[MC_REF, pod_ref], annotations=annotated)), store)
    assert drain(queue) == [Key(MC, "ns1", "mc")]


def test_annotation_and_cluster_scoped_owner_keys(queue: WorkQueue) -> None:
    watch = kind_watch(queue, (OWNER, touch(by_owner_reference=False)), (CLUSTER_OWNER, touch()))
    c_ref = {"apiVersion": "infra.example.com/v1", "kind": "Cluster", "name": "c1", "uid": "uid-c1"}
    annotated = {OWNER_ANNOTATION: "other/mc", OWNER_TYPE_ANNOTATION: "Memcached.cache.example.com"}
    store: dict[str, Any] = {}
    watch._event(event("ADDED", configmap(refs=[c_ref], annotations=annotated)), store)
    watch._event(event("DELETED", configmap(refs=[c_ref], annotations=annotated)), store)
    assert sorted(drain(queue), key=str) == [
        # A cluster-scoped owner's key has no namespace.
        Key("cluster-v1-controller", "", "c1"),
        Key(MC, "other", "mc"),
    ]


# -- which touches start a watch --------------------------------------------------


def watches(primary: Watch, namespaces: tuple[str, ...] = ()) -> DependentWatches:
    return DependentWatches(
        kube=Kube(StaticLogin(host="http://localhost")),
        queue=WorkQueue(total_limit=1, backoff_base=0.1, backoff_max=1.0),
        namespaces=namespaces,
        primaries={MC: primary},
    )


@pytest.mark.parametrize(
    ("primary", "the_touch", "namespaces"),
    [
        (Watch(gvk=MEMCACHED.gvk, watch_dependent_resources=False), touch(), ()),
        (Watch(gvk=MEMCACHED.gvk, blacklist=(GVK("", "v1", "ConfigMap"),)), touch(), ()),
        # Cluster-scoped dependents of a namespaced owner need watchClusterScopedResources.
        (MEMCACHED, touch(by_owner_reference=False, cluster_scoped=True), ()),
        # A namespaced dependent outside the watched namespaces.
        (MEMCACHED, touch(), ("ns2", "ns3")),
    ],
)
def test_refused_touches_start_no_watch(
    primary: Watch, the_touch: Touch, namespaces: tuple[str, ...]
) -> None:
    dependents = watches(primary, namespaces)
    dependents.touched(OWNER, the_touch)
    assert dependents.watched() == set()
    assert not dependents.alive()


def test_unknown_controller_starts_no_watch() -> None:
    dependents = watches(MEMCACHED)
    stranger = Owner("v1", "Pod", "p", "ns1", "u", "no-such-controller")
    dependents.touched(stranger, touch())
    assert dependents.watched() == set()


class _PagedKube:
    """Answers list requests with fixed pages, as the API server pages a LIST; `queries`
    are the query parameters Kube.list_page sends for each."""

    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.queries: list[list[tuple[str, str]]] = []

    def list_page(
        self, res: ResourceInfo, *, namespace: str = "", limit: int = 0, continue_token: str = ""
    ) -> ListPage:
        token = [("continue", continue_token)] if continue_token else []
        self.queries.append([("limit", str(limit)), *token])
        page = self.pages[len(self.queries) - 1]
        meta = page.get("metadata") or {}
        return ListPage(
            items=page["items"],
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=str(meta.get("continue") or ""),
        )


def test_relist_reports_changes_and_deletes_missed_while_disconnected(queue: WorkQueue) -> None:
    kept = configmap(refs=[MC_REF])
    other_ref = {**MC_REF, "name": "mc2", "uid": "uid-mc2"}
    gone = configmap(refs=[other_ref])
    gone["metadata"].update(name="gone", uid="uid-gone")
    silent = configmap(refs=[{**MC_REF, "name": "mc3"}])
    silent["metadata"].update(name="silent", uid="uid-silent")
    watch = kind_watch(queue, (OWNER, touch()))
    store: dict[str, Any] = {}
    for obj in (kept, gone, silent):
        watch._event(event("ADDED", obj), store)
    changed = configmap(refs=[MC_REF], data="changed", rv="20")
    status_only = copy.deepcopy(silent)
    status_only["metadata"]["resourceVersion"] = "21"
    status_only["status"] = {"seen": True}
    new = configmap(refs=[{**MC_REF, "name": "mc4"}])
    new["metadata"].update(name="new", uid="uid-new")
    pages = [
        {"metadata": {"continue": "page2"}, "items": [changed]},
        {"metadata": {"resourceVersion": "30"}, "items": [status_only, new]},
    ]
    watch.kube = _PagedKube(pages)  # type: ignore[assignment]
    version = watch._list("", store, initial=False)
    assert version == "30"
    assert watch.kube.queries == [[("limit", "500")], [("limit", "500"), ("continue", "page2")]]  # type: ignore[attr-defined]
    # "changed" was modified, "gone" was deleted; "silent" changed status only
    # and "new" appeared (ADDED): neither counts.
    assert sorted(drain(queue), key=str) == [Key(MC, "ns1", "mc"), Key(MC, "ns1", "mc2")]
    assert set(store) == {"uid-cm", "uid-silent", "uid-new"}


def _nested(depth: int, leaf: str) -> dict[str, Any]:
    value: Any = leaf
    for _ in range(depth):
        value = {"a": value}
    return {"metadata": {"name": "deep", "namespace": "ns1"}, "spec": value}


def test_digest_of_an_object_deeper_than_json_recurses() -> None:
    # The API server stores objects ~10,000 levels deep; a dependent watch must
    # not stop on one (json.dumps raises RecursionError at ~1,000).
    first = object_digest(_nested(3000, "x"))
    assert first == object_digest(_nested(3000, "x"))
    assert first != object_digest(_nested(3000, "y"))
