"""FakeKube's replace, delete, paged lists with label selectors, and watches (kube.fakewatch).

The rules are the API server's as the operator relies on them: a watch from
a list's resourceVersion sees exactly the writes after it, a version older
than what the server keeps is 410 Gone, and a conditional replace conflicts
when the object changed since it was read.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.errors import ApiError, Conflict, KubeUnavailable, NotFound
from ansible_operator.kube.fakekube import Call, FakeKube
from ansible_operator.kube.fakewatch import selector_matches
from ansible_operator.kube.kubeapi import ResourceInfo, WatchEvent, is_gone

LEASES = ResourceInfo("coordination.k8s.io", "v1", "Lease", "leases", True, False)
CMS = ResourceInfo("", "v1", "ConfigMap", "configmaps", True, False)


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(LEASES, CMS)


def lease(kube: FakeKube, name: str, *, namespace: str = "ns", **labels: str) -> dict[str, Any]:
    body = {"metadata": {"name": name, "labels": labels}, "spec": {"holderIdentity": name}}
    return kube.create(LEASES, namespace=namespace, body=body)


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["metadata"]["name"] for item in items]


def kinds(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"].get("name", "")) for e in events]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("tier in (a, front)", True),
        ("tier notin (front)", False),
        ("missing notin (x)", True),
        ("missing!=x", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("app=web,tier in (front),!missing", True),
        ("app=web,tier=back", False),
    ],
)
def test_label_selectors_in_the_apis_string_form(selector: str, expected: bool) -> None:
    assert selector_matches(selector, {"app": "web", "tier": "front"}) is expected


def test_a_selector_the_server_cannot_parse_is_a_400() -> None:
    with pytest.raises(ApiError) as raised:
        selector_matches("!app=web", {})
    assert raised.value.status == 400


def test_replace_is_conditional_and_bumps_the_version(kube: FakeKube) -> None:
    made = lease(kube, "a")
    made["spec"]["holderIdentity"] = "b"
    replaced = kube.replace(LEASES, made)
    assert replaced["spec"]["holderIdentity"] == "b"
    assert int(replaced["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"])
    with pytest.raises(Conflict):
        kube.replace(LEASES, made)  # read before the first replace
    with pytest.raises(ApiError, match="resourceVersion"):
        kube.replace(LEASES, {**made, "metadata": {"name": "a", "namespace": "ns"}})
    with pytest.raises(NotFound):
        kube.replace(LEASES, {**replaced, "metadata": {**replaced["metadata"], "name": "zz"}})


def test_delete_is_a_recorded_call_with_injectable_failures(kube: FakeKube) -> None:
    lease(kube, "a")
    kube.fail_next("delete", KubeUnavailable("injected"))
    with pytest.raises(KubeUnavailable):
        kube.delete(LEASES, namespace="ns", name="a")
    assert kube.stored(LEASES, namespace="ns", name="a") is not None
    assert kube.delete(LEASES, namespace="ns", name="a") is None
    assert kube.stored(LEASES, namespace="ns", name="a") is None
    assert kube.calls[-1] == Call("delete", "Lease", "ns", "a")
    with pytest.raises(NotFound):
        kube.delete(LEASES, namespace="ns", name="a")


def test_lists_select_by_namespace_and_labels(kube: FakeKube) -> None:
    lease(kube, "b", group="g1")
    lease(kube, "a", group="g1")
    lease(kube, "c", group="g2")
    lease(kube, "d", namespace="other", group="g1")
    assert names(kube.list_page(LEASES, namespace="ns").items) == ["a", "b", "c"]
    assert names(kube.list_page(LEASES, label_selector="group=g1").items) == ["a", "b", "d"]
    page = kube.list_page(LEASES, namespace="ns", label_selector="group=g1")
    assert names(page.items) == ["a", "b"]
    assert (page.resource_version, page.continue_token) == ("4", "")


def test_pages_continue_where_the_last_ended(kube: FakeKube) -> None:
    for name in "edcba":
        lease(kube, name)
    first = kube.list_page(LEASES, limit=2)
    second = kube.list_page(LEASES, limit=2, continue_token=first.continue_token)
    third = kube.list_page(LEASES, limit=2, continue_token=second.continue_token)
    assert [names(p.items) for p in (first, second, third)] == [["a", "b"], ["c", "d"], ["e"]]
    assert third.continue_token == ""
    # Every page reports the version of the first: where a watch must start.
    assert {p.resource_version for p in (first, second, third)} == {"5"}


def test_a_continue_token_older_than_a_compaction_is_gone(kube: FakeKube) -> None:
    for name in "abc":
        lease(kube, name)
    first = kube.list_page(LEASES, limit=1)
    lease(kube, "d")
    kube.compact(LEASES)
    with pytest.raises(ApiError) as raised:
        kube.list_page(LEASES, limit=1, continue_token=first.continue_token)
    assert is_gone(raised.value)


def test_a_watch_from_a_lists_version_sees_every_later_write_in_order(kube: FakeKube) -> None:
    lease(kube, "before")
    listed = kube.list_page(LEASES)
    made = lease(kube, "a")
    kube.replace(LEASES, {**made, "spec": {"holderIdentity": "x"}})
    kube.delete(LEASES, namespace="ns", name="a")
    events = list(kube.watch(LEASES, resource_version=listed.resource_version, timeout_seconds=0))
    assert kinds(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    versions = [int(e.resource_version) for e in events]
    assert versions == sorted(versions)
    assert versions[0] > int(listed.resource_version)
    assert kube.calls[-1] == Call("watch", "Lease", "")


def test_a_watch_filters_by_namespace_and_labels_and_passes_bookmarks(kube: FakeKube) -> None:
    start = kube.list_page(LEASES).resource_version
    lease(kube, "in", group="g")
    lease(kube, "out", group="h")
    lease(kube, "elsewhere", namespace="other", group="g")
    kube.bookmark(LEASES)
    stream = kube.watch(
        LEASES, resource_version=start, namespace="ns", label_selector="group=g", timeout_seconds=0
    )
    events = list(stream)
    assert kinds(events) == [("ADDED", "in"), ("BOOKMARK", "")]
    assert events[-1].resource_version == "3"
    quiet = kube.watch(LEASES, resource_version=start, bookmarks=False, timeout_seconds=0)
    assert [e.type for e in quiet] == ["ADDED"] * 3


def test_a_watch_from_no_version_starts_with_what_exists(kube: FakeKube) -> None:
    lease(kube, "a")
    lease(kube, "b")
    assert kinds(list(kube.watch(LEASES, resource_version="", timeout_seconds=0))) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_a_watch_from_before_a_compaction_is_gone(kube: FakeKube) -> None:
    start = kube.list_page(LEASES).resource_version
    lease(kube, "a")
    kube.compact(LEASES)
    with pytest.raises(ApiError) as raised:
        kube.watch(LEASES, resource_version=start, timeout_seconds=0)
    assert is_gone(raised.value)
    # From the compaction on, watching works again.
    now = kube.list_page(LEASES).resource_version
    lease(kube, "b")
    assert kinds(list(kube.watch(LEASES, resource_version=now, timeout_seconds=0))) == [
        ("ADDED", "b")
    ]


def test_watch_failures_are_injectable(kube: FakeKube) -> None:
    kube.fail_next("watch", ApiError(410, "too old", reason="Expired"))
    with pytest.raises(ApiError) as raised:
        kube.watch(LEASES, resource_version="1")
    assert is_gone(raised.value)


def test_a_waiting_watch_gets_new_writes_and_ends_when_stopped(kube: FakeKube) -> None:
    stream = kube.watch(LEASES, resource_version="0", timeout_seconds=30)
    seen: list[WatchEvent] = []
    got_one = threading.Event()

    def read() -> None:
        for event in stream:
            seen.append(event)
            got_one.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    lease(kube, "a")
    assert got_one.wait(5)
    stream.stop()
    reader.join(5)
    assert not reader.is_alive()
    assert kinds(seen) == [("ADDED", "a")]


def test_end_watches_ends_open_watches_once_they_have_caught_up(kube: FakeKube) -> None:
    stream = kube.watch(LEASES, resource_version="0", timeout_seconds=30)
    lease(kube, "a")
    kube.end_watches()
    assert kinds(list(stream)) == [("ADDED", "a")]
    later = kube.watch(LEASES, resource_version="0", timeout_seconds=0)
    assert kinds(list(later)) == [("ADDED", "a")]  # a new watch is not ended


def test_timestamps_follow_an_injected_clock() -> None:
    clock = FakeClock()
    kube = FakeKube(LEASES, now=clock.wall)
    clock.advance(90)
    made = lease(kube, "a")
    assert made["metadata"]["creationTimestamp"] == "2026-01-01T00:01:30Z"
