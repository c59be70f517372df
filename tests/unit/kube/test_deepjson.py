"""kube.deepjson: json.loads / json.dumps results at any depth the API server accepts.

Each table runs twice: through the public function (C fast path for shallow
documents) and through the iterative fallback directly, which must give the
same answer as the json module for every document, shallow or not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from ansible_operator.kube import deepjson

DECODERS: list[Callable[[str], Any]] = [deepjson.loads, deepjson._decode]
ENCODERS: list[Callable[[Any], str]] = [deepjson.dumps, deepjson._encode]


def nested_text(depth: int, leaf: str = "1") -> str:
    return '{"a":' * depth + leaf + "}" * depth


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


VALID = [
    "null",
    "true",
    "false",
    "0",
    "-0",
    "12",
    "-12.5e-3",
    "1E+400",
    "123456789012345678901234567890",
    "NaN",
    "Infinity",
    "-Infinity",
    '""',
    '"plain"',
    r'"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"',
    '"ключ 名前 😀"',
    "[]",
    "{}",
    ' \t\n\r[ 1 , [ ] , { } , "x" ] \n',
    '{"a": 1, "a": 2}',
    '{"": {"x.y": [1, {"z": null}]}, "with space": true}',
    '[[[[[[["deep-ish"]]]]]]]',
]


@pytest.mark.parametrize("decode", DECODERS, ids=["loads", "iterative"])
@pytest.mark.parametrize("text", VALID)
def test_decodes_like_json(decode: Callable[[str], Any], text: str) -> None:
    # Compared as JSON text: NaN is not equal to itself.
    assert json.dumps(decode(text)) == json.dumps(json.loads(text))


INVALID = [
    "",
    " ",
    "{",
    "[",
    "[1,]",
    "[1 2]",
    '{"a" 1}',
    '{"a":1,}',
    "{1:2}",
    '{"a":[}',
    "tru",
    '"open',
    '"bad \\x escape"',
    '"control \x01 char"',
    "01",
    "1 2",
    "{} x",
]


@pytest.mark.parametrize("decode", DECODERS, ids=["loads", "iterative"])
@pytest.mark.parametrize("text", INVALID)
def test_refuses_what_json_refuses(decode: Callable[[str], Any], text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        decode(text)


@pytest.mark.parametrize("depth", [50, 990, 1500, 10_000])
def test_any_depth_decodes(depth: int) -> None:
    text = nested_text(depth, '[1, {"b": "c"}, []]')
    value = deepjson.loads(text)
    for _ in range(depth):
        value = value["a"]
    assert value == [1, {"b": "c"}, []]


@pytest.mark.parametrize(
    "data",
    [
        nested_text(1500).encode("utf-8"),
        nested_text(1500).encode("utf-16"),
        b"\xef\xbb\xbf" + nested_text(1500).encode("utf-8"),
        bytearray(nested_text(1500).encode("utf-8")),
    ],
    ids=["utf-8", "utf-16", "utf-8 with BOM", "bytearray"],
)
def test_bytes_are_decoded_as_json_loads_decodes_them(data: bytes) -> None:
    # Compared as text: == on objects this deep would itself raise RecursionError.
    assert deepjson.dumps(deepjson.loads(data)) == nested_text(1500)


def test_a_deep_error_is_still_a_decode_error_with_its_position() -> None:
    text = nested_text(2000)[:-1]  # one closing brace short
    with pytest.raises(json.JSONDecodeError) as caught:
        deepjson.loads(text)
    assert caught.value.pos == len(text)


ENCODABLE: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2**70,
    1.5,
    -0.0,
    1e-7,
    1e300,
    math.inf,
    -math.inf,
    "",
    'quote " backslash \\ control \x01 ' + "é 😀 \u2028",
    "\ud800 lone surrogate",
    [],
    {},
    (1, 2),
    {"a": [1, {"b": None}], "": "empty key", "ключ": "значение"},
    {7: "int key", 2.5: "float key", True: "bool key", None: "null key"},
]


@pytest.mark.parametrize("encode", ENCODERS, ids=["dumps", "iterative"])
@pytest.mark.parametrize("value", ENCODABLE, ids=repr)
def test_encodes_like_compact_json_dumps(encode: Callable[[Any], str], value: Any) -> None:
    assert encode(value) == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("encode", ENCODERS, ids=["dumps", "iterative"])
def test_nan_is_written_as_json_dumps_writes_it(encode: Callable[[Any], str]) -> None:
    assert encode([math.nan]) == "[NaN]"


@pytest.mark.parametrize("depth", [50, 1500, 10_000])
def test_any_depth_encodes_and_round_trips(depth: int) -> None:
    value = nested(depth, [1, {"b": "ключ"}, []])
    text = deepjson.dumps(value)
    assert text == nested_text(depth, '[1,{"b":"\\u043a\\u043b\\u044e\\u0447"},[]]')
    assert deepjson.dumps(deepjson.loads(text)) == text


def _circular() -> Any:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize("encode", ENCODERS, ids=["dumps", "iterative"])
@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({1, 2}, TypeError),
        ({"a": object()}, TypeError),
        ({(1, 2): "tuple key"}, TypeError),
        (b"bytes", TypeError),
        (_circular(), ValueError),
    ],
    ids=["set", "object", "tuple key", "bytes", "circular"],
)
def test_refuses_what_json_cannot_hold(
    encode: Callable[[Any], str], value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        encode(value)


def test_a_deep_circular_reference_is_refused_not_looped() -> None:
    top: dict[str, Any] = {}
    bottom = top
    for _ in range(2000):
        bottom["a"] = {}
        bottom = bottom["a"]
    bottom["back"] = top
    with pytest.raises((ValueError, RecursionError)):
        json.dumps(top)
    with pytest.raises(ValueError, match="Circular"):
        deepjson.dumps(top)


def test_the_same_container_twice_side_by_side_is_not_a_cycle() -> None:
    shared = nested(1200)
    assert (
        deepjson._encode([shared, shared])
        == "[" + nested_text(1200) + "," + nested_text(1200) + "]"
    )
