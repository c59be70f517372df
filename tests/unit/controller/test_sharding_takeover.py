"""Takeover of a dead member's CRs at once (controller.sharding.takeover), on a fake API.

The table: owner by the assignment x holder of the claim x this replica's
Lease -> the membership round claims the CR (conditionally) and queues it,
or writes nothing.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ansible_operator.controller.contract import Key
from ansible_operator.controller.sharding import claims
from ansible_operator.kube.client import ResourceInfo
from tests.unit.controller.test_sharding_gate import (
    DEAD,
    ME,
    OTHER,
    QUEUE,
    RES,
    FakeKube,
    cr,
    make_shard,
    owned_by,
)


class DiscoveringKube(FakeKube):
    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo:
        assert (group, version, kind) == (RES.group, RES.version, RES.kind)
        return RES


def typed(name: str, holder: str) -> dict[str, Any]:
    return {"apiVersion": f"{RES.group}/{RES.version}", "kind": RES.kind, **cr(name, holder)}


@pytest.mark.parametrize(
    ("owner", "holder", "lease_valid", "taken"),
    [
        (ME, DEAD, True, True),  # the dead member's CR: claimed in the round
        (ME, OTHER, True, False),  # held by a live member: it releases it itself
        (ME, ME, True, False),  # already mine
        (OTHER, DEAD, True, False),  # the other member's to take over
        (ME, DEAD, False, False),  # our own Lease is stale: we take nothing
    ],
)
def test_a_round_takes_over_exactly_the_dead_members_crs(
    owner: str, holder: str, lease_valid: bool, taken: bool
) -> None:
    members = {ME, OTHER}
    name = owned_by(owner, members)
    kube = DiscoveringKube()
    kube.leases = {OTHER}
    kube.objects[name] = cr(name, holder)
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", typed(name, holder))
    if not lease_valid:
        shard.membership._renewed_at = time.monotonic() - 11.0
    shard.tick()
    shard.takeover.drain()
    key = Key(QUEUE, "ns", name)
    assert (claims.holder(kube.objects[name]) == ME) is (taken or holder == ME)
    assert kube.writes == (1 if taken else 0)
    if taken:
        assert shard.queue.is_pending(key)  # queued to run
        assert shard.metrics.handovers.labels(direction="taken_over")._value.get() == 1
        assert shard.metrics.claimed._value.get() == 0  # counted before the claim
        shard.tick()
        assert shard.metrics.claimed._value.get() == 1


def test_a_takeover_on_a_stale_version_leaves_the_cr_to_the_gate() -> None:
    members = {ME, OTHER}
    name = owned_by(ME, members)
    kube = DiscoveringKube()
    kube.objects[name] = cr(name, DEAD)
    shard = make_shard(kube, members)
    shard.observe(QUEUE, "ADDED", typed(name, DEAD))
    kube.objects[name]["metadata"]["resourceVersion"] = "11"  # a write the watch has not shown
    shard.tick()
    shard.takeover.drain()
    assert claims.holder(kube.objects[name]) == DEAD
    assert shard.queue.is_pending(Key(QUEUE, "ns", name))  # the gate re-reads and claims


def test_all_of_a_dead_members_crs_are_claimed_in_one_round() -> None:
    members = {ME, OTHER}
    kube = DiscoveringKube()
    kube.leases = {OTHER}
    shard = make_shard(kube, members)
    names = [f"cr-{index}" for index in range(40)]
    for name in names:
        kube.objects[name] = cr(name, DEAD)
        shard.observe(QUEUE, "ADDED", typed(name, DEAD))
    shard.tick()
    shard.takeover.drain()
    mine = {key.name for key, owner in shard._table.owner.items() if owner == ME}
    assert 10 <= len(mine) < len(names)
    assert {n for n in names if claims.holder(kube.objects[n]) == ME} == mine
    assert {n for n in names if claims.holder(kube.objects[n]) == DEAD} == set(names) - mine
