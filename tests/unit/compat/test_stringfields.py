"""compat.stringfields: which numbers become text, and which values are never touched."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_operator.compat.stringfields import coerce

POD_SPEC = {
    "containers": [
        {
            "name": "app",
            "image": "app:1",
            "args": ["--port", 8080, "--ratio", 0.5],
            "command": ["run", 1],
            "env": [{"name": "REPLICAS", "value": 3}, {"name": "DEBUG", "value": True}],
            "ports": [{"containerPort": 8080}],
            "resources": {"limits": {"cpu": 1}},
        }
    ],
    "initContainers": [{"name": "init", "env": [{"name": "N", "value": 2}]}],
    "nodeSelector": {"tier": 1},
    "terminationGracePeriodSeconds": 30,
}

# (group, kind, object, the paths that change, what must stay as it is)
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, str], list[tuple[str, ...]]]] = {
    "configmap data": (
        "",
        "ConfigMap",
        {"metadata": {"name": "c", "labels": {"n": 1}}, "data": {"count": 4, "s": "x"}},
        {"data/count": "4", "metadata/labels/n": "1"},
        [("data", "s")],
    ),
    "float as 2.18 printed it": (
        "",
        "ConfigMap",
        {"data": {"ratio": 4.5, "big": 1e20}},
        {"data/ratio": "4.5", "data/big": "1e+20"},
        [],
    ),
    "secret stringData, not data": (
        "",
        "Secret",
        {"stringData": {"port": 5432}, "data": {"raw": 1}},
        {"stringData/port": "5432"},
        [("data", "raw")],
    ),
    "custom resource: labels and annotations only": (
        "example.com",
        "Widget",
        {"metadata": {"annotations": {"a": 2}}, "spec": {"size": 3, "data": {"x": 1}}},
        {"metadata/annotations/a": "2"},
        [("spec", "size"), ("spec", "data", "x")],
    ),
    "deployment: template, selector, env, args": (
        "apps",
        "Deployment",
        {
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"gen": 1}},
                "template": {"metadata": {"labels": {"gen": 1}}, "spec": POD_SPEC},
            }
        },
        {
            "spec/selector/matchLabels/gen": "1",
            "spec/template/metadata/labels/gen": "1",
            "spec/template/spec/containers/0/args/1": "8080",
            "spec/template/spec/containers/0/args/3": "0.5",
            "spec/template/spec/containers/0/command/1": "1",
            "spec/template/spec/containers/0/env/0/value": "3",
            "spec/template/spec/initContainers/0/env/0/value": "2",
            "spec/template/spec/nodeSelector/tier": "1",
        },
        [
            ("spec", "replicas"),
            ("spec", "template", "spec", "terminationGracePeriodSeconds"),
            ("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"),
            ("spec", "template", "spec", "containers", 0, "resources", "limits", "cpu"),
            # A boolean was a boolean on 2.18 too: refused on both lines, left alone.
            ("spec", "template", "spec", "containers", 0, "env", 1, "value"),
        ],
    ),
    "cronjob: the job template's pod": (
        "batch",
        "CronJob",
        {
            "spec": {
                "jobTemplate": {
                    "metadata": {"labels": {"a": 1}},
                    "spec": {"template": {"spec": {"containers": [{"args": [7]}]}}},
                }
            }
        },
        {
            "spec/jobTemplate/metadata/labels/a": "1",
            "spec/jobTemplate/spec/template/spec/containers/0/args/0": "7",
        },
        [],
    ),
    "service selector, not ports": (
        "",
        "Service",
        {"spec": {"selector": {"app": 1}, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"spec/selector/app": "1"},
        [("spec", "ports", 0, "port"), ("spec", "ports", 0, "targetPort")],
    ),
    "a ported role: nothing to change": (
        "",
        "ConfigMap",
        {"metadata": {"labels": {"n": "1"}}, "data": {"count": "4"}},
        {},
        [("data", "count")],
    ),
}


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


@pytest.mark.parametrize(("group", "kind", "obj", "changed", "kept"), CASES.values(), ids=CASES)
def test_numbers_in_string_fields_become_text(
    group: str,
    kind: str,
    obj: dict[str, Any],
    changed: dict[str, str],
    kept: list[tuple[str, ...]],
) -> None:
    before = copy.deepcopy(obj)
    found = coerce(obj, group=group, kind=kind)
    assert {c.path: c.text for c in found} == changed
    for path, text in changed.items():
        parts = tuple(int(p) if p.isdigit() else p for p in path.split("/"))
        assert _get(obj, parts) == text
    for path in kept:
        assert _get(obj, path) == _get(before, path)
