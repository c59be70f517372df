"""Copies and depth checks of JSON-like trees (maps, lists, scalars) without recursion.

Where this sits: launch/extravars.py turns a custom resource into a run's extra
vars. It first asks `deeper_than` whether any field is nested beyond the
operator's limit (and refuses the resource with a message made by
`describe_path`), then copies the object with `rebuild`, once per variable,
renaming keys (launch/snakecase.py) and wrapping strings in the same walk.

Both walk with an explicit stack, so their cost is bounded by the size of
the tree, never by Python's recursion limit: an object of any depth the API
server accepts gets an answer instead of a RecursionError.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["Path", "deeper_than", "describe_path", "rebuild"]

Path = tuple[str | int, ...]

#: Turns one map into the (key, value) pairs of its copy.
Pairs = Callable[[Mapping[Any, Any]], Iterable[tuple[Any, Any]]]


def _items(mapping: Mapping[Any, Any]) -> Iterable[tuple[Any, Any]]:
    return mapping.items()


def _same(value: Any) -> Any:
    return value


def _is_container(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple)


def rebuild(value: Any, *, pairs: Pairs = _items, leaf: Callable[[Any], Any] = _same) -> Any:
    """A copy of `value` made of plain dicts and lists, whatever its depth.

    Every Mapping becomes a dict whose entries are `pairs(mapping)`; every list
    or tuple becomes a list; every other value `v` becomes `leaf(v)`. The copy
    shares no container with the input, and keeps the input's order.
    """
    if not _is_container(value):
        return leaf(value)
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, Mapping) else []
    pending: list[tuple[Any, dict[Any, Any] | list[Any]]] = [(value, root)]
    while pending:
        source, target = pending.pop()
        entries = pairs(source) if isinstance(source, Mapping) else enumerate(source)
        for key, child in entries:
            if _is_container(child):
                copy: Any = {} if isinstance(child, Mapping) else []
                pending.append((child, copy))
            else:
                copy = leaf(child)
            if isinstance(target, dict):
                target[key] = copy
            else:
                target.append(copy)
    return root


def deeper_than(value: Any, limit: int) -> Path | None:
    """The first path of more than `limit` keys/indices in `value`, or None.

    Depth counts the keys and list indices from `value` down to a leaf: in
    `{"a": {"b": 1}}` the path `a.b` has depth 2; a scalar or an empty map has
    depth 0. The returned path has exactly `limit + 1` elements. The walk never
    goes below `limit`, so it costs at most the size of the tree's first
    `limit` levels.
    """
    # Each entry: a node, its depth and its trail, a linked list (key, parent's trail)
    # that makes pushing a child O(1); a path is only spelled out for the answer.
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 0, ())]
    while stack:
        node, depth, trail = stack.pop()
        if not _is_container(node) or not node:
            continue
        entries = list(node.items() if isinstance(node, Mapping) else enumerate(node))
        if depth == limit:
            return _spell(trail, entries[0][0])
        # Reversed, so that the first key is explored first and the answer is stable.
        stack.extend((child, depth + 1, (key, trail)) for key, child in reversed(entries))
    return None


def _spell(trail: tuple[Any, ...], last: str | int) -> Path:
    keys: list[str | int] = [last]
    while trail:
        key, trail = trail
        keys.append(key)
    return tuple(reversed(keys))


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def describe_path(root: str, path: Sequence[str | int], *, shown: int = 6, width: int = 40) -> str:
    """`path` under `root` for a message: `spec.a.b[0]["x.y"]`, bounded in length.

    Only the first `shown` elements are written (then `…`), each key cut to
    `width` characters, so a path thousands of levels deep, or a key a
    megabyte long, still makes a short message.
    """
    parts = [root]
    for element in path[:shown]:
        if isinstance(element, int):
            parts.append(f"[{element}]")
            continue
        key = str(element)
        short = key if len(key) <= width else key[:width] + "…"
        parts.append(
            f".{short}"
            if _PLAIN_KEY.fullmatch(key)
            else f"[{json.dumps(short, ensure_ascii=False)}]"
        )
    if len(path) > shown:
        parts.append("…")
    return "".join(parts)
