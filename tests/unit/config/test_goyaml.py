"""YAML 1.1 as go-yaml v2 reads it (not as PyYAML does), and scalars stringified as Go does."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_operator.config.goyaml import (
    DecodeFailure,
    format_float32,
    parse_yaml,
    resolve_scalar,
)
from ansible_operator.config.watches import WatchesError
from tests.unit.config import load_text, make_project

TRUE_SPELLINGS = ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"]
FALSE_SPELLINGS = ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"]


@pytest.mark.parametrize("text", TRUE_SPELLINGS)
def test_true_spellings(text: str) -> None:
    assert resolve_scalar(text) == ("bool", True)


@pytest.mark.parametrize("text", FALSE_SPELLINGS)
def test_false_spellings(text: str) -> None:
    assert resolve_scalar(text) == ("bool", False)


@pytest.mark.parametrize("text", ["y", "Y", "n", "N"])
def test_single_letters_differ_from_pyyaml(text: str) -> None:
    # The reason for our own loader: PyYAML's safe loader keeps these strings.
    assert isinstance(yaml.safe_load(f"k: {text}")["k"], str)
    assert isinstance(parse_yaml(f"k: {text}")["k"], bool)


@pytest.mark.parametrize("text", ["tRUE", "yES", "oN", "ok", "nope", "t", "f", "1yes"])
def test_other_spellings_are_strings(text: str) -> None:
    assert resolve_scalar(text) == ("str", text)


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("", ("null", None)),
        ("~", ("null", None)),
        ("null", ("null", None)),
        ("Null", ("null", None)),
        ("NULL", ("null", None)),
        ("nULL", ("str", "nULL")),
        ("0", ("int", 0)),
        ("+5", ("int", 5)),
        ("-5", ("int", -5)),
        ("0x1F", ("int", 31)),
        ("0o17", ("int", 15)),
        ("017", ("int", 15)),
        ("0b101", ("int", 5)),
        ("1_000", ("int", 1000)),
        ("9223372036854775808", ("int", 9223372036854775808)),  # fits uint64
        ("-9223372036854775809", ("float", -9223372036854775809.0)),
        ("18446744073709551616", ("float", 18446744073709551616.0)),
        ("1e3", ("float", 1000.0)),
        ("08", ("float", 8.0)),
        ("1.", ("float", 1.0)),
        (".5", ("float", 0.5)),
        ("-.5", ("float", -0.5)),
        ("1.5e-3", ("float", 0.0015)),
        (".inf", ("float", math.inf)),
        ("-.Inf", ("float", -math.inf)),
        ("1e400", ("str", "1e400")),  # out of range: Go keeps the text
        ("1:20", ("str", "1:20")),  # no sexagesimal ints, unlike PyYAML
        ("2024-01-01", ("str", "2024-01-01")),  # timestamps stay text
        ("0x", ("str", "0x")),
        ("1e", ("str", "1e")),
        ("+", ("str", "+")),
        ("v1", ("str", "v1")),
    ],
)
def test_plain_scalar_resolution(text: str, resolved: tuple[str, Any]) -> None:
    assert resolve_scalar(text) == resolved


def test_nan_resolves_to_a_float() -> None:
    kind, value = resolve_scalar(".NaN")
    assert kind == "float"
    assert math.isnan(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (1.1, "1.1"),
        (0.5, "0.5"),
        (-0.0, "-0"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (16777217.0, "1.6777216e+07"),  # rounded to float32 first
        (3.141592653589793, "3.1415927"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e-10, "1e-10"),
        (1e100, ".inf"),  # beyond float32
        (-math.inf, "-.inf"),
        (math.nan, ".nan"),
    ],
)
def test_float_formatting_is_gos_32_bit_g(value: float, text: str) -> None:
    assert format_float32(value) == text


def test_map_keys_become_strings_without_collisions() -> None:
    data = parse_yaml("{on: a, n: b, 1: c, 1.50: d, true: e, 2024-01-01: f}")
    # 1 and true would be the same Python dict key; as strings they are not.
    assert data == {"true": "e", "false": "b", "1": "c", "1.5": "d", "2024-01-01": "f"}


def test_null_key_is_refused() -> None:
    with pytest.raises(DecodeFailure, match="unsupported map key of type null"):
        parse_yaml("~: value")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("k: !!str 5", "5"),
        ("k: !!int '7'", 7),
        ("k: !!float 1", 1.0),
        ("k: !!bool 'yes'", True),
        ("k: !!timestamp 2024-01-01", "2024-01-01"),
        ("k: !!binary aGk=", "hi"),
        ("k: <<", "<<"),
    ],
)
def test_explicit_tags(text: str, value: Any) -> None:
    assert parse_yaml(text)["k"] == value


def test_explicit_tag_that_does_not_fit_is_an_error() -> None:
    with pytest.raises(DecodeFailure, match=r"cannot decode !!str `abc` as a !!int"):
        parse_yaml("k: !!int abc")


def test_merge_keys_work() -> None:
    assert parse_yaml("a: &base {x: 1}\nb:\n  <<: *base\n  z: 2\n")["b"] == {"x": 1, "z": 2}


def test_only_the_first_document_counts() -> None:
    assert parse_yaml("- a\n---\n- b\n") == ["a"]


def test_empty_text_is_none() -> None:
    assert parse_yaml("") is None
    assert parse_yaml("# only a comment\n") is None


def _entry(extra: str) -> str:
    return f"- version: v1\n  group: shop.example.org\n  kind: Basket\n  role: basket\n{extra}"


@pytest.mark.parametrize("text", TRUE_SPELLINGS)
def test_every_true_spelling_sets_a_bool_key(tmp_path: Path, text: str) -> None:
    (watch,) = load_text(_entry(f"  watchClusterScopedResources: {text}\n"), make_project(tmp_path))
    assert watch.watch_cluster_scoped_resources is True


@pytest.mark.parametrize("text", FALSE_SPELLINGS)
def test_every_false_spelling_clears_a_bool_key(tmp_path: Path, text: str) -> None:
    (watch,) = load_text(_entry(f"  manageStatus: {text}\n"), make_project(tmp_path))
    assert watch.manage_status is False


@pytest.mark.parametrize("text", ["tRUE", "1", "'yes'", "enabled"])
def test_non_boolean_in_bool_key_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(WatchesError) as caught:
        load_text(_entry(f"  manageStatus: {text}\n"), make_project(tmp_path))
    assert caught.value.key == "manageStatus"
    assert "of type bool" in str(caught.value)


@pytest.mark.parametrize(
    ("written", "version"),
    [
        ("1", "1"),
        ("1.10", "1.1"),
        ("1.0", "1"),
        ("true", "true"),
        ("yes", "true"),
        ("0x10", "16"),
        ("1_000", "1000"),
        ("012", "10"),
        ("08", "8"),
        ("1e6", "1e+06"),
        ("'1.10'", "1.10"),
        ("2024-01-01", "2024-01-01"),
        ("9223372036854775808", "9223372036854775808"),
    ],
)
def test_scalars_for_string_keys_are_stringified(
    tmp_path: Path, written: str, version: str
) -> None:
    text = f"- version: {written}\n  group: 2\n  kind: on\n  role: basket\n"
    (watch,) = load_text(text, make_project(tmp_path))
    assert (watch.group, watch.version, watch.kind) == ("2", version, "true")


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("3", 3),
        ("1.0", 1),
        ("2.5", 2.5),
        ("1e3", 1000),
        ("-0.0", 0),
        ("9007199254740993", 9007199254740992),  # float64 round trip, as in Go
        ("1e21", 1e21),
        ("0o17", 15),
        ("yes", True),
        ("'yes'", "yes"),
        ("1:20", "1:20"),
        ("~", None),
    ],
)
def test_vars_values_go_through_json(tmp_path: Path, written: str, value: Any) -> None:
    (watch,) = load_text(_entry(f"  vars:\n    v: {written}\n"), make_project(tmp_path))
    assert watch.vars == {"v": value}
    assert type(watch.vars["v"]) is type(value)


def test_bool_looking_keys_in_vars_become_true_and_false(tmp_path: Path) -> None:
    (watch,) = load_text(_entry("  vars:\n    on: 1\n    n: 2\n    7: 3\n"), make_project(tmp_path))
    assert watch.vars == {"true": 1, "false": 2, "7": 3}


def test_control_characters_are_refused_on_one_line() -> None:
    with pytest.raises(DecodeFailure) as caught:
        parse_yaml("- version: v1\x01\n")
    assert caught.value.problem.startswith("invalid YAML: unacceptable character #x0001")
    assert "\n" not in caught.value.problem
    assert caught.value.reference is None


def test_syntax_errors_carry_gos_form_but_constructor_errors_do_not() -> None:
    with pytest.raises(DecodeFailure) as caught:
        parse_yaml("a: b: c\n")
    assert caught.value.reference == (
        "error converting YAML to JSON: yaml: line 1: mapping values are not allowed in this "
        "context"
    )
    with pytest.raises(DecodeFailure) as caught:
        parse_yaml("a: !local x\n")
    assert caught.value.reference is None
