"""Shard membership (controller.sharding.membership) on FakeKube and a FakeClock.

Several members share one fake API server and one clock; each test drives
their rounds by hand (what the membership thread does every retry period:
`renew`, then `refresh`). tests/sharding/ runs real replicas on the testbed.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.controller.leader import LEASES
from ansible_operator.controller.sharding.membership import (
    GROUP_LABEL,
    Membership,
    MembershipConfig,
)
from ansible_operator.errors import KubeUnavailable
from ansible_operator.kube.fakekube import FakeKube

NS, GROUP = "ns", "my-operator"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0


class Group:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube(LEASES, now=self.clock.wall)

    def member(self, identity: str, group: str = GROUP) -> Membership:
        config = MembershipConfig(
            namespace=NS,
            group=group,
            identity=identity,
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
        )
        return Membership(self.kube, config, clock=self.clock)

    def lease(self, name: str) -> dict[str, Any] | None:
        return self.kube.stored(LEASES, namespace=NS, name=name)

    def rounds(self, seconds: float, *members: Membership) -> None:
        """Let `seconds` pass in retry periods, the given members renewing each round."""
        for _ in range(round(seconds / RETRY_PERIOD)):
            self.clock.advance(RETRY_PERIOD)
            for member in members:
                assert member.renew()
                member.refresh()


@pytest.fixture
def group() -> Group:
    return Group()


def test_join_creates_a_labelled_lease_and_makes_the_member_valid(group: Group) -> None:
    me = group.member("me")
    assert not me.valid()
    me.join()
    lease = group.lease("me")
    assert lease is not None
    assert lease["metadata"]["labels"] == {GROUP_LABEL: GROUP}
    assert lease["spec"]["holderIdentity"] == "me"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert me.valid()
    assert me.refresh() == {"me"}


def test_a_member_is_valid_for_the_renew_deadline_after_its_last_renewal(group: Group) -> None:
    me = group.member("me")
    me.join()
    group.rounds(30, me)
    assert me.valid()
    renewed = group.lease("me")
    assert renewed is not None
    assert renewed["spec"]["renewTime"] == group.clock.wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    group.kube.fail_next("replace", KubeUnavailable("down"), times=10)
    for _ in range(4):
        group.clock.advance(RETRY_PERIOD)
        assert not me.renew()
        assert me.valid()  # 8 s without a renewal
    group.clock.advance(RETRY_PERIOD)
    assert not me.valid()  # 10 s: start no more runs
    assert me.refresh() == set()  # and no longer counts itself


def test_members_see_each_other(group: Group) -> None:
    one, two = group.member("one"), group.member("two")
    one.join()
    two.join()
    assert one.refresh() == two.refresh() == {"one", "two"}
    assert one.is_live("two")
    assert two.is_live("one")


def test_a_member_never_listed_is_looked_up(group: Group) -> None:
    one, two = group.member("one"), group.member("two")
    one.join()
    one.refresh()
    two.join()  # after one's last list
    assert one.is_live("two")
    assert not one.is_live("nobody")
    stranger = group.member("stranger", group="another-group")
    stranger.join()
    assert not one.is_live("stranger")


def test_other_groups_are_not_members(group: Group) -> None:
    one, other = group.member("one"), group.member("other", group="another-group")
    one.join()
    other.join()
    assert one.refresh() == {"one"}
    assert other.refresh() == {"other"}


def test_a_silent_member_expires_after_a_lease_duration_and_its_lease_goes(group: Group) -> None:
    one, two = group.member("one"), group.member("two")
    one.join()
    two.join()
    assert one.refresh() == {"one", "two"}
    # two stops renewing (killed): one judges it on its own clock.
    group.rounds(14, one)
    assert one.refresh() == {"one", "two"}
    group.clock.advance(LEASE_DURATION - 14)
    assert one.refresh() == {"one"}
    assert not one.is_live("two")
    assert group.lease("two") is not None  # kept for a further lease duration
    group.rounds(LEASE_DURATION, one)
    assert group.lease("two") is None  # collected
    assert not two.renew()  # deleted by the others: two never comes back
    assert not two.renew()


def test_a_member_that_leaves_is_dead_at_once(group: Group) -> None:
    one, two = group.member("one"), group.member("two")
    one.join()
    two.join()
    assert one.refresh() == {"one", "two"}
    two.leave()
    assert not two.valid()
    lease = group.lease("two")
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == ""
    assert one.refresh() == {"one"}
    two.join()  # comes back: the released Lease is taken again
    assert group.lease("two")["spec"]["holderIdentity"] == "two"  # type: ignore[index]
    assert one.refresh() == {"one", "two"}


def test_a_failed_list_leaves_the_view_as_it_was(group: Group) -> None:
    one, two = group.member("one"), group.member("two")
    one.join()
    two.join()
    assert one.refresh() == {"one", "two"}
    group.kube.fail_next("list_page", KubeUnavailable("down"))
    with pytest.raises(KubeUnavailable):
        one.refresh()
    assert one.is_live("two")
