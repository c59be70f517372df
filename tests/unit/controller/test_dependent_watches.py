"""Dependent watches (controller.dependents) with their threads running on FakeKube.

tests/unit/proxy/test_dependents.py feeds events to one stream by hand; here
the real list + watch threads run against the fake API server, which logs
every write for watches and answers 410 once its log is compacted, so a
relist after missed events is exercised without a cluster.
tests/e2e/test_dependents.py does the same through the operator on the testbed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.dependents import DependentWatches
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.kube.fakekube import FakeKube
from ansible_operator.kube.kubeapi import ResourceInfo
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.ownership import Touch

MC = "memcached-v1alpha1-controller"
MEMCACHED = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"))
OWNER = Owner("cache.example.com/v1alpha1", "Memcached", "mc", "ns1", "uid-mc", MC)
MC_REF = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "mc"}
CMS = ResourceInfo("", "v1", "ConfigMap", "configmaps", namespaced=True, has_status=False)
TOUCH = Touch("", "v1", "ConfigMap", "configmaps", "ns1", "cm", False, True)
KEY = Key(MC, "ns1", "mc")


@pytest.fixture
def kube() -> FakeKube:
    kube = FakeKube(CMS)
    body = {"metadata": {"name": "cm", "ownerReferences": [{**MC_REF, "uid": "uid-mc"}]}}
    kube.create(CMS, namespace="ns1", body={**body, "data": {"k": "1"}})
    return kube


@pytest.fixture
def queue() -> WorkQueue:
    return WorkQueue(total_limit=10, backoff_base=0.1, backoff_max=1.0)


@pytest.fixture
def dependents(kube: FakeKube, queue: WorkQueue) -> Iterator[DependentWatches]:
    watches = DependentWatches(kube=kube, queue=queue, namespaces=(), primaries={MC: MEMCACHED})
    watches.touched(OWNER, TOUCH)
    assert watches.synced(5)
    yield watches
    watches.stop()
    assert not watches.alive()


def next_key(queue: WorkQueue, timeout: float = 5.0) -> Key | None:
    key = queue.get(timeout=timeout)
    if key is not None:
        queue.done(key)
    return key


def set_data(value: str) -> Any:
    return lambda obj: obj.update(data={"k": value})


def test_the_initial_list_enqueues_nothing(dependents: DependentWatches, queue: WorkQueue) -> None:
    assert dependents.watched() == {GVK("", "v1", "ConfigMap")}
    assert next_key(queue, timeout=0.2) is None


def test_changes_and_deletion_of_an_owned_object_enqueue_its_owner(
    kube: FakeKube, dependents: DependentWatches, queue: WorkQueue
) -> None:
    kube.edit(CMS, namespace="ns1", name="cm", change=set_data("2"))
    assert next_key(queue) == KEY
    kube.delete(CMS, namespace="ns1", name="cm")
    assert next_key(queue) == KEY


def test_a_status_only_change_enqueues_nothing(
    kube: FakeKube, dependents: DependentWatches, queue: WorkQueue
) -> None:
    kube.edit(CMS, namespace="ns1", name="cm", change=lambda obj: obj.update(status={"x": 1}))
    kube.bookmark(CMS)
    kube.edit(CMS, namespace="ns1", name="cm", change=set_data("3"))  # a marker after it
    assert next_key(queue) == KEY
    assert next_key(queue, timeout=0.2) is None  # the marker's only


def test_a_watch_ended_by_the_server_resumes_where_it_was(
    kube: FakeKube, dependents: DependentWatches, queue: WorkQueue
) -> None:
    kube.end_watches()
    kube.edit(CMS, namespace="ns1", name="cm", change=set_data("4"))
    assert next_key(queue) == KEY
    assert [c.verb for c in kube.calls].count("list_page") == 1  # no relist


def test_a_deletion_missed_behind_a_410_is_found_by_the_relist(
    kube: FakeKube, dependents: DependentWatches, queue: WorkQueue
) -> None:
    def missed(fake: FakeKube) -> None:
        # While the watch was down: deleted, and etcd compacted past it.
        fake.delete(CMS, namespace="ns1", name="cm")
        fake.compact(CMS)

    kube.before_next("watch", missed)
    kube.end_watches()
    assert next_key(queue) == KEY  # enqueued by the relist
    assert [c.verb for c in kube.calls].count("list_page") == 2
