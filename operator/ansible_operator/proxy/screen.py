"""Before a run's write is forwarded: refuse re-creating its own CR; send 2.18's strings.

Where it sits: the API proxy (proxy/server.py) holds one `RequestScreen`, which the
handler calls for every request of a run, right after it read the body and before
ownership (`ApiProxy.plan`); it applies `screen()` with the proxy's discovery
(proxy/discovery.py). Two rules,
each independent of `--inject-owner-ref`:

1. **A run cannot resurrect its own deleted custom resource.** A role that writes
   its own CR with `k8s: state: present` (to patch labels, say) re-creates it when
   the CR was deleted (without a finalizer) while the run was in flight: the GET
   finds nothing, so kubernetes.core POSTs. The re-created CR has a new uid and no
   spec, and nobody asked for it. The Go operator's proxy injected an ownerReference
   to the deleted CR's uid into that POST, so the garbage collector removed the
   re-creation; ours never makes a CR its own owner (docs/proxy.md). So a create of
   the run's own CR (POST, or a server-side apply of it) while it does not exist is
   refused with 403, a warning in the log and a Warning Event on the deleted CR. A
   POST while it exists is forwarded: the API server answers 409 as always.
2. **Numbers in string fields** (compat.stringfields), when the 2.18-compatibility
   mode restores (compat.mode): the body is rewritten and each number sent as text
   is noted on the run's `RunNotes`, which the run's notice observer reports with the
   task that sent it (compat.notices).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_operator.compat import stringfields
from ansible_operator.errors import OperatorError
from ansible_operator.kube import deepjson
from ansible_operator.kube.client import Kube, KubeApi, ResourceInfo
from ansible_operator.observability.eventrecorder import EventRecorder, ObjectRef
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.discovery import resource_of
from ansible_operator.proxy.ownership import APPLY_PATCH, JSON_PATCH, RequestInfo

__all__ = ["RECREATE_REFUSED", "RequestScreen", "Screened", "screen"]

log = logging.getLogger("ansible_operator.proxy")

RECREATE_REFUSED = "RecreateRefused"
"""The Warning Event's reason when a run's create of its own deleted CR is refused."""

_WRITES = frozenset({"POST", "PUT", "PATCH"})
_BODY_MEDIA = frozenset(
    {
        "application/json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        APPLY_PATCH,
        "",
    }
)


@dataclass(frozen=True, slots=True)
class Screened:
    body: bytes
    refusal: str = ""
    """Non-empty: answer 403 with this message and forward nothing."""


def _media(content_type: str) -> str:
    return content_type.split(";", maxsplit=1)[0].strip().lower()


def _decode(body: bytes, media: str) -> dict[str, Any] | None:
    if media not in _BODY_MEDIA or media == JSON_PATCH:
        return None
    try:
        obj = deepjson.loads(body)
    except ValueError:
        return None  # YAML apply bodies and others: forwarded as they are
    return obj if isinstance(obj, dict) else None


def _own_name(owner: Owner, res: ResourceInfo, info: RequestInfo, obj: dict[str, Any]) -> bool:
    """Whether the request (of the owner's kind) addresses the run's own CR."""
    if info.namespace != owner.namespace:
        return False
    meta = obj.get("metadata")
    name = info.name or (str(meta.get("name") or "") if isinstance(meta, dict) else "")
    return name == owner.name


def _recreates(
    kube: KubeApi, owner: Owner, res: ResourceInfo, *, method: str, info: RequestInfo, media: str
) -> bool:
    creating = (method == "POST" and not info.name) or (method == "PATCH" and media == APPLY_PATCH)
    if not creating:
        return False
    try:
        live = kube.get_or_none(res, namespace=owner.namespace, name=owner.name)
    except OperatorError as err:
        log.warning("Could not read %s %s before its re-creation: %s", owner.kind, owner.name, err)
        return False
    # Gone, or re-created meanwhile by someone else (a new uid): not this run's CR.
    return live is None


def refusal_message(owner: Owner) -> str:
    where = f"{owner.namespace}/{owner.name}" if owner.namespace else owner.name
    return (
        f"ansible-operator: refused to re-create {owner.kind} {where}: it is the custom "
        f"resource this run reconciles (uid {owner.uid}) and it was deleted while the run "
        "was in progress; a run never re-creates its own deleted resource (docs/proxy.md)"
    )


def _refuse(owner: Owner, body: bytes, events: EventRecorder | None) -> Screened:
    message = refusal_message(owner)
    log.warning("API proxy: %s", message)
    if events is not None:
        ref = ObjectRef(
            api_version=owner.api_version,
            kind=owner.kind,
            namespace=owner.namespace,
            name=owner.name,
            uid=owner.uid,
        )
        events.record(ref, type="Warning", reason=RECREATE_REFUSED, message=message)
    return Screened(body, refusal=message)


def screen(
    owner: Owner,
    *,
    method: str,
    info: RequestInfo,
    content_type: str,
    body: bytes,
    resource: Callable[[RequestInfo], ResourceInfo | None],
    kube: KubeApi,
    restores: bool,
    events: EventRecorder | None = None,
) -> Screened:
    """Apply the module's two rules to one request; see the module docstring."""
    if method not in _WRITES or not info.is_resource or info.subresource:
        return Screened(body)
    res = resource(info)  # discovery, cached by the Kube client
    own_kind = res is not None and (res.group, res.kind) == (owner.group, owner.kind)
    if res is None or not (restores or own_kind):
        return Screened(body)  # the common case: the body is not even parsed
    media = _media(content_type)
    obj = _decode(body, media)
    if obj is None:
        return Screened(body)
    if (
        own_kind
        and _own_name(owner, res, info, obj)
        and _recreates(kube, owner, res, method=method, info=info, media=media)
    ):
        return _refuse(owner, body, events)
    if not restores:
        return Screened(body)
    return _as_strings(owner, res, info, obj, body)


def _as_strings(
    owner: Owner, res: ResourceInfo, info: RequestInfo, obj: dict[str, Any], body: bytes
) -> Screened:
    """Rule 2: numbers in string fields as text, each noted for the run's observer."""
    found = stringfields.coerce(obj, group=res.group, kind=res.kind)
    if not found:
        return Screened(body)
    meta = obj.get("metadata")
    name = info.name or (str(meta.get("name") or "") if isinstance(meta, dict) else "")
    notes = owner.notes
    if notes is None:
        return Screened(deepjson.dumps(obj).encode())
    for item in found:
        notes.add(
            f"{res.kind} {name} {item.path}: the number {item.value!r} was sent as the "
            f"string {item.text!r}, as ansible-core 2.18 templated it; ansible-core 2.19 "
            "and later keep the number, which the API server refuses. Port with "
            "`| string` in the template."
        )
    return Screened(deepjson.dumps(obj).encode())


class RequestScreen:
    """`screen()` bound to one proxy's Kubernetes client, mode and Event recorder."""

    def __init__(self, kube: Kube, *, restores: bool, events: EventRecorder | None) -> None:
        """`restores`: the 2.18 compatibility mode restores (compat.mode); `events`:
        where refusals are posted as Warning Events (none without a recorder)."""
        self._kube = kube
        self._resource = functools.partial(resource_of, kube)
        self.restores = restores
        self._events = events

    def __call__(
        self, owner: Owner, method: str, info: RequestInfo, content_type: str, body: bytes
    ) -> Screened:
        return screen(
            owner,
            method=method,
            info=info,
            content_type=content_type,
            body=body,
            resource=self._resource,
            kube=self._kube,
            restores=self.restores,
            events=self._events,
        )
