"""Label selectors: validated when built, matched like Kubernetes, rendered as a query."""

from __future__ import annotations

import pytest

from ansible_operator.config.selectors import (
    LabelSelector,
    Requirement,
    SelectorError,
    selector_from_state,
)


@pytest.mark.parametrize(
    ("build", "path", "message"),
    [
        (
            lambda: Requirement("tier", "Equals", ("a",)),
            "operator",
            '"Equals" is not a valid label selector operator',
        ),
        (lambda: Requirement("tier", "in", ("a",)), "operator", '"in" is not a valid'),
        (lambda: Requirement("tier", "In"), "values", "operator In needs at least one value"),
        (lambda: Requirement("tier", "NotIn"), "values", "operator NotIn needs at least one"),
        (lambda: Requirement("tier", "Exists", ("a",)), "values", "Exists takes no values"),
        (lambda: Requirement("t", "DoesNotExist", ("a",)), "values", "DoesNotExist takes no"),
        (lambda: Requirement("", "Exists"), "key", "the name part must not be empty"),
        (lambda: Requirement("bad key", "Exists"), "key", "invalid label key 'bad key'"),
        (lambda: Requirement("-tier", "Exists"), "key", "the name part '-tier' must be"),
        (lambda: Requirement("x" * 64, "Exists"), "key", "at most 63 characters"),
        (lambda: Requirement("/tier", "Exists"), "key", "prefix before '/' must not be empty"),
        (lambda: Requirement("a/b/c", "Exists"), "key", "at most one '/'"),
        (lambda: Requirement("Shop.io/tier", "Exists"), "key", "lowercase DNS subdomain"),
        (lambda: Requirement("k", "In", ("ok", "not ok")), "values[1]", "'not ok' must be"),
        (lambda: LabelSelector({"tier": "a b"}), "matchLabels.tier", "label value 'a b'"),
        (lambda: LabelSelector({"bad key": "a"}), "matchLabels.bad key", "invalid label key"),
        (lambda: LabelSelector({"k": "v" * 64}), "matchLabels.k", "at most 63 characters"),
    ],
)
def test_invalid_selectors_are_refused(build: object, path: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        build()  # type: ignore[operator]
    assert caught.value.path == path
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("key", "operator", "values"),
    [
        ("shop.example.org/tier", "In", ("a", "b")),
        ("tier", "NotIn", ("",)),  # an empty value is a valid label value
        ("a.b_c-d", "Exists", ()),
        ("x" * 63, "DoesNotExist", ()),
        (f"{'p' * 253}/k", "Exists", ()),
    ],
)
def test_valid_requirements_are_built(key: str, operator: str, values: tuple[str, ...]) -> None:
    requirement = Requirement(key, operator, values)
    assert (requirement.key, requirement.operator, requirement.values) == (key, operator, values)


def test_prefix_longer_than_253_is_refused() -> None:
    with pytest.raises(SelectorError, match="at most 253 characters"):
        Requirement(f"{'p' * 254}/k", "Exists")


SELECTOR = LabelSelector(
    {"app": "shop"},
    (
        Requirement("tier", "In", ("web", "api")),
        Requirement("zone", "NotIn", ("eu",)),
        Requirement("owner", "Exists"),
        Requirement("legacy", "DoesNotExist"),
    ),
)


@pytest.mark.parametrize(
    ("labels", "selected"),
    [
        ({"app": "shop", "tier": "web", "owner": "me"}, True),
        ({"app": "shop", "tier": "api", "owner": "me", "zone": "us"}, True),
        ({"app": "shop", "tier": "web", "owner": "me", "zone": "eu"}, False),  # NotIn
        ({"app": "shop", "tier": "db", "owner": "me"}, False),  # In
        ({"app": "shop", "owner": "me"}, False),  # In needs the label
        ({"app": "shop", "tier": "web"}, False),  # Exists
        ({"app": "shop", "tier": "web", "owner": "me", "legacy": ""}, False),  # DoesNotExist
        ({"app": "other", "tier": "web", "owner": "me"}, False),  # matchLabels
        ({}, False),
    ],
)
def test_matching(labels: dict[str, str], selected: bool) -> None:
    assert SELECTOR.matches(labels) is selected


def test_empty_selector_matches_everything() -> None:
    assert LabelSelector().matches({})
    assert LabelSelector().is_empty
    assert LabelSelector().to_query() == ""


def test_query_is_sorted_by_key_with_sorted_values() -> None:
    assert SELECTOR.to_query() == ("app=shop,!legacy,owner,tier in (api,web),zone notin (eu)")


def test_from_state_builds_and_prefixes_paths() -> None:
    state = {
        "matchLabels": {"app": "shop"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web"]},
            {"key": "zone", "operator": "Near", "values": []},
        ],
    }
    with pytest.raises(SelectorError) as caught:
        selector_from_state(state)
    assert caught.value.path == "matchExpressions[1].operator"
    del state["matchExpressions"][1]  # type: ignore[attr-defined]
    selector = selector_from_state(state)
    assert selector == LabelSelector({"app": "shop"}, (Requirement("tier", "In", ("web",)),))


def test_from_state_of_an_empty_selector_is_none() -> None:
    assert selector_from_state({}) is None
    assert selector_from_state({"matchLabels": {}, "matchExpressions": []}) is None
