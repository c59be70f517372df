"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) on plain dicts, as the API server does.

Used by kube.fakekube.FakeKube to apply the patches the operator sends
(controller.finalizers' JSON patches with a `test` of the resourceVersion,
merge patches of metadata or status) to its in-memory objects. Errors are the
API server's: a patch that cannot be applied, including a failed `test`, is
a 422 ApiError, never a Conflict.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ansible_operator.errors import ApiError

_UNPROCESSABLE = 422


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge key by key, `null` removes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def json_patch(document: dict[str, Any], ops: Any) -> dict[str, Any]:
    """RFC 6902 `add`, `remove`, `replace` and `test` on a copy of `document`; all or nothing."""
    if not isinstance(ops, list) or not all(isinstance(op, Mapping) for op in ops):
        raise _invalid("a JSON patch must be a list of operations")
    result = copy.deepcopy(document)
    for op in ops:
        kind, path = op.get("op"), _pointer(op.get("path"))
        if not path:
            raise _invalid(f"{kind} of the whole document is not supported")
        parent, last = _parent(result, path)
        if kind == "test":
            if _child(parent, last, path) != op.get("value"):
                raise _invalid(f"testing value {op.get('path')} failed")
        elif kind == "add":
            _add(parent, last, copy.deepcopy(op.get("value")), path)
        elif kind == "replace":
            _child(parent, last, path)  # must exist
            _put(parent, last, copy.deepcopy(op.get("value")), path)
        elif kind == "remove":
            _child(parent, last, path)
            if isinstance(parent, list):
                parent.pop(_index(parent, last, path))
            else:
                del parent[last]
        else:
            raise _invalid(f"unsupported JSON patch operation {kind!r}")
    return result


def _invalid(message: str) -> ApiError:
    return ApiError(_UNPROCESSABLE, message, reason="Invalid")


def _pointer(path: object) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise _invalid(f"invalid JSON pointer {path!r}")
    # RFC 6901: "~1" is "/" and "~0" is "~", decoded in that order.
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _parent(document: Any, path: list[str]) -> tuple[Any, str]:
    node = document
    for depth, part in enumerate(path[:-1]):
        node = _child(node, part, path[: depth + 1])
    if not isinstance(node, dict | list):
        raise _invalid(f"doc is missing path: /{'/'.join(path)}")
    return node, path[-1]


def _child(node: Any, part: str, path: list[str]) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list):
        return node[_index(node, part, path)]
    raise _invalid(f"doc is missing path: /{'/'.join(path)}")


def _index(node: list[Any], part: str, path: list[str], *, allow_end: bool = False) -> int:
    limit = len(node) + 1 if allow_end else len(node)
    if not part.isdigit() or int(part) >= limit:
        raise _invalid(f"index out of range: /{'/'.join(path)}")
    return int(part)


def _add(parent: Any, part: str, value: Any, path: list[str]) -> None:
    if isinstance(parent, list):
        at = len(parent) if part == "-" else _index(parent, part, path, allow_end=True)
        parent.insert(at, value)
    else:
        parent[part] = value


def _put(parent: Any, part: str, value: Any, path: list[str]) -> None:
    if isinstance(parent, list):
        parent[_index(parent, part, path)] = value
    else:
        parent[part] = value
