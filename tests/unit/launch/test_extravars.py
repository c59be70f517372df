"""launch.extravars and runner.extravarsfile: the variables of one Ansible run and the text
of env/extravars."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from ansible_operator.launch.extravars import META_VAR, build_extravars, mark_unsafe, object_key
from ansible_operator.runner.extravarsfile import render

GROUP = "cache.example.com"
KIND = "Memcached"
OBJ = "_cache_example_com_memcached"
SPEC = f"{OBJ}_spec"


def memcached(spec: Any = None, *, namespace: str | None = "default") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "sample", "uid": "1234"}
    if namespace is not None:
        metadata["namespace"] = namespace
    cr: dict[str, Any] = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": KIND,
        "metadata": metadata,
    }
    if spec is not None:
        cr["spec"] = spec
    return cr


def build(cr: dict[str, Any], **options: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"snake_case": True, "mark_unsafe": False}
    settings.update(options)
    return build_extravars(cr, group=GROUP, kind=KIND, **settings)


def unsafe(text: str) -> dict[str, str]:
    return {"__ansible_unsafe": text}


# -- object_key -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        ("cache.example.com", "Memcached", "_cache_example_com_memcached"),
        ("", "Secret", "__secret"),
        ("operator-with-dash.example.com", "Example", "_operator_with_dash_example_com_example"),
        ("apps", "Deployment", "_apps_deployment"),
        ("Cache.Example.COM", "MemCached", "_Cache_Example_COM_memcached"),
        ("a-b.c-d", "X-Y.Z", "_a_b_c_d_x_y_z"),
    ],
)
def test_object_key(group: str, kind: str, expected: str) -> None:
    assert object_key(group, kind) == expected


# -- the whole shape ------------------------------------------------------------------


def test_shape_with_snake_case() -> None:
    cr = memcached({"replicaCount": 3, "podTemplate": {"imageName": "x"}})
    assert build(cr) == {
        "replica_count": 3,
        "pod_template": {"image_name": "x"},
        META_VAR: {"name": "sample", "namespace": "default"},
        OBJ: cr,
        SPEC: {"replicaCount": 3, "podTemplate": {"imageName": "x"}},
    }


def test_object_and_raw_spec_are_never_snake_cased() -> None:
    cr = memcached({"someKey": {"innerKey": 1}})
    extravars = build(cr)
    assert extravars[SPEC] == {"someKey": {"innerKey": 1}}
    assert extravars[OBJ]["spec"] == {"someKey": {"innerKey": 1}}
    assert extravars[OBJ]["apiVersion"] == "cache.example.com/v1alpha1"


def test_snake_case_off_passes_keys_through() -> None:
    cr = memcached({"camelCaseVar": "true", "nested": {"innerKey": 1}, "snake_key": 2})
    extravars = build(cr, snake_case=False)
    assert extravars["camelCaseVar"] == "true"
    assert extravars["nested"] == {"innerKey": 1}
    assert extravars["snake_key"] == 2
    assert "camel_case_var" not in extravars


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(None, id="missing"),
        pytest.param("a string", id="string"),
        pytest.param(["a", "list"], id="list"),
        pytest.param(42, id="number"),
    ],
)
def test_spec_that_is_not_a_map_counts_as_empty(spec: Any) -> None:
    cr = memcached(spec)
    extravars = build(cr)
    assert extravars[SPEC] == {}
    assert set(extravars) == {META_VAR, OBJ, SPEC}
    # The object itself is shown as it is.
    assert extravars[OBJ] == cr


@pytest.mark.parametrize(
    ("cr", "meta"),
    [
        pytest.param(memcached({}), {"name": "sample", "namespace": "default"}, id="namespaced"),
        pytest.param(
            memcached({}, namespace=None), {"name": "sample", "namespace": ""}, id="cluster"
        ),
        pytest.param({"spec": {}}, {"name": "", "namespace": ""}, id="no-metadata"),
        pytest.param(
            {"metadata": {"name": 7, "namespace": None}},
            {"name": "", "namespace": ""},
            id="odd-types",
        ),
    ],
)
def test_meta_has_only_name_and_namespace(cr: dict[str, Any], meta: dict[str, str]) -> None:
    assert build(cr)[META_VAR] == meta


# -- precedence -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec_key", "name"),
    [
        pytest.param("ansibleOperatorMeta", META_VAR, id="meta-beats-spec"),
        pytest.param(OBJ, OBJ, id="object-beats-spec"),
        pytest.param(SPEC, SPEC, id="raw-spec-beats-spec"),
    ],
)
def test_operator_vars_beat_spec_keys(spec_key: str, name: str) -> None:
    cr = memcached({spec_key: "from spec"})
    extravars = build(cr)
    expected = {
        META_VAR: {"name": "sample", "namespace": "default"},
        OBJ: cr,
        SPEC: {spec_key: "from spec"},
    }
    assert extravars[name] == expected[name]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({}, "from spec", id="spec-alone"),
        pytest.param({"watch_vars": {"log_level": "watch"}}, "watch", id="watch-beats-spec"),
        pytest.param({"finalizer_vars": {"log_level": "fin"}}, "fin", id="finalizer-beats-spec"),
        pytest.param(
            {"watch_vars": {"log_level": "watch"}, "finalizer_vars": {"log_level": "fin"}},
            "fin",
            id="finalizer-beats-watch",
        ),
    ],
)
def test_author_vars_beat_spec_keys(options: dict[str, Any], expected: str) -> None:
    extravars = build(memcached({"logLevel": "from spec"}), **options)
    assert extravars["log_level"] == expected


@pytest.mark.parametrize("name", [META_VAR, OBJ, SPEC])
def test_watch_vars_beat_operator_vars(name: str) -> None:
    extravars = build(memcached({}), watch_vars={name: "watch"})
    assert extravars[name] == "watch"


@pytest.mark.parametrize("name", [META_VAR, OBJ, SPEC])
def test_finalizer_vars_beat_everything(name: str) -> None:
    extravars = build(memcached({}), watch_vars={name: "watch"}, finalizer_vars={name: "fin"})
    assert extravars[name] == "fin"


# -- mark_unsafe ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("testVal", unsafe("testVal"), id="string"),
        pytest.param("", unsafe(""), id="empty-string"),
        pytest.param("__^&{__)", unsafe("__^&{__)"), id="odd-characters"),
        pytest.param(
            "{{ lookup('pipe', 'id') }}", unsafe("{{ lookup('pipe', 'id') }}"), id="jinja"
        ),
        pytest.param(3, 3, id="int"),
        pytest.param(1.5, 1.5, id="float"),
        pytest.param(True, True, id="bool"),
        pytest.param(None, None, id="null"),
        pytest.param({"a": "val1", "b": 2}, {"a": unsafe("val1"), "b": 2}, id="dict-values-only"),
        pytest.param(
            ["val1", 2, ["val2"]], [unsafe("val1"), 2, [unsafe("val2")]], id="nested-list"
        ),
        pytest.param(
            {"list": [{"key": "val"}], "map": {"deep": {"deeper": "x"}}},
            {"list": [{"key": unsafe("val")}], "map": {"deep": {"deeper": unsafe("x")}}},
            id="nested-dict",
        ),
        pytest.param(("a",), [unsafe("a")], id="tuple"),
        pytest.param(MappingProxyType({"k": "v"}), {"k": unsafe("v")}, id="any-mapping"),
    ],
)
def test_mark_unsafe_shapes(value: Any, expected: Any) -> None:
    assert mark_unsafe(value) == expected


def test_mark_unsafe_does_not_modify_input() -> None:
    value = {"a": ["b", {"c": "d"}]}
    mark_unsafe(value)
    assert value == {"a": ["b", {"c": "d"}]}


def test_everything_from_the_object_is_marked() -> None:
    cr = memcached({"fooBar": "x", "count": 3, "nested": {"list": ["y", 1]}})
    extravars = build(cr, mark_unsafe=True)
    assert extravars["foo_bar"] == unsafe("x")
    assert extravars["count"] == 3
    assert extravars["nested"] == {"list": [unsafe("y"), 1]}
    assert extravars[SPEC] == {
        "fooBar": unsafe("x"),
        "count": 3,
        "nested": {"list": [unsafe("y"), 1]},
    }
    assert extravars[OBJ]["metadata"]["name"] == unsafe("sample")
    assert extravars[OBJ]["kind"] == unsafe(KIND)
    assert extravars[OBJ]["spec"] == extravars[SPEC]


def test_operator_side_vars_are_not_marked() -> None:
    extravars = build(
        memcached({"a": "b"}),
        mark_unsafe=True,
        watch_vars={"watch_var": "{{ 1 + 1 }}", "watch_list": ["w"]},
        finalizer_vars={"fin_var": "{{ 2 + 2 }}"},
    )
    assert extravars[META_VAR] == {"name": "sample", "namespace": "default"}
    assert extravars["watch_var"] == "{{ 1 + 1 }}"
    assert extravars["watch_list"] == ["w"]
    assert extravars["fin_var"] == "{{ 2 + 2 }}"


def test_nothing_is_marked_when_off() -> None:
    extravars = build(memcached({"a": "{{ x }}"}), mark_unsafe=False)
    assert extravars["a"] == "{{ x }}"
    assert extravars[SPEC] == {"a": "{{ x }}"}
    assert extravars[OBJ]["metadata"]["name"] == "sample"


# -- independence from the inputs -----------------------------------------------------


def test_inputs_are_neither_modified_nor_shared() -> None:
    cr = memcached({"items": [{"name": "a"}]})
    watch_vars = {"shared": {"list": [1]}}
    extravars = build(cr, snake_case=False, watch_vars=watch_vars)
    extravars["items"][0]["name"] = "changed"
    extravars[OBJ]["spec"]["items"].append("more")
    extravars["shared"]["list"].append(2)
    assert cr["spec"] == {"items": [{"name": "a"}]}
    assert watch_vars == {"shared": {"list": [1]}}
    assert extravars[SPEC] == {"items": [{"name": "a"}]}


def test_accepts_read_only_mappings() -> None:
    cr = MappingProxyType({"metadata": MappingProxyType({"name": "n"}), "spec": {"k": ("v",)}})
    extravars = build_extravars(cr, group="g", kind="K", snake_case=True, mark_unsafe=False)
    assert extravars == {
        "k": ["v"],
        META_VAR: {"name": "n", "namespace": ""},
        "_g_k": {"metadata": {"name": "n"}, "spec": {"k": ["v"]}},
        "_g_k_spec": {"k": ["v"]},
    }
    json.loads(render(extravars))


# -- render ---------------------------------------------------------------------------


def test_render_is_compact_and_sorted_at_every_level() -> None:
    value = {"b": 1, "a": {"d": [1, {"z": 0, "y": None}], "c": True}, "B": "x"}
    assert render(value) == '{"B":"x","a":{"c":true,"d":[1,{"y":null,"z":0}]},"b":1}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("é中😀", '"é中😀"', id="non-ascii-as-utf8"),
        pytest.param(2**70, "1180591620717411303424", id="large-int"),
        pytest.param(-(2**64), "-18446744073709551616", id="large-negative-int"),
        pytest.param("<a&b>", '"\\u003ca\\u0026b\\u003e"', id="go-html-escapes"),
        pytest.param("\u2028\u2029", '"\\u2028\\u2029"', id="line-separators"),
        pytest.param('q"\\\n\t\b\f\x01\x7f', '"q\\"\\\\\\n\\t\\b\\f\\u0001\x7f"', id="controls"),
        pytest.param("\ud800x", '"\ufffdx"', id="lone-surrogate"),
        pytest.param(1.0, "1", id="whole-float"),
        pytest.param(-0.0, "-0", id="negative-zero"),
        pytest.param(0.1, "0.1", id="tenth"),
        pytest.param(1e-6, "0.000001", id="small-fixed"),
        pytest.param(1e-7, "1e-7", id="small-exponent"),
        pytest.param(1.5e-10, "1.5e-10", id="smaller-exponent"),
        pytest.param(1e20, "100000000000000000000", id="large-fixed"),
        pytest.param(1e21, "1e+21", id="large-exponent"),
        pytest.param(123456789.5, "123456789.5", id="plain"),
    ],
)
def test_render_values_like_go(value: Any, text: str) -> None:
    assert render({"v": value}) == '{"v":' + text + "}"


def test_render_round_trips_built_extravars() -> None:
    cr = memcached({"sizeGi": 2**63, "names": ["é", "{{ x }}"], "ratio": 0.25, "on": False})
    extravars = build(cr, mark_unsafe=True, watch_vars={"w": [1, "2"]})
    assert json.loads(render(extravars)) == extravars


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param({"v": float("nan")}, ValueError, id="nan"),
        pytest.param({"v": float("inf")}, ValueError, id="infinity"),
        pytest.param({"v": {1, 2}}, TypeError, id="set"),
        pytest.param({"v": b"bytes"}, TypeError, id="bytes"),
        pytest.param({"v": {1: "int key"}}, TypeError, id="non-string-key"),
    ],
)
def test_render_refuses_what_json_cannot_hold(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        render(value)


@pytest.mark.parametrize(
    ("spec_key", "var_name"),
    [
        ("ansibleBecomeExe", "ansible_become_exe"),
        ("ansible_connection", "ansible_connection"),
        ("ansibleShellExecutable", "ansible_shell_executable"),
        ("ansiblePythonInterpreter", "ansible_python_interpreter"),
    ],
)
def test_secure_default_drops_spec_keys_that_would_set_ansible_variables(
    spec_key: str, var_name: str
) -> None:
    cr = {
        "metadata": {"name": "n", "namespace": "ns"},
        "spec": {spec_key: "touch /tmp/x", "size": 1},
    }
    marked = build_extravars(cr, group="g.io", kind="K", snake_case=True, mark_unsafe=True)
    assert var_name not in marked
    assert spec_key not in marked
    assert marked["size"] == 1
    # the raw spec stays visible to roles that want to read it
    assert spec_key in marked["_g_io_k_spec"]
    unmarked = build_extravars(cr, group="g.io", kind="K", snake_case=True, mark_unsafe=False)
    assert var_name in unmarked or spec_key in unmarked
