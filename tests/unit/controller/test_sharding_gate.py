"""The reconcile gate of sharded mode (controller.sharding.shard), on a fake API.

The table: owner by the assignment x holder of the claim -> run, claim, take
over, wait, release or skip; every claim write conditional on the object read.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from ansible_operator.controller.contract import Key, Outcome
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.controller.sharding import claims
from ansible_operator.controller.sharding.membership import (
    GROUP_LABEL,
    Membership,
    MembershipConfig,
)
from ansible_operator.controller.sharding.shard import Shard
from ansible_operator.controller.sharding.shardmetrics import ShardMetrics
from ansible_operator.errors import Conflict, NotFound, RetryLater
from ansible_operator.kube.client import ResourceInfo

RES = ResourceInfo(
    group="g.example.com",
    version="v1",
    kind="Thing",
    plural="things",
    namespaced=True,
    has_status=True,
)
ME, OTHER, DEAD = "me-00000001", "other-00000002", "dead-00000003"
QUEUE = "thing-v1-controller"


class FakeKube:
    """CRs with resourceVersions (conditional merge patches) and Leases by name."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.leases: set[str] = set()
        self.writes = 0

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> dict[str, Any]:
        if res.kind == "Lease":
            if name not in self.leases:
                raise NotFound(404, "no lease")
            spec = {"holderIdentity": name, "renewTime": "t", "leaseDurationSeconds": 15}
            return {"metadata": {"name": name, "labels": {GROUP_LABEL: "grp"}}, "spec": spec}
        return copy.deepcopy(self.objects[name])

    def patch(
        self, res: ResourceInfo, *, namespace: str, name: str, body: Any, **_: Any
    ) -> dict[str, Any]:
        current = self.objects[name]
        meta = current["metadata"]
        if body["metadata"]["resourceVersion"] != meta["resourceVersion"]:
            raise Conflict(409, "changed")
        annotations = meta.setdefault("annotations", {})
        for key, value in body["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        self.writes += 1
        return copy.deepcopy(current)


def cr(name: str, claim: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "resourceVersion": "10",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if claim:
        meta["annotations"] = {claims.CLAIM: claim}
    return {"metadata": meta}


def make_shard(kube: FakeKube, members: set[str]) -> Shard:
    config = MembershipConfig(
        namespace="ns",
        group="grp",
        identity=ME,
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
    )
    membership = Membership(kube, config)  # type: ignore[arg-type]
    membership._renewed_at = time.monotonic()
    queue = WorkQueue(total_limit=4, backoff_base=0.01, backoff_max=1.0)
    shard = Shard(
        membership=membership,
        queue=queue,
        metrics=ShardMetrics(CollectorRegistry()),
        load_factor=1.1,
        on_lost=lambda: None,
    )
    queue.set_admit(shard.admit)
    shard._set_members(frozenset(members))
    return shard


def owned_by(owner: str, members: set[str]) -> str:
    """A CR name the assignment gives to `owner` when it is the only CR."""
    for index in range(1000):
        name = f"cr-{index}"
        kube = FakeKube()
        shard = make_shard(kube, members)
        shard.observe(QUEUE, "ADDED", cr(name))
        if shard._table.owner.get(Key(QUEUE, "ns", name)) == owner:
            return name
    raise AssertionError("no such name")


def gate(owner: str, holder: str, *, live: set[str]) -> tuple[FakeKube, Shard, Any]:
    members = {ME, OTHER}
    name = owned_by(owner, members)
    kube = FakeKube()
    kube.leases = set(live)
    kube.objects[name] = cr(name, holder)
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", cr(name, holder))
    return (
        kube,
        shard,
        shard.gate(Key(QUEUE, "ns", name), RES, kube.get(RES, namespace="ns", name=name)),
    )


def test_mine_and_claimed_by_me_runs_without_a_write() -> None:
    kube, _, result = gate(ME, ME, live=set())
    assert isinstance(result, dict)
    assert kube.writes == 0


def test_mine_and_free_is_claimed_then_run() -> None:
    kube, _, result = gate(ME, "", live=set())
    assert isinstance(result, dict)
    annotations = result["metadata"]["annotations"]
    assert annotations == {claims.CLAIM: ME, claims.RECONCILED_BY: ME}
    assert kube.writes == 1


def test_mine_but_held_by_a_live_member_waits() -> None:
    kube, _, result = gate(ME, OTHER, live={OTHER})
    assert isinstance(result, Outcome)
    assert result.requeue_after == 15.0
    assert kube.writes == 0


def test_mine_and_held_by_a_dead_member_is_taken_over() -> None:
    _, shard, result = gate(ME, DEAD, live=set())
    assert isinstance(result, dict)
    assert claims.holder(result) == ME
    assert shard.metrics.handovers.labels(direction="taken_over")._value.get() == 1


def test_not_mine_but_claimed_by_me_is_released_without_a_run() -> None:
    kube, _, result = gate(OTHER, ME, live={OTHER})
    assert isinstance(result, Outcome)
    assert result.forget
    name = next(iter(kube.objects))
    assert claims.holder(kube.objects[name]) == ""
    assert kube.objects[name]["metadata"]["annotations"] == {}


@pytest.mark.parametrize("holder", ["", OTHER, DEAD])
def test_not_mine_and_not_claimed_by_me_is_left_alone(holder: str) -> None:
    kube, _, result = gate(OTHER, holder, live={OTHER})
    assert isinstance(result, Outcome)
    assert result.forget
    assert kube.writes == 0


def test_a_claim_on_a_stale_read_conflicts_and_retries() -> None:
    members = {ME, OTHER}
    name = owned_by(ME, members)
    kube = FakeKube()
    kube.objects[name] = cr(name)
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", cr(name))
    stale = kube.get(RES, namespace="ns", name=name)
    kube.objects[name]["metadata"]["resourceVersion"] = "11"  # someone wrote meanwhile
    result = shard.gate(Key(QUEUE, "ns", name), RES, stale)
    assert isinstance(result, Outcome)
    assert isinstance(result.error, RetryLater)
    assert claims.holder(kube.objects[name]) == ""


def test_a_member_with_a_stale_lease_starts_nothing() -> None:
    members = {ME, OTHER}
    name = owned_by(ME, members)
    kube = FakeKube()
    kube.objects[name] = cr(name, ME)
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", cr(name, ME))
    shard.membership._renewed_at = time.monotonic() - 11.0
    result = shard.gate(Key(QUEUE, "ns", name), RES, kube.get(RES, namespace="ns", name=name))
    assert isinstance(result, Outcome)
    assert isinstance(result.error, RetryLater)


def test_the_queue_admits_only_own_or_claimed_keys() -> None:
    members = {ME, OTHER}
    mine, theirs = owned_by(ME, members), owned_by(OTHER, members)
    kube = FakeKube()
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", cr(mine))
    shard.observe(QUEUE, "ADDED", cr(theirs))
    assert shard.admit(Key(QUEUE, "ns", mine))
    assert not shard.admit(Key(QUEUE, "ns", theirs))
    shard.observe(
        QUEUE, "MODIFIED", {"metadata": {**cr(theirs, ME)["metadata"], "resourceVersion": "11"}}
    )
    assert shard.admit(Key(QUEUE, "ns", theirs))  # held by me: queued so I can release it
    assert not shard.admit(Key(QUEUE, "ns", "unknown"))
