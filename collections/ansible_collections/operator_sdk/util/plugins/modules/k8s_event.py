#!/usr/bin/python
"""operator_sdk.util.k8s_event: record a core/v1 Event about an object.

Where this sits: called by roles an ansible-operator runs, to tell users about
their custom resources in `kubectl describe`. Arguments and repeat semantics follow the
upstream collection (v0.5.0): calling it again with the same name updates the
existing Event, counting repeats of the same reason, rather than creating a
second one. docs/collection.md lists where this implementation differs.
"""

import time

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.operator_sdk.util.plugins.module_utils import kube

DOCUMENTATION = r"""
module: k8s_event
short_description: Create or update a Kubernetes Event
version_added: "0.0.1"
author: ansible-operator (Python) maintainers
description:
  - Records a core/v1 Event, usually about the custom resource being reconciled.
  - A second call with the same I(name) updates that Event; when its I(reason) is unchanged,
    C(count) grows by one and C(firstTimestamp) is kept, as Kubernetes aggregates repeats.
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  state:
    description: C(present) creates or updates the Event, C(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  name:
    description: Name of the Event.
    type: str
    required: true
  namespace:
    description: Namespace of the Event; must be the involved object's namespace.
    type: str
    required: true
  merge_type:
    description: Accepted for compatibility with upstream, which ignores it too.
    type: list
    elements: str
    choices: [json, merge, strategic-merge]
  message:
    description: Human-readable description. Required when I(state=present).
    type: str
  reason:
    description: Short, machine-readable reason, e.g. C(ScalingUp). Required when I(state=present).
    type: str
  reportingComponent:
    description: Name of the controller that emits the Event, e.g. C(memcached-operator).
    type: str
  reportingInstance:
    description: ID of the controller instance, e.g. the pod name.
    type: str
  type:
    description: Event type.
    type: str
    choices: [Normal, Warning]
  source:
    description: Legacy event source.
    type: dict
    suboptions:
      component:
        description: Component that reports the Event.
        type: str
        required: true
      host:
        description: Node name, when the reporter is node-bound.
        type: str
  involvedObject:
    description:
      - The object the Event is about. Its C(uid) and C(resourceVersion) are looked up when
        the object exists and I(uid) is not given.
    type: dict
    suboptions:
      apiVersion:
        description: API version of the object.
        type: str
        required: true
      kind:
        description: Kind of the object.
        type: str
        required: true
      name:
        description: Name of the object.
        type: str
        required: true
      namespace:
        description: Namespace of the object; omit for cluster-scoped objects.
        type: str
      uid:
        description: UID of the object.
        type: str
      fieldPath:
        description: Part of the object the Event is about, e.g. C(spec.containers{app}).
        type: str
  appendTimestamp:
    description:
      - Append C(.<hexadecimal Unix nanoseconds>) to I(name), so every call creates a new Event.
    type: bool
    default: false
requirements:
  - kubernetes >= 24.2.0
  - the kubernetes.core collection
"""

EXAMPLES = r"""
- name: Tell users the CR is being scaled
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-scaling"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: ScalingUp
    message: "Scaling to {{ size }} replicas"
    type: Normal
    reportingComponent: memcached-operator
    source:
      component: memcached-operator
    involvedObject:
      apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"
"""

RETURN = r"""
result:
  description: The Event as stored (for I(state=absent), the deleted Event, if any).
  returned: success
  type: dict
"""

ARGUMENT_SPEC = {
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "merge_type": {
        "type": "list",
        "elements": "str",
        "choices": ["json", "merge", "strategic-merge"],
    },
    "message": {"type": "str"},
    "reason": {"type": "str"},
    "reportingComponent": {"type": "str"},
    "reportingInstance": {"type": "str"},
    "type": {"type": "str", "choices": ["Normal", "Warning"]},
    "source": {
        "type": "dict",
        "options": {"component": {"type": "str", "required": True}, "host": {"type": "str"}},
    },
    "involvedObject": {
        "type": "dict",
        "options": {
            "apiVersion": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
            "uid": {"type": "str"},
            "fieldPath": {"type": "str"},
        },
    },
    "appendTimestamp": {"type": "bool", "default": False},
}


class EventWriter:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.k8s = kube.client(module)
        self.events = kube.find_resource(self.k8s, "Event", "v1")
        self.now = kube.utc_now()
        self.name = self.params["name"]
        if self.params["appendTimestamp"] and self.params["state"] == "present":
            # client-go's recorder names events the same way: unique, and a valid name.
            self.name = f"{self.name}.{time.time_ns():x}"

    def get(self):
        """The current Event as a dict, or None."""
        try:
            return self.events.get(name=self.name, namespace=self.params["namespace"]).to_dict()
        except kube.DynamicApiError as exc:
            if kube.is_not_found(exc):
                return None
            raise

    def involved_object(self):
        wanted = kube.without_none(self.params["involvedObject"])
        if not wanted or wanted.get("uid"):
            return wanted
        resource = kube.find_resource(self.k8s, wanted["kind"], wanted["apiVersion"])
        if resource is None:
            return wanted  # a kind this cluster does not serve: record the reference as given
        try:
            found = resource.get(name=wanted["name"], namespace=wanted.get("namespace"))
        except kube.DynamicApiError as exc:
            if not kube.is_not_found(exc):
                self.module.warn(f"Could not look up the involved object: {to_native(exc)}")
            return wanted
        wanted["uid"] = found.metadata.uid
        wanted["resourceVersion"] = found.metadata.resourceVersion
        return wanted

    def desired(self, involved):
        # None stays: in the merge patch of an existing Event it clears what this
        # call does not set (as upstream's patch did); create() drops it.
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.params["namespace"]},
            "message": self.params["message"],
            "reason": self.params["reason"],
            "reportingComponent": self.params["reportingComponent"],
            "reportingInstance": self.params["reportingInstance"],
            "type": self.params["type"],
            "source": kube.without_none(self.params["source"]),
            "involvedObject": involved or None,
        }

    def present(self):
        body = self.desired(self.involved_object())

        def attempt():
            current = self.get()
            event = dict(body, count=1, firstTimestamp=self.now, lastTimestamp=self.now)
            if current is None:
                if self.module.check_mode:
                    return {"changed": True, "result": kube.without_none(event)}
                created = self.events.create(
                    body=kube.without_none(event), namespace=self.params["namespace"]
                )
                return {"changed": True, "result": created.to_dict()}
            if current.get("reason") == self.params["reason"]:
                # A repeat: count it, as the kubelet and client-go aggregate Events.
                event["count"] = (current.get("count") or 1) + 1
                event["firstTimestamp"] = current.get("firstTimestamp") or self.now
            if self.module.check_mode:
                return {"changed": True, "result": kube.without_none(dict(current, **event))}
            event["metadata"] = dict(
                event["metadata"], resourceVersion=current["metadata"]["resourceVersion"]
            )
            patched = self.events.patch(
                body=event,
                name=self.name,
                namespace=self.params["namespace"],
                content_type="application/merge-patch+json",
            ).to_dict()
            return {"changed": patched != current, "result": patched}

        return kube.with_conflict_retry(attempt)

    def absent(self):
        current = self.get()
        if current is None:
            return {"changed": False, "result": {}}
        if not self.module.check_mode:
            try:
                self.events.delete(name=self.name, namespace=self.params["namespace"])
            except kube.DynamicApiError as exc:
                if not kube.is_not_found(exc):
                    raise
        return {"changed": True, "result": current}

    def run(self):
        try:
            if self.params["state"] == "absent":
                return self.absent()
            return self.present()
        except kube.DynamicApiError as exc:
            verb = "delete" if self.params["state"] == "absent" else "create"
            self.module.fail_json(
                msg=f"Unable to {verb} event: {to_native(exc)}",
                error=kube.api_error(exc),
            )
        return None  # not reached


def main():
    spec = kube.auth_arg_spec()
    spec.update(ARGUMENT_SPEC)
    module = kube.module(
        spec,
        supports_check_mode=True,
        required_if=[("state", "present", ["message", "reason"])],
    )
    module.exit_json(**EventWriter(module).run())


if __name__ == "__main__":
    main()
