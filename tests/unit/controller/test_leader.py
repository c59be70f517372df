"""Leader election (controller.leader) on FakeKube and a FakeClock: no cluster, no sleeps.

Each test drives the protocol's rounds by hand (`try_acquire_or_renew` for a
candidate, `renew` for the leader's renewing thread) and moves the clock
between them, as the retry period would. tests/e2e/test_lifecycle.py runs the
same election between two operator processes on the testbed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ansible_operator.clocks import FakeClock
from ansible_operator.controller.leader import LEASES, ElectionConfig, LeaderElector
from ansible_operator.errors import Conflict, KubeUnavailable
from ansible_operator.kube.fakekube import FakeKube

NS, NAME = "ns", "my-operator-lock"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0


class World:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube(LEASES, now=self.clock.wall)
        self.lost: list[str] = []

    def elector(self, identity: str) -> LeaderElector:
        config = ElectionConfig(
            namespace=NS,
            name=NAME,
            identity=identity,
            lease_duration=LEASE_DURATION,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY_PERIOD,
        )
        return LeaderElector(
            self.kube, config, on_lost=lambda: self.lost.append(identity), clock=self.clock
        )

    def spec(self) -> dict[str, Any]:
        stored = self.kube.stored(LEASES, namespace=NS, name=NAME)
        assert stored is not None
        return dict(stored["spec"])


@pytest.fixture
def world() -> World:
    return World()


def micro(clock: FakeClock) -> str:
    return clock.wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_the_first_candidate_creates_the_lease_and_leads(world: World) -> None:
    leader = world.elector("a")
    stop = threading.Event()
    assert leader.acquire(stop)
    try:
        assert world.spec() == {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "renewTime": micro(world.clock),
            "acquireTime": micro(world.clock),
            "leaseTransitions": 0,
        }
    finally:
        leader.release()


def test_each_renewal_moves_renew_time_only(world: World) -> None:
    leader = world.elector("a")
    assert leader.try_acquire_or_renew()
    acquired = world.spec()
    world.clock.advance(RETRY_PERIOD)
    assert leader.renew()
    renewed = world.spec()
    assert renewed["renewTime"] == micro(world.clock) != acquired["renewTime"]
    assert (renewed["acquireTime"], renewed["leaseTransitions"]) == (
        acquired["acquireTime"],
        0,
    )
    assert world.lost == []


def test_a_standby_waits_while_the_leader_renews(world: World) -> None:
    leader, standby = world.elector("a"), world.elector("b")
    assert leader.try_acquire_or_renew()
    for _ in range(30):  # a minute of rounds: four lease durations
        assert not standby.try_acquire_or_renew()
        world.clock.advance(RETRY_PERIOD)
        assert leader.renew()
    assert world.spec()["holderIdentity"] == "a"


def test_a_standby_takes_over_once_the_record_stood_still_a_lease_duration(world: World) -> None:
    leader, standby = world.elector("a"), world.elector("b")
    assert leader.try_acquire_or_renew()
    assert not standby.try_acquire_or_renew()  # first sight of the record: the clock starts
    world.clock.advance(LEASE_DURATION - 0.001)  # the leader is gone: no more renewals
    assert not standby.try_acquire_or_renew()
    world.clock.advance(0.001)
    assert standby.try_acquire_or_renew()
    spec = world.spec()
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert spec["acquireTime"] == spec["renewTime"] == micro(world.clock)


def test_the_leader_gives_up_when_it_cannot_renew_within_the_deadline(world: World) -> None:
    leader = world.elector("a")
    assert leader.try_acquire_or_renew()
    world.kube.fail_next("get", KubeUnavailable("API server down"), times=100)
    rounds = 0
    while leader.renew():
        rounds += 1
        world.clock.advance(RETRY_PERIOD)
    # 10 s of failed rounds are tolerated; the first one past the deadline is not.
    assert rounds == 6
    assert world.lost == ["a"]
    calls = len(world.kube.calls)
    leader.release()  # no longer the leader: the Lease is not touched
    assert len(world.kube.calls) == calls


def test_a_leader_whose_lease_was_taken_loses_it_at_the_deadline(world: World) -> None:
    leader, other = world.elector("a"), world.elector("b")
    assert leader.try_acquire_or_renew()
    assert not other.try_acquire_or_renew()
    world.clock.advance(LEASE_DURATION)  # say the leader was paused that long
    assert other.try_acquire_or_renew()
    while leader.renew():  # every round now sees a live foreign holder
        world.clock.advance(RETRY_PERIOD)
    assert world.lost == ["a"]
    assert world.spec()["holderIdentity"] == "b"


def test_release_hands_the_lease_to_a_standby_at_once(world: World) -> None:
    leader, standby = world.elector("a"), world.elector("b")
    assert leader.acquire(threading.Event())
    assert not standby.try_acquire_or_renew()
    leader.release()
    released = world.spec()
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)
    assert standby.try_acquire_or_renew()  # no lease duration to wait out
    assert world.spec()["leaseTransitions"] == 1


def test_a_conflicting_update_is_a_lost_round_not_an_error(world: World) -> None:
    leader, standby = world.elector("a"), world.elector("b")
    assert leader.try_acquire_or_renew()
    assert not standby.try_acquire_or_renew()
    world.clock.advance(LEASE_DURATION)

    def leader_renews_first(kube: FakeKube) -> None:
        world.clock.advance(0.5)
        assert leader.renew()

    world.kube.before_next("replace", leader_renews_first)
    assert not standby.try_acquire_or_renew()  # its update carried a stale resourceVersion
    assert world.spec()["holderIdentity"] == "a"


def test_two_candidates_creating_the_lease_at_once_elect_one(world: World) -> None:
    first, second = world.elector("a"), world.elector("b")
    world.kube.before_next("create", lambda kube: first.try_acquire_or_renew())
    assert not second.try_acquire_or_renew()  # its create got AlreadyExists
    assert world.spec()["holderIdentity"] == "a"
    world.kube.fail_next("replace", Conflict(409, "injected"))
    world.clock.advance(RETRY_PERIOD)
    assert not first.try_acquire_or_renew()  # a conflict is a failed round...
    assert first.renew()  # ...which the renew deadline tolerates
    assert world.lost == []
