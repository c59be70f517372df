"""The state and the write rules of kube.fakekube.FakeKube's in-memory API server.

Used only by kube.fakekube: `FakeKube` records and injects calls, holds the
lock, and asks a `FakeStore` to do what the API server would: keep the
objects by kind, namespace and name, number every write with one
resourceVersion counter (as etcd's revision), apply the rules a write must
follow (the module docstring of kube.fakekube lists them), log it for watches
(kube.fakewatch.EventLog) and page lists. Not thread-safe: the caller holds
`FakeKube`'s lock, whose condition variable (`changed`) it notifies on
every logged write.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from ansible_operator.errors import ApiError, Conflict, NotFound
from ansible_operator.kube.fakewatch import EventLog, selector_matches
from ansible_operator.kube.kubeapi import GONE, JSON, ListPage, ResourceInfo, WatchEvent

#: Events a kind's log keeps before the oldest are forgotten (then: 410 Gone).
LOG_CAPACITY = 10_000

# Set by the server only: a write that sends other values for them keeps the stored ones.
_SERVER_OWNED = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "name",
    "namespace",
)


def _timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _content(obj: Mapping[str, Any], *, with_status: bool) -> dict[str, Any]:
    """What `generation` tracks: everything but metadata (and status, with the subresource)."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if not with_status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _encode_token(version: int, after: tuple[str, str]) -> str:
    """A continue token: the version of the list's first page and the last key served."""
    return base64.urlsafe_b64encode(json.dumps([version, *after]).encode()).decode()


def _decode_token(token: str) -> tuple[int, tuple[str, str]]:
    try:
        version, namespace, name = json.loads(base64.urlsafe_b64decode(token))
        return int(version), (str(namespace), str(name))
    except (ValueError, TypeError) as err:
        raise ApiError(400, f"invalid continue token: {err}", reason="BadRequest") from err


class FakeStore:
    """The objects, the version counter and the event logs; see the module docstring."""

    def __init__(
        self, *, now: Callable[[], datetime.datetime], changed: threading.Condition
    ) -> None:
        self.now = now
        self.changed = changed
        self.kinds: dict[tuple[str, str, str], ResourceInfo] = {}
        self.objects: dict[tuple[str, str, str, str], JSON] = {}
        self.version = 0
        self.logs: dict[tuple[str, str], EventLog] = defaultdict(
            lambda: EventLog(capacity=LOG_CAPACITY)
        )

    def log_of(self, res: ResourceInfo) -> EventLog:
        return self.logs[(res.api_version, res.kind)]

    def create(self, res: ResourceInfo, namespace: str, name: str, body: Mapping[str, Any]) -> JSON:
        """Store a new object (AlreadyExists if there is one); a copy of it as stored."""
        key = self.key(res, namespace, name)
        if key in self.objects:
            raise Conflict(409, f'{self.what(res)} "{name}" already exists', reason="AlreadyExists")
        obj = copy.deepcopy(dict(body))
        meta = dict(obj.get("metadata") or {})
        if res.has_status:
            obj.pop("status", None)  # the status subresource resets it on create
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta.update(
            name=name,
            uid=str(uuid.uuid4()),
            generation=1,
            creationTimestamp=_timestamp(self.now()),
            resourceVersion=self.next_version(),
        )
        meta.pop("deletionTimestamp", None)
        if res.namespaced:
            meta["namespace"] = namespace
        obj["metadata"] = meta
        self.objects[key] = obj
        self.log(res, "ADDED", obj)
        return copy.deepcopy(obj)

    def delete(self, res: ResourceInfo, namespace: str, name: str) -> JSON | None:
        """Remove an object, or mark it deleted while it has finalizers (see KubeApi.delete)."""
        current = self.current(res, namespace, name)
        meta = current["metadata"]
        if not meta.get("finalizers"):
            del self.objects[self.key(res, namespace, name)]
            meta["resourceVersion"] = self.next_version()
            self.log(res, "DELETED", current)
            return None
        if not meta.get("deletionTimestamp"):  # a second delete changes nothing
            meta["deletionTimestamp"] = _timestamp(self.now())
            meta["deletionGracePeriodSeconds"] = 0
            meta["resourceVersion"] = self.next_version()
            self.log(res, "MODIFIED", current)
        return copy.deepcopy(current)

    def page(
        self, res: ResourceInfo, namespace: str, label_selector: str, limit: int, token: str
    ) -> ListPage:
        """One page of a list (see KubeApi.list_page)."""
        self.served(res)
        version, after = self.version, ("", "")
        if token:
            version, after = _decode_token(token)
            if version < self.log_of(res).compacted:
                raise ApiError(GONE, "the provided continue parameter is too old", reason="Expired")
        found = [
            entry for entry in self.select(res, namespace, label_selector) if entry[:2] > after
        ]
        page = found[:limit] if limit else found
        next_token = _encode_token(version, page[-1][:2]) if limit and len(found) > limit else ""
        return ListPage(
            items=[copy.deepcopy(obj) for _, _, obj in page],
            resource_version=str(version),
            continue_token=next_token,
        )

    def served(self, res: ResourceInfo) -> None:
        if (res.group, res.version, res.kind) not in self.kinds:
            raise NotFound(404, f"the server could not find the requested resource ({res.kind})")

    def select(
        self, res: ResourceInfo, namespace: str, label_selector: str
    ) -> list[tuple[str, str, JSON]]:
        """(namespace, name, stored object) of a kind, in order, as a list selects them."""
        return sorted(
            (
                (key[2], key[3], obj)
                for key, obj in self.objects.items()
                if key[:2] == (res.api_version, res.kind)
                and namespace in ("", key[2])
                and selector_matches(label_selector, labels_of(obj))
            ),
            key=lambda entry: entry[:2],
        )

    def log(self, res: ResourceInfo, event_type: str, obj: JSON) -> None:
        """Log a write for the kind's watches (lock held) and wake them."""
        meta = obj.get("metadata") or {}
        version = int(meta.get("resourceVersion") or self.version)
        event = WatchEvent(event_type, copy.deepcopy(obj))
        self.log_of(res).append(version, str(meta.get("namespace") or ""), event)
        self.changed.notify_all()

    def key(self, res: ResourceInfo, namespace: str, name: str) -> tuple[str, str, str, str]:
        return (res.api_version, res.kind, namespace if res.namespaced else "", name)

    @staticmethod
    def what(res: ResourceInfo) -> str:
        return f"{res.plural}.{res.group}" if res.group else res.plural

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def current(
        self, res: ResourceInfo, namespace: str, name: str, *, subresource: str = ""
    ) -> JSON:
        """The stored object itself (callers copy before handing it out)."""
        if (res.group, res.version, res.kind) not in self.kinds:
            raise NotFound(404, f"the server could not find the requested resource ({res.kind})")
        if subresource == "status" and not res.has_status:
            raise NotFound(404, "the server could not find the requested resource")
        if subresource not in ("", "status"):
            raise NotFound(404, f"no subresource {subresource!r}")
        found = self.objects.get(self.key(res, namespace, name))
        if found is None:
            raise NotFound(404, f'{self.what(res)} "{name}" not found', reason="NotFound")
        return found

    def write(
        self, res: ResourceInfo, current: JSON, proposed: Mapping[str, Any], *, subresource: str
    ) -> JSON:
        meta = current["metadata"]
        sent = (proposed.get("metadata") or {}).get("resourceVersion")
        if sent and sent != meta["resourceVersion"]:
            raise Conflict(
                409,
                f'Operation cannot be fulfilled on {self.what(res)} "{meta["name"]}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                reason="Conflict",
            )
        updated = self.merge_write(res, current, proposed, subresource=subresource)
        new_meta = updated["metadata"]
        if meta.get("deletionTimestamp"):
            added = set(new_meta.get("finalizers") or []) - set(meta.get("finalizers") or [])
            if added:
                raise ApiError(
                    422,
                    "metadata.finalizers: Forbidden: no new finalizers can be added "
                    "if the object is being deleted",
                    reason="Invalid",
                )
        if _content(updated, with_status=not res.has_status) != _content(
            current, with_status=not res.has_status
        ):
            new_meta["generation"] = int(meta.get("generation") or 0) + 1
        new_meta["resourceVersion"] = self.next_version()
        key = self.key(res, str(meta.get("namespace") or ""), str(meta["name"]))
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            self.objects.pop(key, None)  # the last finalizer is gone: so is the object
            self.log(res, "DELETED", updated)
        else:
            self.objects[key] = updated
            self.log(res, "MODIFIED", updated)
        return copy.deepcopy(updated)

    @staticmethod
    def merge_write(
        res: ResourceInfo, current: JSON, proposed: Mapping[str, Any], *, subresource: str
    ) -> JSON:
        """The object to store: the status subresource takes only status, the main resource
        everything but status (with the subresource); server-owned fields never change."""
        if subresource == "status":
            updated = copy.deepcopy(current)
            if "status" in proposed:
                updated["status"] = copy.deepcopy(proposed["status"])
            else:
                updated.pop("status", None)
            return updated
        updated = copy.deepcopy(dict(proposed))
        if res.has_status:
            if "status" in current:
                updated["status"] = copy.deepcopy(current["status"])
            else:
                updated.pop("status", None)
        new_meta = dict(updated.get("metadata") or {})
        for field in _SERVER_OWNED:
            if field in current["metadata"]:
                new_meta[field] = current["metadata"][field]
            else:
                new_meta.pop(field, None)
        updated["metadata"] = new_meta
        updated["apiVersion"], updated["kind"] = current["apiVersion"], current["kind"]
        return updated
