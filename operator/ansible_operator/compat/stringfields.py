"""Numbers where Kubernetes wants strings, sent as ansible-core 2.18 sent them.

Where it sits: the API proxy (proxy.handler) hands every write body of a run to
`ApiProxy.compat_body`, which calls `coerce()` here when the 2.18-compatibility mode
is active (compat.mode: on, and ansible-core 2.19 or later installed). Nothing else
calls it.

Why: on ansible-core 2.18 a template with a filter or an expression rendered to a
string (`"{{ (n | int) + 1 }}"` gave `"4"`); from 2.19 on it keeps its type (`4`).
Where Kubernetes types the field as a string (a ConfigMap's `data`, a label, an
annotation, a container's `env[].value` or `args`), the API server refuses the number
with 422 ("cannot unmarshal number into Go struct field ... of type string"). Here
such a number becomes its decimal text, `str()` as 2.18's templating made it, so the
API server gets what 2.18 sent.

What a ported role sends is never changed: the only values touched are numbers
(int or float, never a bool) at paths whose Kubernetes type is string, which the API
server refuses anyway. Booleans are left alone because 2.18 sent them as booleans
too (`"{{ a == b }}"` gave `True`), and so were refused on both lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Coercion", "coerce", "string_paths"]

Path = tuple[str, ...]
"""A field path; "*" matches every key of a map or every item of a list."""

_ANY = "*"
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Relative to a PodSpec: map[string]string and []string fields a role templates.
_POD_SPEC: tuple[Path, ...] = (
    *((c, _ANY, "env", _ANY, "value") for c in _CONTAINER_LISTS),
    *((c, _ANY, "args", _ANY) for c in _CONTAINER_LISTS),
    *((c, _ANY, "command", _ANY) for c in _CONTAINER_LISTS),
    ("nodeSelector", _ANY),
)
# Relative to an object's (or a pod template's) metadata holder.
_META: tuple[Path, ...] = (
    ("metadata", "labels", _ANY),
    ("metadata", "annotations", _ANY),
)
_MATCH_LABELS: Path = ("selector", "matchLabels", _ANY)


def _template(prefix: Path) -> tuple[Path, ...]:
    """The string fields of a PodTemplateSpec found at `prefix`."""
    return (
        *((*prefix, *meta) for meta in _META),
        *((*prefix, "spec", *field) for field in _POD_SPEC),
    )


_WORKLOAD = (*_template(("spec", "template")), ("spec", *_MATCH_LABELS))
_BY_KIND: dict[tuple[str, str], tuple[Path, ...]] = {
    ("", "ConfigMap"): (("data", _ANY),),
    ("", "Secret"): (("stringData", _ANY),),
    ("", "Pod"): tuple(("spec", *field) for field in _POD_SPEC),
    ("", "PodTemplate"): _template(("template",)),
    ("", "ReplicationController"): (*_template(("spec", "template")), ("spec", "selector", _ANY)),
    ("", "Service"): (("spec", "selector", _ANY),),
    ("apps", "Deployment"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("batch", "Job"): _WORKLOAD,
    ("batch", "CronJob"): (
        *_template(("spec", "jobTemplate", "spec", "template")),
        ("spec", "jobTemplate", "spec", *_MATCH_LABELS),
        *(("spec", "jobTemplate", *meta) for meta in _META),
    ),
}


def string_paths(*, group: str, kind: str) -> tuple[Path, ...]:
    """Every string-typed path of `kind` the mode looks at (labels and annotations
    for every kind, custom resources included: the API server types them as strings)."""
    return _META + _BY_KIND.get((group, kind), ())


@dataclass(frozen=True, slots=True)
class Coercion:
    """One number sent as text: where (a JSON-pointer-like path) and what."""

    path: str
    value: int | float

    @property
    def text(self) -> str:
        return str(self.value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _walk(node: Any, path: Path, done: Path) -> Iterator[tuple[Any, str | int, Path]]:
    """(container, key, full path) of each value at `path` under `node`."""
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys: list[str | int] = list(node) if head == _ANY else [head] if head in node else []
    elif isinstance(node, list) and head == _ANY:
        keys = list(range(len(node)))
    else:
        return
    for key in keys:
        child = node[key]
        where = (*done, str(key))
        if rest:
            yield from _walk(child, rest, where)
        else:
            yield node, key, where


def coerce(obj: dict[str, Any], *, group: str, kind: str) -> list[Coercion]:
    """Turn numbers at string-typed paths of `obj` into text, in place; say which."""
    found: list[Coercion] = []
    for path in string_paths(group=group, kind=kind):
        for container, key, where in _walk(obj, path, ()):
            value = container[key]
            if _is_number(value):
                container[key] = str(value)
                found.append(Coercion(path="/".join(where), value=value))
    return found
