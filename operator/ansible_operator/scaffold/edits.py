"""Edits of files a user may have changed: marker insertions and the PROJECT file.

`create api` (:mod:`.api`) never regenerates a file that exists: it inserts
a fragment before a marker line (``#+kubebuilder:scaffold:rules`` and the
like, the markers SDK projects carry), indented like the marker, and leaves
every other line as the user left it. `init` (:mod:`.project`) writes the
PROJECT file, `create api` records each new API in it. Errors are
:class:`~ansible_operator.errors.ConfigError` naming the file.
"""

from __future__ import annotations

from typing import Any

import yaml

from ansible_operator.config import defaults
from ansible_operator.errors import ConfigError

PROJECT_FILE = "PROJECT"
_PROJECT_HEADER = (
    "# Written by ansible-operator init and create api (the Python ansible-operator);\n"
    "# the same format as the Operator SDK's. Tools read it: edit with care.\n"
)


def insert_before_marker(text: str, *, marker: str, fragment: str, path: str) -> str:
    """``text`` with ``fragment`` inserted above the line ``marker``, at the marker's indentation.

    A fragment whose lines are all present already, in order, is not
    inserted again. A missing marker is an error: without it we cannot know
    where the user wants new entries.
    """
    lines = text.splitlines(keepends=True)
    found = [i for i, line in enumerate(lines) if line.strip() == marker]
    if not found:
        raise ConfigError(
            f"{path}: the marker line {marker!r} is missing; put it back where "
            "`create api` should add new entries"
        )
    index = found[0]
    indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
    new = [f"{indent}{row}\n" if row.strip() else "\n" for row in fragment.splitlines()]
    if "".join(new) in text:
        return text
    return "".join([*lines[:index], *new, *lines[index:]])


def new_project(*, domain: str, project_name: str) -> dict[str, Any]:
    return {
        "domain": domain,
        "layout": [defaults.SCAFFOLD_LAYOUT],
        "projectName": project_name,
        "version": "3",
    }


def dump_project(project: dict[str, Any]) -> str:
    return _PROJECT_HEADER + yaml.safe_dump(project, default_flow_style=False, sort_keys=True)


def load_project(text: str) -> dict[str, Any]:
    """The PROJECT file of an initialized project, checked enough for `create api`."""
    try:
        project = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{PROJECT_FILE}: not valid YAML: {err}".splitlines()[0]) from err
    if not isinstance(project, dict):
        raise ConfigError(f"{PROJECT_FILE}: expected a mapping with domain, layout, projectName")
    for key in ("domain", "projectName"):
        if not isinstance(project.get(key), str) or not project[key]:
            raise ConfigError(f"{PROJECT_FILE}: key {key!r} is missing or not a string")
    resources = project.get("resources", [])
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        raise ConfigError(f"{PROJECT_FILE}: key 'resources' must be a list of mappings")
    return project
