"""Extra vars from custom resources of any shape the API server accepts (issue 10, part 2).

Each case is one custom resource through `build_extravars` and `render`, the
way the reconciler and the runner use them: it either becomes extra vars that
render to valid JSON, or raises InvalidResource with a short message naming
the field, the limit and where it is crossed. Nothing may raise anything else
(RecursionError used to, from about 330 levels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from ansible_operator.errors import InvalidResource, Permanent
from ansible_operator.kube import deepjson
from ansible_operator.launch.extravars import MAX_DEPTH, UNSAFE_MARKER, build_extravars, mark_unsafe
from ansible_operator.launch.snakecase import map_to_snake
from ansible_operator.runner.extravarsfile import render

TOO_DEEP = "spec nested deeper than 100 levels at spec.a.a.a.a.a.a…"


def nested(depth: int, key: str = "a", leaf: Any = "leaf") -> Any:
    """`depth` keys deep: {key: {key: ... {key: leaf}}}."""
    value = leaf
    for _ in range(depth):
        value = {key: value}
    return value


def managed_fields_for(spec_depth: int) -> list[dict[str, Any]]:
    """The API server's mirror of a nested spec in metadata.managedFields."""
    fields: Any = {}
    for _ in range(spec_depth):
        fields = {".": {}, "f:a": fields}
    return [{"manager": "test", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": fields}}]


def cr(spec: Any, **top: Any) -> dict[str, Any]:
    metadata = {"name": "n", "namespace": "ns", "uid": "u", **top.pop("metadata", {})}
    return {"apiVersion": "g/v1", "kind": "Kind", "metadata": metadata, "spec": spec, **top}


def unsafe(value: str) -> dict[str, str]:
    return {UNSAFE_MARKER: value}


@dataclass(frozen=True)
class Case:
    name: str
    obj: dict[str, Any] = field(repr=False)
    error: str | None = None  # the InvalidResource message must contain this
    spec_vars: dict[str, Any] | None = None  # top-level extra vars the spec must become


ONE_MIB = {f"k{index:04d}": "x" * 1024 for index in range(1024)}

CASES = [
    Case("depth 50", cr(nested(50))),
    Case(
        "depth 100, the limit", cr(nested(100), metadata={"managedFields": managed_fields_for(100)})
    ),
    Case("depth 101", cr(nested(101)), error=TOO_DEEP),
    Case("depth 400", cr(nested(400)), error=TOO_DEEP),
    Case("depth 600", cr(nested(600)), error=TOO_DEEP),
    Case(
        "depth 1200",
        cr(nested(1200), metadata={"managedFields": managed_fields_for(1200)}),
        error=TOO_DEEP,
    ),
    Case("depth 1500", cr(nested(1500)), error=TOO_DEEP),
    Case("depth 9995, the API server's own limit", cr(nested(9995)), error=TOO_DEEP),
    Case(
        "1 MiB spec", cr(ONE_MIB), spec_vars={key: unsafe(value) for key, value in ONE_MIB.items()}
    ),
    Case(
        "keys with dots",
        cr({"a.b": "x", "c.d": {"e.f": 1}}),
        spec_vars={"a.b": unsafe("x"), "c.d": {"e.f": 1}},
    ),
    Case(
        "keys with spaces",
        cr({"with space": 1, " padded ": 2}),
        spec_vars={"with_space": 1, "padded": 2},
    ),
    Case(
        "unicode keys",
        cr({"ключ": "значение", "名前": "値", "emoji😀": "✓", "ÜberName": 1}),
        spec_vars={
            "ключ": unsafe("значение"),
            "名前": unsafe("値"),
            "emoji😀": unsafe("✓"),
            "über_name": 1,
        },
    ),
    Case("empty key", cr({"": "x", " ": "y"}), spec_vars={"": unsafe("x"), " ": unsafe("y")}),
    Case(
        "colliding keys",
        cr({"fooBar": "camel", "foo_bar": "snake"}),
        spec_vars={"foo_bar": unsafe("snake")},
    ),
    Case(
        "colliding keys, other order",
        cr({"foo_bar": "snake", "fooBar": "camel"}),
        spec_vars={"foo_bar": unsafe("snake")},
    ),
    Case(
        "colliding keys, deep down",
        cr({"x": {"fooBar": 1, "foo_bar": 2}}),
        spec_vars={"x": {"foo_bar": 2}},
    ),
    Case(
        "status nested too deep",
        cr({}, status=nested(101, key="s")),
        error="status nested deeper than 100 levels at status.s.s.s.s.s.s…",
    ),
    Case(
        "metadata nested beyond the managedFields mirror",
        cr({}, metadata={"annotations": {}, "managedFields": [{"fieldsV1": nested(102)}]}),
        error="metadata nested deeper than 104 levels at metadata.managedFields[0].fieldsV1.a.a.a…",
    ),
    Case(
        "spec that is a deep list",
        cr({"l": [[[[[[[[[[1]]]]]]]]]]}),
        spec_vars={"l": [[[[[[[[[[1]]]]]]]]]]},
    ),
    Case(
        "spec of lists too deep",
        cr({"l": nested(100, key="k", leaf=[1])}),
        error="at spec.l.k.k.k.k.k…",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize(("snake_case", "unsafe_marking"), [(True, True), (False, False)])
def test_every_resource_becomes_extra_vars_or_a_clear_error(
    case: Case, snake_case: bool, unsafe_marking: bool
) -> None:
    def build() -> dict[str, Any]:
        return build_extravars(
            case.obj, group="g", kind="Kind", snake_case=snake_case, mark_unsafe=unsafe_marking
        )

    if case.error is not None:
        with pytest.raises(InvalidResource) as caught:
            build()
        message = str(caught.value)
        assert case.error in message
        assert f"at most {MAX_DEPTH} levels" in message
        assert len(message) < 300
        return
    extravars = build()
    text = render(extravars)
    assert json.loads(text) == extravars, "env/extravars holds exactly the extra vars"
    raw_spec = extravars["_g_kind_spec"]
    assert deepjson.dumps(raw_spec) == deepjson.dumps(
        mark_unsafe(case.obj["spec"]) if unsafe_marking else case.obj["spec"]
    )
    if snake_case and unsafe_marking and case.spec_vars is not None:
        assert {key: extravars[key] for key in case.spec_vars} == case.spec_vars


def test_invalid_resource_is_permanent() -> None:
    # The reconciler reports Permanent errors once, as a Failure condition and Event.
    assert issubclass(InvalidResource, Permanent)


@pytest.mark.parametrize("depth", [50, 400, 600, 1200, 1500])
def test_snake_case_conversion_has_no_depth_limit_of_its_own(depth: int) -> None:
    converted = map_to_snake(nested(depth, key="fooBar", leaf=[{"someKey": "v"}]))
    assert deepjson.dumps(converted) == deepjson.dumps(
        nested(depth, key="foo_bar", leaf=[{"some_key": "v"}])
    )


@pytest.mark.parametrize("depth", [50, 1500])
def test_unsafe_marking_has_no_depth_limit_of_its_own(depth: int) -> None:
    assert deepjson.dumps(mark_unsafe(nested(depth))) == deepjson.dumps(
        nested(depth, leaf=unsafe("leaf"))
    )
