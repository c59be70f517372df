"""FakeKube keeps the API server's rules the reconcile path relies on, and lets tests inject.

Where a rule was checked against the testbed's kube-apiserver (a failed JSON
patch `test` is a 422, not a 409; status is dropped on create with the status
subresource), the test says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ansible_operator.controller import finalizers
from ansible_operator.errors import ApiError, Conflict, KubeUnavailable, NotFound
from ansible_operator.kube.client import JSON_PATCH, KubeApi, ResourceInfo
from ansible_operator.kube.fakekube import Call, FakeEvents, FakeKube
from ansible_operator.observability.eventrecorder import ObjectRef

RES = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Thing",
    plural="things",
    namespaced=True,
    has_status=True,
)
BARE = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Bare",
    plural="bares",
    namespaced=True,
    has_status=False,
)
CLUSTER = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Top",
    plural="tops",
    namespaced=False,
    has_status=True,
)
FIN = "g.example.com/fin"


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(RES, BARE, CLUSTER)


def make(kube: FakeKube, res: ResourceInfo = RES, **meta: Any) -> dict[str, Any]:
    body = {"metadata": {"name": "t", **meta}, "spec": {"size": 1}, "status": {"x": 1}}
    return kube.create(res, namespace="ns", body=body)


def rv(obj: dict[str, Any] | None) -> int:
    assert obj is not None
    return int(obj["metadata"]["resourceVersion"])


def test_it_fits_the_seam() -> None:
    def takes(api: KubeApi) -> KubeApi:
        return api

    assert takes(FakeKube(RES)).resource(group=RES.group, version="v1", kind="Thing") == RES


def test_create_sets_what_the_server_owns_and_drops_status_with_the_subresource(
    kube: FakeKube,
) -> None:
    made = make(kube)
    meta = made["metadata"]
    assert made["apiVersion"] == "g.example.com/v1"
    assert made["kind"] == "Thing"
    assert meta["namespace"] == "ns"
    assert meta["generation"] == 1
    assert meta["uid"]
    assert meta["creationTimestamp"].endswith("Z")
    assert "status" not in made  # as the API server does for a CRD with /status
    assert make(kube, BARE)["status"] == {"x": 1}
    assert "namespace" not in make(kube, CLUSTER)["metadata"]
    with pytest.raises(Conflict) as exists:
        make(kube)
    assert exists.value.reason == "AlreadyExists"


@pytest.mark.parametrize(
    "call",
    [
        lambda k: k.get(RES, namespace="ns", name="nope"),
        lambda k: k.replace_status(
            RES, {"metadata": {"name": "nope", "namespace": "ns", "resourceVersion": "1"}}
        ),
        lambda k: k.patch(RES, namespace="ns", name="nope", body={}),
        lambda k: k.resource(group="g.example.com", version="v1", kind="Unknown"),
        lambda k: k.get(
            ResourceInfo("other", "v1", "X", "xs", namespaced=True, has_status=False),
            namespace="ns",
            name="t",
        ),
        lambda k: k.delete(RES, namespace="ns", name="nope"),
    ],
    ids=["get", "status", "patch", "unknown kind", "unserved kind", "delete"],
)
def test_unknown_objects_and_kinds_are_not_found(
    kube: FakeKube, call: Callable[[FakeKube], Any]
) -> None:
    with pytest.raises(NotFound):
        call(kube)
    assert kube.get_or_none(RES, namespace="ns", name="nope") is None


def test_status_writes_need_the_current_version_and_touch_only_status(kube: FakeKube) -> None:
    made = make(kube)
    stale = {**made, "spec": {"size": 99}, "status": {"phase": "one"}}
    written = kube.replace_status(RES, stale)
    assert written["status"] == {"phase": "one"}
    assert written["spec"] == {"size": 1}  # spec in a status write is ignored
    assert written["metadata"]["generation"] == 1
    assert rv(written) > rv(made)
    with pytest.raises(Conflict, match="the object has been modified"):
        kube.replace_status(RES, {**made, "status": {"phase": "two"}})
    unconditional = {**written, "metadata": {"name": "t", "namespace": "ns"}}
    with pytest.raises(ApiError) as refused:
        kube.replace_status(RES, unconditional)
    assert refused.value.status == 422
    assert kube.stored(RES, namespace="ns", name="t")["status"] == {"phase": "one"}  # type: ignore[index]


def test_a_kind_without_the_status_subresource_has_no_status_endpoint(kube: FakeKube) -> None:
    made = make(kube, BARE)
    with pytest.raises(NotFound):
        kube.replace_status(BARE, made)
    with pytest.raises(NotFound):
        kube.patch(BARE, namespace="ns", name="t", body={"status": {}}, subresource="status")


# (case, merge patch, expected spec, expected generation, expected status)
MERGES = [
    ("spec change bumps generation", {"spec": {"size": 2}}, {"size": 2}, 2, {"y": 1}),
    ("label change does not", {"metadata": {"labels": {"a": "b"}}}, {"size": 1}, 1, {"y": 1}),
    ("status on the main resource is ignored", {"status": {"y": 2}}, {"size": 1}, 1, {"y": 1}),
    ("null removes a key", {"spec": {"size": None}}, {}, 2, {"y": 1}),
    (
        "server-owned fields are kept",
        {"metadata": {"uid": "mine", "generation": 7}},
        {"size": 1},
        1,
        {"y": 1},
    ),
]


@pytest.mark.parametrize(
    ("patch", "spec", "generation", "status"),
    [case[1:] for case in MERGES],
    ids=[case[0] for case in MERGES],
)
def test_merge_patches_follow_the_servers_rules(
    kube: FakeKube, patch: dict[str, Any], spec: dict[str, Any], generation: int, status: Any
) -> None:
    made = make(kube)
    kube.patch(RES, namespace="ns", name="t", body={"status": {"y": 1}}, subresource="status")
    patched = kube.patch(RES, namespace="ns", name="t", body=patch)
    assert patched["spec"] == spec
    assert patched["metadata"]["generation"] == generation
    assert patched["status"] == status
    assert patched["metadata"]["uid"] == made["metadata"]["uid"]
    assert patched == kube.stored(RES, namespace="ns", name="t")


def test_a_stale_resource_version_in_a_patch_conflicts(kube: FakeKube) -> None:
    made = make(kube)
    kube.edit(RES, namespace="ns", name="t", change=lambda o: o["spec"].update(size=5))
    with pytest.raises(Conflict):
        kube.patch(
            RES,
            namespace="ns",
            name="t",
            body={"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]}},
        )


def test_a_failed_json_patch_test_is_a_422_and_changes_nothing(kube: FakeKube) -> None:
    # kube-apiserver answers a failed `test` with 422 Unprocessable Entity, not 409.
    made = make(kube)
    kube.edit(
        RES, namespace="ns", name="t", change=lambda o: o["metadata"].update(labels={"a": "b"})
    )
    with pytest.raises(ApiError) as refused:
        finalizers.add(kube, RES, made, FIN)
    assert refused.value.status == 422
    assert not isinstance(refused.value, Conflict)
    assert not (kube.stored(RES, namespace="ns", name="t") or {})["metadata"].get("finalizers")


def test_json_patches_add_and_remove_list_items(kube: FakeKube) -> None:
    made = make(kube, finalizers=["other/keep"])
    added = finalizers.add(kube, RES, made, FIN)
    assert added["metadata"]["finalizers"] == ["other/keep", FIN]
    removed = finalizers.remove(kube, RES, added, FIN)
    assert removed["metadata"]["finalizers"] == ["other/keep"]
    for bad in (
        [{"op": "move", "from": "/spec", "path": "/x"}],
        [{"op": "remove", "path": "/spec/missing"}],
        [{"op": "add", "path": "/metadata/finalizers/9", "value": "x"}],
        {"op": "add"},
    ):
        with pytest.raises(ApiError) as refused:
            kube.patch(RES, namespace="ns", name="t", body=bad, content_type=JSON_PATCH)
        assert refused.value.status == 422


def test_deletion_waits_for_finalizers_and_none_may_be_added_meanwhile(kube: FakeKube) -> None:
    make(kube, finalizers=[FIN])
    left = kube.delete(RES, namespace="ns", name="t")
    assert left is not None
    assert left["metadata"]["deletionTimestamp"].endswith("Z")
    assert kube.delete(RES, namespace="ns", name="t") == left  # idempotent
    with pytest.raises(ApiError, match="no new finalizers"):
        finalizers.add(kube, RES, left, "late/one")
    status = kube.replace_status(RES, {**left, "status": {"bye": True}})  # still allowed
    finalizers.remove(kube, RES, status, FIN)
    assert kube.stored(RES, namespace="ns", name="t") is None


def test_delete_without_finalizers_removes_at_once(kube: FakeKube) -> None:
    make(kube)
    assert kube.delete(RES, namespace="ns", name="t") is None
    assert kube.objects(RES) == []


def test_returned_objects_are_copies(kube: FakeKube) -> None:
    made = make(kube)
    made["spec"]["size"] = 100
    got = kube.get(RES, namespace="ns", name="t")
    got["spec"]["size"] = 200
    assert kube.get(RES, namespace="ns", name="t")["spec"] == {"size": 1}


def test_injected_errors_and_actions_come_once_and_in_order(kube: FakeKube) -> None:
    made = make(kube)
    kube.fail_next("get", KubeUnavailable("HTTP 503: etcd is slow"), times=2)
    seen: list[int] = []
    kube.before_next(
        "replace_status", lambda k: seen.append(rv(k.stored(RES, namespace="ns", name="t")))
    )
    kube.before_next(
        "replace_status",
        lambda k: k.edit(
            RES,
            namespace="ns",
            name="t",
            change=lambda o: o.update(status={"z": 1}),
            subresource="status",
        ),
    )
    for _ in range(2):
        with pytest.raises(KubeUnavailable):
            kube.get(RES, namespace="ns", name="t")
    assert kube.get(RES, namespace="ns", name="t")["metadata"]["uid"] == made["metadata"]["uid"]
    first = kube.replace_status(RES, {**made, "status": {"a": 1}})
    assert seen == [rv(made)]
    with pytest.raises(Conflict):  # the second action made `first` stale
        kube.replace_status(RES, {**first, "status": {"b": 1}})
    assert kube.stored(RES, namespace="ns", name="t")["status"] == {"z": 1}  # type: ignore[index]
    assert [c.verb for c in kube.calls] == [
        "create",
        "get",
        "get",
        "get",
        "replace_status",
        "replace_status",
    ]
    assert kube.calls[-1] == Call("replace_status", "Thing", "ns", "t", "status")


def test_fake_events_keep_every_event_in_order() -> None:
    events = FakeEvents()
    ref = ObjectRef(api_version="g.example.com/v1", kind="Thing", namespace="ns", name="t")
    events.record(ref, type="Normal", reason="Running", message="Running role r")
    events.record(ref, type="Warning", reason="Failed", message="boom")
    assert events.reasons() == [("Normal", "Running"), ("Warning", "Failed")]
    assert events.events[1].ref == ref
    assert events.events[1].message == "boom"
