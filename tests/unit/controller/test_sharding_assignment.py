"""Rendezvous hashing with bounded loads (controller.sharding.assignment)."""

from __future__ import annotations

from collections import Counter

import pytest

from ansible_operator.controller.contract import Key
from ansible_operator.controller.sharding.assignment import Placed, assign, placed

MEMBERS = ["vm-0a1b2c3d", "vm-4e5f6a7b", "vm-8c9d0e1f"]


def items(count: int, *, per_second: int = 10) -> list[Placed]:
    return [
        placed(
            Key("q", "ns", f"cr-{i:04d}"),
            f"2026-01-01T00:{i // per_second // 60:02d}:{i // per_second % 60:02d}Z",
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("count", [3, 10, 150, 1000])
def test_no_member_exceeds_the_bound(count: int) -> None:
    result = assign(MEMBERS, items(count), load_factor=1.1)
    loads = Counter(result.owner.values())
    assert sum(loads.values()) == count
    assert max(loads.values()) <= result.cap(count)


def test_the_result_depends_only_on_members_and_crs() -> None:
    forward = assign(MEMBERS, items(200), load_factor=1.1)
    backward = assign(list(reversed(MEMBERS)), list(reversed(items(200))), load_factor=1.1)
    assert forward.owner == backward.owner


def test_a_cr_created_last_moves_no_other() -> None:
    all_items = items(151)
    before = assign(MEMBERS, all_items[:150], load_factor=1.1)
    after = assign(MEMBERS, all_items, load_factor=1.1)
    assert {k: after.owner[k] for k in before.owner} == before.owner


def test_appending_equals_recomputing() -> None:
    all_items = items(120)
    grown = assign(MEMBERS, all_items[:60], load_factor=1.1)
    for item in all_items[60:]:
        assert grown.can_append(item)
        grown.append(item)
    assert grown.owner == assign(MEMBERS, all_items, load_factor=1.1).owner


def test_a_member_leaving_moves_only_its_crs() -> None:
    before = assign(MEMBERS, items(300), load_factor=1.1)
    after = assign(MEMBERS[:2], items(300), load_factor=1.1)
    moved = [k for k, owner in before.owner.items() if after.owner[k] != owner]
    left = [k for k, owner in before.owner.items() if owner == MEMBERS[2]]
    # Its CRs, plus the few the bound pushes around.
    assert set(left) <= set(moved)
    assert len(moved) <= 1.25 * len(left)


def test_a_member_joining_moves_about_a_quarter() -> None:
    before = assign(MEMBERS, items(300), load_factor=1.1)
    after = assign([*MEMBERS, "vm-99999999"], items(300), load_factor=1.1)
    moved = sum(after.owner[k] != owner for k, owner in before.owner.items())
    assert 0.15 * 300 <= moved <= 0.45 * 300


@pytest.mark.parametrize("factor", [0.0, 0.5, 0.99])
def test_a_load_factor_below_one_is_refused(factor: float) -> None:
    with pytest.raises(ValueError, match="load factor"):
        assign(MEMBERS, items(3), load_factor=factor)


def test_no_members_owns_nothing() -> None:
    assert assign([], items(5), load_factor=1.1).owner == {}
