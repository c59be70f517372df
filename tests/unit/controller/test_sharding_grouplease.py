"""The group Lease of sharded mode (controller.sharding.grouplease) on FakeKube and a FakeClock.

Sharded members hold the `--leader-election-id` Lease together; an unsharded
leader (controller.leader) holding it keeps them waiting until its record
stands still for a lease duration.
"""

from __future__ import annotations

from ansible_operator.clocks import FakeClock
from ansible_operator.controller.leader import LEASES, ElectionConfig, LeaderElector
from ansible_operator.controller.sharding.grouplease import GroupLease
from ansible_operator.kube.fakekube import FakeKube

NS, GROUP = "ns", "my-operator"


def test_members_hold_the_lease_together_and_an_unsharded_leader_stands_by() -> None:
    clock = FakeClock()
    kube = FakeKube(LEASES, now=clock.wall)
    one, two = (
        GroupLease(kube, namespace=NS, group=GROUP, lease_duration=15.0, clock=clock)
        for _ in range(2)
    )
    assert one.hold() == ""
    config = ElectionConfig(NS, GROUP, "unsharded", 15.0, 10.0, 2.0)
    unsharded = LeaderElector(kube, config, on_lost=lambda: None, clock=clock)
    for _ in range(20):  # 40 s: the record never stands still for 15
        clock.advance(2.0)
        assert (one if clock.now % 4 else two).hold() == ""  # either member renews it
        assert not unsharded.try_acquire_or_renew()
    stored = kube.stored(LEASES, namespace=NS, name=GROUP)
    assert stored is not None
    assert stored["spec"]["holderIdentity"] == "sharding/" + GROUP
    # Counted once, when the group first took it; renewals by any member are no transition.
    assert stored["spec"]["leaseTransitions"] == 1


def test_a_live_unsharded_leader_keeps_the_group_waiting_until_its_record_expires() -> None:
    clock = FakeClock()
    kube = FakeKube(LEASES, now=clock.wall)
    config = ElectionConfig(NS, GROUP, "unsharded", 15.0, 10.0, 2.0)
    leader = LeaderElector(kube, config, on_lost=lambda: None, clock=clock)
    assert leader.try_acquire_or_renew()
    group = GroupLease(kube, namespace=NS, group=GROUP, lease_duration=15.0, clock=clock)
    assert group.hold() == "unsharded"
    clock.advance(14.0)
    assert group.hold() == "unsharded"
    clock.advance(1.0)  # the leader stopped renewing 15 s ago
    assert group.hold() == ""
    stored = kube.stored(LEASES, namespace=NS, name=GROUP)
    assert stored is not None
    assert (stored["spec"]["holderIdentity"], stored["spec"]["leaseTransitions"]) == (
        "sharding/" + GROUP,
        1,
    )
