"""Kubernetes plumbing shared by the k8s_status and k8s_event modules.

Where this sits: imported by plugins/modules/k8s_status.py and k8s_event.py
(AnsiballZ ships it with them). Client creation and authentication are
delegated to kubernetes.core's module_utils, so the auth options, the
K8S_AUTH_* environment fallbacks (which the operator sets to point at its
API proxy), in-cluster config and the discovery cache behave exactly like
kubernetes.core's own k8s / k8s_info modules.
"""

import copy
import time
from datetime import datetime, timezone

from ansible.module_utils.common.text.converters import to_native

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import (
        AUTH_ARG_SPEC as _K8S_AUTH_ARG_SPEC,
    )
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import (
        get_api_client,
    )
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import (
        AnsibleK8SModule,
    )
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import (
        CoreException,
    )

    HAS_K8S_CORE = True
except ImportError:  # reported by module() below, in Ansible's usual words
    _K8S_AUTH_ARG_SPEC = {}
    HAS_K8S_CORE = False

try:
    from kubernetes.dynamic.exceptions import (
        ConflictError,
        DynamicApiError,
        NotFoundError,
        ResourceNotFoundError,
        ResourceNotUniqueError,
    )
except ImportError:  # AnsibleK8SModule fails the task with missing_required_lib('kubernetes')
    ConflictError = DynamicApiError = NotFoundError = None
    ResourceNotFoundError = ResourceNotUniqueError = None


# How often a read-modify-write is retried when the object changed under us
# (409 Conflict). Reads may come from the operator's cache, which lags the API
# server by a moment, so a short back-off usually suffices.
CONFLICT_ATTEMPTS = 5
CONFLICT_BACKOFF_SECONDS = 0.2


def utc_now():
    """The current time as Kubernetes writes metav1.Time: RFC 3339, UTC, whole seconds."""
    # timezone.utc, not datetime.UTC: a managed node may run a Python older than 3.11.
    now = datetime.now(timezone.utc)  # noqa: UP017 - see the comment above
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def auth_arg_spec():
    """kubernetes.core's auth options (kubeconfig, context, host, api_key, ...), a fresh copy."""
    return copy.deepcopy(_K8S_AUTH_ARG_SPEC)


def module(argument_spec, **kwargs):
    """An AnsibleModule wrapper that checks the kubernetes library, as kubernetes.core does."""
    if not HAS_K8S_CORE:
        from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: PLC0415 - only on this error path

        bare = AnsibleModule(argument_spec=argument_spec, **kwargs)
        bare.fail_json(msg=missing_required_lib("the kubernetes.core collection"))
    return AnsibleK8SModule(argument_spec=argument_spec, check_pyyaml=False, **kwargs)


def client(mod):
    """A dynamic client authenticated like kubernetes.core's modules, or fail the task."""
    try:
        return get_api_client(mod)
    except CoreException as exc:
        mod.fail_json(msg=to_native(exc))
    except Exception as exc:  # kubeconfig parse errors and the like come in many types
        mod.fail_json(msg=f"Failed to get client due to {to_native(exc)}")
    return None  # not reached: fail_json exits


def find_resource(k8s, kind, api_version):
    """The API resource for kind (or plural, singular, short name) in api_version; None if none."""
    try:
        return k8s.resource(kind, api_version)
    except (ResourceNotFoundError, ResourceNotUniqueError):
        return None


def api_error(exc):
    """What a failed API call tells the playbook: HTTP status, reason and the raw body."""
    return {"status": exc.status, "reason": exc.reason, "body": to_native(exc.body)}


def is_not_found(exc):
    return NotFoundError is not None and isinstance(exc, NotFoundError)


def with_conflict_retry(attempt):
    """Run attempt() again while it raises 409 Conflict, a few times, then let it raise.

    attempt() must re-read the object each time: the write carries the
    resourceVersion it read, so a lost update is reported instead of silently
    overwriting someone else's change.
    """
    for number in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return attempt()
        except ConflictError:
            if number == CONFLICT_ATTEMPTS:
                raise
            time.sleep(CONFLICT_BACKOFF_SECONDS * number)
    return None  # not reached


def without_none(value):
    """value without None-valued keys, recursively (Ansible sets unset suboptions to None)."""
    if isinstance(value, dict):
        return {key: without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_none(item) for item in value]
    return value
