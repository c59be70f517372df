"""The scaffold's file templates (package data under scaffold/templates/) and their rendering.

Used by :mod:`ansible_operator.scaffold.project` (the files of `init`) and
:mod:`ansible_operator.scaffold.api` (the files and fragments of `create
api`). A template is a plain file whose placeholders are written
``@@name@@``: that syntax collides neither with Jinja (molecule playbooks,
roles), nor with make's ``$(...)``, nor with shell ``${...}``. Stored names
that start with ``dot-`` become dot files (``dot-gitignore`` is
``.gitignore``), because package data tools skip dot files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable

_PLACEHOLDER = re.compile(r"@@([a-z_]+)@@")
_DOT_PREFIX = "dot-"


def _root() -> Traversable:
    return resources.files("ansible_operator.scaffold").joinpath("templates")


def render_text(text: str, values: Mapping[str, str]) -> str:
    """Replace every ``@@name@@``; a name without a value is a bug in the caller."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template placeholder @@{name}@@ has no value")
        return values[name]

    return _PLACEHOLDER.sub(value, text)


def render(name: str, values: Mapping[str, str]) -> str:
    """One template, by its path under templates/ (e.g. ``api/crd.yaml``)."""
    return render_text(_root().joinpath(name).read_text(encoding="utf-8"), values)


def output_name(stored: str) -> str:
    """Where a stored template path goes in the project (``dot-x`` parts become ``.x``)."""
    parts = stored.split("/")
    return "/".join("." + p[len(_DOT_PREFIX) :] if p.startswith(_DOT_PREFIX) else p for p in parts)


def tree(directory: str) -> Iterator[str]:
    """Every template file under ``directory`` (a path under templates/), relative to it, sorted."""

    def walk(node: Traversable, prefix: str) -> Iterator[str]:
        for child in sorted(node.iterdir(), key=lambda entry: entry.name):
            if child.name == "__pycache__":
                continue
            path = f"{prefix}{child.name}"
            if child.is_dir():
                yield from walk(child, path + "/")
            else:
                yield path

    yield from walk(_root().joinpath(directory), "")
