"""The extra vars of one Ansible run, built from the custom resource in one pass.

Where this sits: launch/request.py's `build_run_request` calls `build_extravars`
with the object as it stands when the run starts and the watch's settings; the
runner writes the result to `env/extravars` (runner/extravarsfile.py), which
ansible-runner hands to ansible-playbook as `-e @env/extravars`. Extra vars have
the highest precedence in Ansible, so nothing in a role overrides them.

What happens to the object, in this order (each step is one function below):

1. `check_depth`: an object nested deeper than `MAX_DEPTH` below a top-level field
   is refused with errors.InvalidResource naming the field and the path, so the
   reconciler reports it instead of starting a run Ansible could not template;
2. `_spec_variables`: one copy of the `spec` map that, in the same walk,
   snake_cases every key the Go way (launch/snakecase.py, unless the watch sets
   `snakeCaseParameters: false`) and wraps every string as unsafe (unless the
   watch sets `markUnsafe: false`); then, with `markUnsafe`, top-level keys that
   would set Ansible's own `ansible_*` variables are dropped;
3. `ansible_operator_meta`: `{"name", "namespace"}` of the object;
4. `_<group>_<kind>`: the whole object, and `_<group>_<kind>_spec`: its spec as
   written (never snake_cased), both marked like the spec variables;
5. the watch's `vars`, then, on finalizer runs, the finalizer's `vars` (from the
   operator's author: never marked); each later name replaces an earlier one.

These are the Go operator's variables, so roles written for it run unchanged.
Deliberate difference: strings are marked unsafe unless the watch sets
`markUnsafe: false` (the Go operator's default is false): marked strings are data
to Ansible, never templates, so `{{ lookup('pipe', ...) }}` in a custom resource
cannot run commands in the operator pod (docs/security.md). Every walk is
iterative (launch/jsontree.py), so no depth the API server accepts raises
RecursionError; docs/runner.md explains the depth limit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ansible_operator.errors import InvalidResource
from ansible_operator.launch.jsontree import deeper_than, describe_path, rebuild
from ansible_operator.launch.snakecase import go_lower, snake_pairs

__all__ = [
    "MAX_DEPTH",
    "META_VAR",
    "UNSAFE_MARKER",
    "build_extravars",
    "check_depth",
    "mark_unsafe",
    "object_key",
]

_log = logging.getLogger(__name__)

# Ansible's JSON decoder turns {"__ansible_unsafe": "text"} into an unsafe string.
UNSAFE_MARKER = "__ansible_unsafe"
META_VAR = "ansible_operator_meta"

#: How many levels of maps and lists a top-level field of a custom resource may
#: have (`spec: {a: {b: 1}}` has 2). Real CRDs stay below about 30. Ansible
#: 2.19 fails to template a value into task arguments from about 160 levels,
#: and to load extra vars at all from about 480 (docs/runner.md has the figures).
MAX_DEPTH = 100
# metadata.managedFields mirrors spec and status 4 levels further down
# (managedFields[i].fieldsV1.f:spec...), so metadata is allowed that much more.
_METADATA_EXTRA_DEPTH = 4


def object_key(group: str, kind: str) -> str:
    """The name of the variable holding the whole object: `_<group>_<kind lower-cased>`.

    Dots and dashes become underscores so the name is a valid Ansible variable;
    the group keeps its case. The core group is empty, hence `__secret`.
    """
    return f"_{group}_{go_lower(kind)}".replace(".", "_").replace("-", "_")


def mark_unsafe(value: Any) -> Any:
    """`value` with every string in it wrapped as `{"__ansible_unsafe": string}`.

    Lists are rebuilt element by element and maps value by value (keys are never
    wrapped: the marker only exists for values). Numbers, booleans and null are
    returned as they are. The input is not modified.
    """
    return rebuild(value, leaf=_wrap_string)


def _wrap_string(value: Any) -> Any:
    return {UNSAFE_MARKER: value} if isinstance(value, str) else value


def _same(value: Any) -> Any:
    return value


def _string_field(mapping: Any, field: str) -> str:
    # Like the Go accessors GetName/GetNamespace: missing or not a string reads as "".
    if isinstance(mapping, Mapping):
        found = mapping.get(field)
        if isinstance(found, str):
            return found
    return ""


def _without_connection_vars(
    top_level: Mapping[str, Any], metadata: Any, kind: str
) -> dict[str, Any]:
    """Drop spec keys that would become Ansible's own `ansible_*` variables.

    Extra vars outrank the inventory, so a CR setting `ansibleBecomeExe` or
    `ansible_connection` would choose what the operator executes; marking the
    value unsafe does not help because Ansible uses it as a setting, not as a
    template. With the secure default such keys never reach the run (the raw
    spec stays readable in `_<group>_<kind>_spec`); `markUnsafe: false`
    restores the reference's behaviour.
    """
    kept = {}
    for key, value in top_level.items():
        if isinstance(key, str) and key.lower().startswith("ansible_"):
            _log.warning(
                "%s/%s %s: spec key %r is not passed to Ansible: it would set one of "
                "Ansible's own variables (set markUnsafe: false to allow it)",
                _string_field(metadata, "namespace"),
                _string_field(metadata, "name"),
                kind,
                key,
            )
            continue
        kept[key] = value
    return kept


def check_depth(cr: Mapping[str, Any]) -> None:
    """Raise InvalidResource if a top-level field of `cr` is nested deeper than MAX_DEPTH.

    spec is checked first, then status, then the rest, so the message names the
    field the user wrote rather than its mirror in metadata.managedFields.
    """
    order = {"spec": 0, "status": 1}
    for field in sorted(cr, key=lambda name: order.get(name, 2)):
        limit = MAX_DEPTH + (_METADATA_EXTRA_DEPTH if field == "metadata" else 0)
        path = deeper_than(cr[field], limit)
        if path is not None:
            raise InvalidResource(
                f"{field} nested deeper than {limit} levels at {describe_path(str(field), path)}:"
                f" the operator passes at most {MAX_DEPTH} levels to Ansible"
            )


def build_extravars(
    cr: Mapping[str, Any],
    *,
    group: str,
    kind: str,
    snake_case: bool,
    mark_unsafe: bool,
    watch_vars: Mapping[str, Any] | None = None,
    finalizer_vars: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The extra vars for one run against `cr`, in the order the module docstring gives.

    `snake_case` and `mark_unsafe` are the watch's `snakeCaseParameters` and
    `markUnsafe`. Pass `finalizer_vars` only for a finalizer run. A `spec` that is
    missing or not a map counts as `{}` for the spec-derived variables;
    `_<group>_<kind>` still shows the object as it is. Raises
    errors.InvalidResource for an object nested too deep (`check_depth`).
    """
    check_depth(cr)
    metadata = cr.get("metadata")
    spec = cr.get("spec")
    if not isinstance(spec, Mapping):
        _log.info(
            "%s/%s %s has no spec map; its spec variables are empty",
            _string_field(metadata, "namespace"),
            _string_field(metadata, "name"),
            kind,
        )
        spec = {}
    leaf = _wrap_string if mark_unsafe else _same
    extravars = _spec_variables(spec, snake_case=snake_case, leaf=leaf)
    if mark_unsafe:
        extravars = _without_connection_vars(extravars, metadata, kind)
    # Names only (Kubernetes restricts their characters), so never marked.
    extravars[META_VAR] = {
        "namespace": _string_field(metadata, "namespace"),
        "name": _string_field(metadata, "name"),
    }
    key = object_key(group, kind)
    extravars[key] = rebuild(cr, leaf=leaf)
    extravars[f"{key}_spec"] = rebuild(spec, leaf=leaf)
    extravars.update(rebuild(watch_vars or {}))
    extravars.update(rebuild(finalizer_vars or {}))
    return extravars


def _spec_variables(spec: Mapping[str, Any], *, snake_case: bool, leaf: Any) -> dict[str, Any]:
    """One copy of `spec`: keys snake_cased at every depth (or kept), strings passed
    through `leaf` (wrapped as unsafe, or kept)."""
    if snake_case:
        copied: dict[str, Any] = rebuild(spec, pairs=snake_pairs, leaf=leaf)
    else:
        copied = rebuild(spec, leaf=leaf)
    return copied
