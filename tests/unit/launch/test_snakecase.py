"""launch.snakecase: the Go operator's snake_case spelling of custom-resource keys.

The first table is the upstream test suite's, the second the hand-traced cases
of the behaviour note (§2.2), the third extra edge cases checked against the Go
code. Roles depend on these spellings, so every one must match exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_operator.launch.snakecase import go_lower, map_to_snake, to_snake

OFFICIAL = [
    ("var", "var"),
    ("888", "888"),
    ("k8s_var", "k8s_var"),
    ("_k8s_var", "_k8s_var"),
    ("k8s var", "k8s_var"),
    ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
    ("sizeK8sBuckets", "size_k8s_buckets"),
    ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
    ("this_should_be_a_noop", "this_should_be_a_noop"),
    ("egressIPs", "egress_ips"),
    ("egressIPsEgress", "egress_ips_egress"),
    ("egressIPsegress", "egress_ips_egress"),
    ("IPsegress", "_ips_egress"),
    ("egressIP", "egress_ip"),
    ("egressIPEgress", "egress_ip_egress"),
    ("egressIPegress", "egress_ip_egress"),
    ("URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
    ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
]

DERIVED = [
    ("ABCDef", "_abc_def"),
    ("ABC", "_abc"),
    ("A", "_a"),
    ("Ab", "_ab"),
    ("aB", "ab"),
    ("aBC", "abc"),
    ("ABc", "_a_bc"),
    ("JSONData", "_json_data"),
    ("myJSONData", "my_json_data"),
    ("FooBar", "_foo_bar"),
    ("fooBar", "foo_bar"),
    ("foo-bar", "foo_bar"),
    ("foo.bar", "foo.bar"),
    ("foo  bar", "foo__bar"),
    (" foo ", "foo"),
    ("__dunder", "__dunder"),
    ("k8sVersion", "k8s_version"),
    ("size8Gi", "size8_gi"),
    ("a1b2", "a_1_b2"),
    ("a1b2c3", "a_1_b2c3"),
    ("abc123def456", "abc123def456"),
    ("v1beta1", "v1beta1"),
    ("db2Init", "db2_init"),
    ("db2_init", "db2_init"),
    ("s3Bucket", "s3_bucket"),
    ("ec2InstanceType", "ec2_instance_type"),
    ("IPAddress", "ip_address"),
    ("ipAddress", "ip_address"),
    ("URL", "__url"),
    ("URLs", "__urls"),
    ("myURL", "my_url"),
    ("url", "url"),
    ("HTTPSProxy", "http_s_proxy"),
    ("httpsProxy", "https_proxy"),
    ("HTTPProxy", "http_proxy"),
    ("enableHTTP2", "enable_http_2"),
    ("hostIPs", "host_ips"),
    ("IPv6", "ip_v6"),
    ("SHIP", "_sh_ip"),
    ("ZIPCode", "_z_ip_code"),
    ("HTTPIP", "http__ip"),
    ("IPsIPs", "_ips_i_ps"),
    ("APIVersion", "_api_version"),
    ("apiVersion", "api_version"),
    ("podCIDR", "pod_cidr"),
    ("userID", "user_id"),
    ("OAuth2Token", "_o_auth2_token"),
    ("MySQL", "_my_sql"),
    ("camelCase2Words", "camel_case2_words"),
    ("Éclair", "éclair"),
    ("123", "123"),
    ("1a", "1a"),
    ("a1", "a1"),
    ("customapps-storage", "customapps_storage"),
]

# Further cases, each checked against the Go implementation.
EXTRA = [
    ("a1b2c3d4", "a_1_b2c_3_d4"),  # the digit rule matches left to right, without overlap
    ("x9Y8z", "x_9_y8z"),
    ("HTTPs", "__https"),
    ("getHTTPsURLs", "get_https__urls"),
    ("IPIP", "ip_ip"),  # only the first occurrence of an acronym is isolated
    ("ip", "ip"),
    (" URL", "__url"),
    ("fooBar ", "foo_bar"),
    ("\t", "\t"),  # only spaces are trimmed; a tab is an ordinary character
    ("\u0391\u03a3", "\u03b1\u03c3"),  # Greek "ΑΣ": one code point at a time, no final sigma
    ("İD", "id"),  # Go's simple lower-case mapping of U+0130 is "i"
]


@pytest.mark.parametrize(("key", "expected"), OFFICIAL)
def test_official_vectors(key: str, expected: str) -> None:
    assert to_snake(key) == expected


@pytest.mark.parametrize(("key", "expected"), DERIVED)
def test_derived_vectors(key: str, expected: str) -> None:
    assert to_snake(key) == expected


@pytest.mark.parametrize(("key", "expected"), EXTRA)
def test_extra_vectors(key: str, expected: str) -> None:
    assert to_snake(key) == expected


@pytest.mark.parametrize("key", ["", " ", "   "])
def test_blank_key_is_kept_instead_of_crashing(key: str) -> None:
    assert to_snake(key) == key
    assert map_to_snake({key: 1, "fooBar": 2}) == {key: 1, "foo_bar": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ABC", "abc"),
        ("Éclair", "éclair"),
        ("\u039f\u0394\u039f\u03a3", "\u03bf\u03b4\u03bf\u03c3"),
        ("İ", "i"),
        ("ǅ", "ǆ"),
    ],
)
def test_go_lower(text: str, expected: str) -> None:
    assert go_lower(text) == expected


def test_map_to_snake_leaves_snake_keys_alone() -> None:
    spec = {"var": 1, "var_var": 2, "size_k8s_test": 3, "888": 4}
    assert map_to_snake(spec) == spec


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            {"outerKey": {"innerKey": "camelValue"}},
            {"outer_key": {"inner_key": "camelValue"}},
            id="nested-map",
        ),
        pytest.param(
            {"items": [{"itemName": "a"}, {"itemName": "b", "subList": [{"deepKey": 1}]}]},
            {"items": [{"item_name": "a"}, {"item_name": "b", "sub_list": [{"deep_key": 1}]}]},
            id="maps-in-lists",
        ),
        pytest.param(
            {"matrix": [[{"cellValue": 1}], ["plainString"]]},
            {"matrix": [[{"cell_value": 1}], ["plainString"]]},
            id="lists-in-lists",
        ),
        pytest.param(
            {"labels": {"app.kubernetes.io/name": "x"}},
            {"labels": {"app.kubernetes.io/name": "x"}},
            id="dots-and-slashes-kept",
        ),
        pytest.param(
            {"someKey": "someValue", "list": ["camelCase", 1, None, True]},
            {"some_key": "someValue", "list": ["camelCase", 1, None, True]},
            id="values-untouched",
        ),
        pytest.param([{"aKey": 1}, "bKey"], [{"a_key": 1}, "bKey"], id="top-level-list"),
        pytest.param("notAMap", "notAMap", id="scalar"),
        pytest.param(({"tupleKey": 1},), [{"tuple_key": 1}], id="tuple-becomes-list"),
    ],
)
def test_map_to_snake_recurses_into_keys_only(value: Any, expected: Any) -> None:
    assert map_to_snake(value) == expected


def test_map_to_snake_does_not_modify_its_input() -> None:
    spec = {"outerKey": [{"innerKey": 1}]}
    map_to_snake(spec)
    assert spec == {"outerKey": [{"innerKey": 1}]}


@pytest.mark.parametrize(
    ("keys", "winner"),
    [
        pytest.param(["fooBar", "foo_bar"], "foo_bar", id="snake-key-wins-when-last"),
        pytest.param(["foo_bar", "fooBar"], "foo_bar", id="snake-key-wins-when-first"),
        pytest.param(["fooBar", "foo-bar", "foo_bar"], "foo_bar", id="snake-key-wins-of-three"),
        pytest.param(["fooBar", "foo-bar"], "foo-bar", id="else-first-in-code-point-order"),
        pytest.param(["foo-bar", "fooBar"], "foo-bar", id="order-of-input-irrelevant"),
        pytest.param(["FooBar", "_foo_bar"], "_foo_bar", id="prefixed-snake-key-wins"),
    ],
)
def test_collisions_resolve_deterministically(keys: list[str], winner: str) -> None:
    spec = {key: f"value of {key}" for key in keys}
    converted = to_snake(keys[0])
    assert map_to_snake(spec) == {converted: f"value of {winner}"}


def test_collision_inside_nested_map_uses_same_rule() -> None:
    spec = {"outer": [{"fooBar": 1, "foo_bar": 2}]}
    assert map_to_snake(spec) == {"outer": [{"foo_bar": 2}]}


def test_collision_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="ansible_operator.launch.snakecase"):
        map_to_snake({"fooBar": 1, "foo_bar": 2})
    assert "'fooBar'" in caplog.text
    assert "'foo_bar'" in caplog.text
