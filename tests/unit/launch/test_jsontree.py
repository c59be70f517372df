"""launch.jsontree: iterative copies, depth checks and path descriptions of JSON-like trees."""

from __future__ import annotations

import types
from typing import Any

import pytest

from ansible_operator.kube import deepjson
from ansible_operator.launch.jsontree import Path, deeper_than, describe_path, rebuild


def nested(depth: int, key: str = "a", leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        ("s", "s"),
        (None, None),
        ({}, {}),
        ([], []),
        ((1, (2, 3)), [1, [2, 3]]),
        (types.MappingProxyType({"a": types.MappingProxyType({"b": 1})}), {"a": {"b": 1}}),
        ({"b": 1, "a": [{"c": ()}]}, {"b": 1, "a": [{"c": []}]}),
    ],
    ids=["int", "str", "None", "empty map", "empty list", "tuples", "read-only maps", "mixed"],
)
def test_rebuild_copies_into_plain_dicts_and_lists(value: Any, expected: Any) -> None:
    assert rebuild(value) == expected


def test_rebuild_shares_no_container_and_keeps_order() -> None:
    source = {"z": {"inner": [1, {"x": 2}]}, "a": []}
    copy = rebuild(source)
    assert list(copy) == ["z", "a"]
    copy["z"]["inner"][1]["x"] = 99
    copy["a"].append(1)
    assert source == {"z": {"inner": [1, {"x": 2}]}, "a": []}


def test_rebuild_applies_pairs_to_maps_and_leaf_to_scalars() -> None:
    def upper(mapping: Any) -> list[tuple[Any, Any]]:
        return [(str(key).upper(), value) for key, value in mapping.items()]

    def double(value: Any) -> Any:
        return value * 2

    assert rebuild({"a": [1, {"b": "x"}]}, pairs=upper, leaf=double) == {"A": [2, {"B": "xx"}]}


@pytest.mark.parametrize("depth", [1_000, 10_000])
def test_rebuild_has_no_depth_limit(depth: int) -> None:
    value = nested(depth, leaf=[1, "x"])
    assert deepjson.dumps(rebuild(value)) == deepjson.dumps(value)


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        (1, 0, None),
        ({}, 0, None),
        ({"a": 1}, 0, ("a",)),
        ({"a": 1}, 1, None),
        ({"a": {}}, 1, None),
        ({"a": []}, 0, ("a",)),
        ({"a": {"b": 1}}, 1, ("a", "b")),
        ([[1]], 1, (0, 0)),
        ({"x": 1, "y": {"z": [5]}}, 2, ("y", "z", 0)),
        ({"first": {"a": 1}, "second": {"b": 1}}, 1, ("first", "a")),
        (nested(100), 100, None),
        (nested(101), 100, ("a",) * 101),
        (nested(10_000), 100, ("a",) * 101),
    ],
    ids=[
        "scalar",
        "empty map",
        "one key over 0",
        "one key at 1",
        "empty map is a leaf",
        "empty list under a key",
        "two keys over 1",
        "list indices count",
        "first path that crosses",
        "first key wins",
        "100 at 100",
        "101 over 100",
        "10000 over 100",
    ],
)
def test_deeper_than(value: Any, limit: int, expected: Path | None) -> None:
    assert deeper_than(value, limit) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), "spec"),
        (("a", "b"), "spec.a.b"),
        (("items", 0, "name"), "spec.items[0].name"),
        (("a.b", "with space", "", "ключ"), 'spec["a.b"]["with space"][""]["ключ"]'),
        (("x" * 41,), "spec." + "x" * 40 + "…"),
        (("x y" * 20,), 'spec["' + ("x y" * 20)[:40] + '…"]'),
        (("a",) * 7, "spec.a.a.a.a.a.a…"),
    ],
    ids=["root", "keys", "indices", "awkward keys", "long key", "long quoted key", "long path"],
)
def test_describe_path(path: tuple[str | int, ...], expected: str) -> None:
    assert describe_path("spec", path) == expected


def test_describe_path_is_short_whatever_the_input() -> None:
    path = tuple("k" * 1_000_000 for _ in range(1_000))
    assert len(describe_path("spec", path)) < 300
