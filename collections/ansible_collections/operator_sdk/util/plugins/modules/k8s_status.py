#!/usr/bin/python
"""operator_sdk.util.k8s_status: set fields and conditions in a resource's status subresource.

Where this sits: called by roles an ansible-operator runs, usually on the CR
being reconciled (through the operator's API proxy, whose address the
K8S_AUTH_* variables carry). Arguments, validation messages and merge rules
are those of the upstream collection (v0.5.0); docs/collection.md lists
where this implementation deliberately differs.
"""

import re

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.operator_sdk.util.plugins.module_utils import kube

DOCUMENTATION = r"""
module: k8s_status
short_description: Set the status of a Kubernetes resource
version_added: "0.0.1"
author: ansible-operator (Python) maintainers
description:
  - Sets keys and conditions in the C(status) subresource of a Kubernetes object, typically the
    custom resource an operator's role is reconciling.
  - The resource's API must serve the C(status) subresource.
  - By default the given status is merged into the current one (JSON merge patch); with
    I(replace) the whole status is replaced.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  api_version:
    description: API version of the object, e.g. C(cache.example.com/v1alpha1).
    type: str
    default: v1
    aliases: [api, version]
  kind:
    description: Kind of the object (its plural, singular or short name also work).
    type: str
    required: true
  name:
    description: Name of the object.
    type: str
    required: true
  namespace:
    description: Namespace of the object; omit for cluster-scoped kinds.
    type: str
  status:
    description:
      - Keys to set on the status. One of I(status) or I(conditions) is normally given.
      - Conditions placed under I(status) are merged by type but not validated.
    type: dict
  conditions:
    description:
      - Conditions to set on C(status.conditions), merged by C(type) with the current ones.
      - A condition replaces the current one of its type only if a field other than
        C(lastTransitionTime) differs; otherwise the current one, with its time, is kept.
      - A condition without C(lastTransitionTime) gets the current one's time when its
        C(status) did not change, else the current time.
      - Cannot be combined with C(status.conditions).
    type: list
    elements: dict
    suboptions:
      type:
        description: Condition type, unique within the list.
        type: str
        required: true
      status:
        description: One of C(True), C(False) or C(Unknown); YAML booleans are accepted.
        type: str
        required: true
        choices: ["True", "False", "Unknown"]
      reason:
        description: One CamelCase word.
        type: str
      message:
        description: Human-readable details.
        type: str
      lastHeartbeatTime:
        description: RFC 3339 date and time.
        type: str
      lastTransitionTime:
        description: RFC 3339 date and time.
        type: str
  replace:
    description: Replace the whole status (PUT) instead of merging into it.
    type: bool
    default: false
    aliases: [force]
  replace_lists:
    description:
      - When deciding whether anything would change, compare lists other than C(conditions)
        for equality rather than asking whether the given items are already present.
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
  - the kubernetes.core collection
"""

EXAMPLES = r"""
- name: Record custom status fields on the CR being reconciled
  operator_sdk.util.k8s_status:
    api_version: cache.example.com/v1alpha1
    kind: Memcached
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      nodes: "{{ pod_names }}"

- name: Add or update a custom condition
  operator_sdk.util.k8s_status:
    api_version: cache.example.com/v1alpha1
    kind: Memcached
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    conditions:
      - type: Available
        status: "False"
        reason: ScalingUp
        message: Waiting for all replicas
"""

RETURN = r"""
result:
  description: The object after the write, or as read when nothing had to change.
  returned: success
  type: dict
"""

# Any run of letters: the same language as upstream's `^(?:[A-Z]*[a-z]*)+$`,
# written without nested quantifiers (which backtrack exponentially on a
# long reason with one bad character).
_REASON = re.compile(r"^[A-Za-z]*$")
_RFC3339 = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?(\.[0-9]+)?"
    r"([+-][0-9]{2}:[0-9]{2}|Z)$"
)
_CONDITION_KEYS = (
    "type",
    "status",
    "reason",
    "message",
    "lastHeartbeatTime",
    "lastTransitionTime",
)
_STATUS_VALUES = ("True", "False", "Unknown")

ARGUMENT_SPEC = {
    "api_version": {"type": "str", "default": "v1", "aliases": ["api", "version"]},
    "kind": {"type": "str", "required": True},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str"},
    "status": {"type": "dict"},
    "conditions": {
        "type": "list",
        "elements": "dict",
        "options": {
            "type": {"type": "str", "required": True},
            "status": {"type": "str", "required": True, "choices": list(_STATUS_VALUES)},
            "reason": {"type": "str"},
            "message": {"type": "str"},
            "lastHeartbeatTime": {"type": "str"},
            "lastTransitionTime": {"type": "str"},
        },
    },
    "replace": {"type": "bool", "default": False, "aliases": ["force"]},
    "replace_lists": {"type": "bool", "default": False},
}


def validate_condition(condition):
    """The condition without unset keys; raises ValueError with upstream's messages."""
    if not isinstance(condition, dict):
        raise ValueError("`conditions` must be a list of objects")
    condition = {key: value for key, value in condition.items() if value is not None}
    if isinstance(condition.get("status"), bool):
        condition["status"] = "True" if condition["status"] else "False"
    for key in condition:
        if key not in _CONDITION_KEYS:
            raise ValueError(
                f"{key} is not a valid field for a condition, "
                f"accepted fields are {list(_CONDITION_KEYS)}"
            )
    for key in ("type", "status"):
        if not condition.get(key):
            raise ValueError(f"Condition `{key}` must be set")
    if condition["status"] not in _STATUS_VALUES:
        raise ValueError(
            'Condition \'status\' must be one of ["True", "False", "Unknown"], not {}'.format(
                condition["status"]
            )
        )
    if condition.get("reason") and not _REASON.match(condition["reason"]):
        raise ValueError("Condition 'reason' must be a single, CamelCase word")
    for key in ("lastHeartbeatTime", "lastTransitionTime"):
        if condition.get(key) and not _RFC3339.match(condition[key]):
            raise ValueError(f"'{key}' must be an RFC3339 compliant datetime string")
    return condition


def _by_type(conditions, kind):
    for index, condition in enumerate(conditions):
        if isinstance(condition, dict) and condition.get("type") == kind:
            return index
    return None


def transitioned(old, new):
    """True if new sets any field other than lastTransitionTime to a different value."""
    return any(key != "lastTransitionTime" and old.get(key) != value for key, value in new.items())


def stamp_transition_times(conditions, current, now):
    """Give each condition lacking lastTransitionTime one, as metav1 conditions expect.

    An unchanged condition status keeps the time the current condition of that
    type carries (so repeated runs are no-ops); anything else is a transition now.
    """
    for condition in conditions:
        if condition.get("lastTransitionTime"):
            continue
        index = _by_type(current, condition["type"])
        old = current[index] if index is not None else {}
        if old.get("status") == condition["status"] and old.get("lastTransitionTime"):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            condition["lastTransitionTime"] = now


def merge_conditions(current, given):
    """current with each given condition merged in by type (kept, replaced or appended)."""
    merged = [dict(c) if isinstance(c, dict) else c for c in current]
    for condition in given:
        typed = isinstance(condition, dict) and "type" in condition
        index = _by_type(merged, condition["type"]) if typed else None
        if index is None:
            if condition not in merged:
                merged.append(condition)
        elif transitioned(merged[index], condition):
            merged[index] = condition
    return merged


def apply_merge_patch(target, patch):
    """target as a JSON merge patch (RFC 7386) would leave it: what check mode reports."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def contains(current, wanted, replace_lists, key=None):
    """Whether writing `wanted` as a merge patch would leave `current` as it is."""
    if isinstance(wanted, dict):
        return isinstance(current, dict) and all(
            contains(current.get(k), v, replace_lists, k) for k, v in wanted.items()
        )
    if isinstance(wanted, list) and isinstance(current, list):
        if replace_lists and key != "conditions":
            return current == wanted
        # upstream's rule: a list is unchanged when it already holds every given item
        return all(item in current for item in wanted)
    return current == wanted


class StatusWriter:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.k8s = None
        self.resource = None

    def desired_status(self):
        """The status parameter with validated conditions folded in, or fail the task."""
        status = dict(self.params["status"] or {})
        try:
            conditions = [validate_condition(c) for c in self.params["conditions"] or []]
        except ValueError as exc:
            self.module.fail_json(
                msg="The specified conditions failed to validate", error=to_native(exc)
            )
        if conditions and status.get("conditions"):
            self.module.fail_json(
                msg="You cannot specify conditions in both the 'status' and 'conditions' parameters"
            )
        return status, conditions

    def run(self):
        status, conditions = self.desired_status()
        self.k8s = kube.client(self.module)
        api_version, kind = self.params["api_version"], self.params["kind"]
        self.resource = kube.find_resource(self.k8s, kind, api_version)
        if self.resource is None:
            self.module.fail_json(
                msg=f"Failed to find exact match for {api_version}.{kind} "
                "by [kind, name, singularName, shortNames]"
            )
        if "status" not in (self.resource.subresources or {}):
            self.module.fail_json(
                msg=f"Resource {self.resource.group_version}.{self.resource.kind} "
                "does not support the status subresource"
            )
        try:
            return kube.with_conflict_retry(lambda: self.write(status, conditions))
        except kube.DynamicApiError as exc:
            self.module.fail_json(
                msg=f"Failed to replace status: {to_native(exc)}",
                error=kube.api_error(exc),
            )
        return None  # not reached

    def read(self):
        try:
            obj = self.resource.get(name=self.params["name"], namespace=self.params["namespace"])
        except kube.DynamicApiError as exc:
            if self.module.check_mode and kube.is_not_found(exc):
                # A plan of a resource not created yet: the status it would get.
                return self.missing()
            self.module.fail_json(
                msg="Failed to retrieve requested object", error=kube.api_error(exc)
            )
        instance = obj.to_dict()
        instance["status"] = instance.get("status") or {}
        return instance

    def missing(self):
        meta = {"name": self.params["name"], "namespace": self.params["namespace"]}
        api_version, kind = self.params["api_version"], self.params["kind"]
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "status": {}}

    def write(self, status, conditions):
        """One read-modify-write; raises ConflictError when the object moved on meanwhile."""
        instance = self.read()
        current = instance["status"]
        current_conditions = current.get("conditions")
        if not isinstance(current_conditions, list):
            current_conditions = []
        now = kube.utc_now()
        conditions = [dict(c) for c in conditions]
        stamp_transition_times(conditions, current_conditions, now)
        if conditions:
            status = dict(status, conditions=conditions)
        if self.params["replace"]:
            return self.put(instance, status)
        return self.patch(instance, status, current_conditions)

    def put(self, instance, status):
        if status == instance["status"]:
            return {"changed": False, "result": instance}
        instance["status"] = status
        if self.module.check_mode:
            return {"changed": True, "result": instance}
        result = self.resource.status.replace(
            body=instance, name=self.params["name"], namespace=self.params["namespace"]
        )
        return {"changed": True, "result": result.to_dict()}

    def patch(self, instance, status, current_conditions):
        if not status:
            return {"changed": False, "result": instance}
        status = dict(status)  # a retry after a conflict starts again from the parameters
        if isinstance(status.get("conditions"), list) and current_conditions:
            status["conditions"] = merge_conditions(current_conditions, status["conditions"])
        if contains(instance["status"], status, self.params["replace_lists"]):
            return {"changed": False, "result": instance}
        if self.module.check_mode:
            instance["status"] = apply_merge_patch(instance["status"], status)
            return {"changed": True, "result": instance}
        # The resourceVersion we read makes the patch conditional: the merged
        # conditions list replaces the stored one, so it must not be stale.
        body = {
            "metadata": {"resourceVersion": instance["metadata"]["resourceVersion"]},
            "status": status,
        }
        result = self.resource.status.patch(
            body=body,
            name=self.params["name"],
            namespace=self.params["namespace"],
            content_type="application/merge-patch+json",
        )
        return {"changed": True, "result": result.to_dict()}


def main():
    spec = kube.auth_arg_spec()
    spec.update(ARGUMENT_SPEC)
    module = kube.module(spec, supports_check_mode=True)
    module.exit_json(**StatusWriter(module).run())


if __name__ == "__main__":
    main()
