"""`FakeKube`: an in-memory API server at the reconcile path's `KubeApi` seam, for tests.

Where this sits: shipped in the package (as httpx ships MockTransport and
runner.fake ships FakeRunner) so tests of the controller - ours and users' -
can run `controller.reconciler.Reconciler` with no cluster:

    kube = FakeKube(WIDGETS)                          # serves one kind
    kube.create(WIDGETS, namespace="ns", body={...})   # a user creates a CR
    reconciler = Reconciler(kube=kube, events=FakeEvents(), runner=FakeRunner(), ...)
    kube.delete(WIDGETS, namespace="ns", name="w")     # a user deletes it

It keeps what the reconcile path relies on from a real API server:
resourceVersion bumped by every write and checked (409 Conflict when stale),
`generation` bumped by changes outside metadata and status, the status
subresource (status ignored by writes of the main resource and on create;
404 when the kind has none), finalizers and deletionTimestamp (a deleted
object with finalizers stays until the last one is removed; no finalizer may
be added meanwhile), NotFound for unknown objects and kinds, and JSON / merge
patches (kube.patching). Writes from the test side (`edit`, `delete`) go
through the same rules, so they conflict with the operator's as a user's
kubectl would.

Injection, for what a real server does only under load or races:
`fail_next(verb, error)` raises an error instead of the next call, and
`before_next(verb, action)` runs `action` (say, a concurrent `edit`) just before
it. Every call of the `KubeApi` methods is recorded in `calls`.

`FakeEvents` records what the reconciler's EventSink is given, in order.
"""

from __future__ import annotations

import copy
import datetime
import threading
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.kube.client import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    ApiError,
    Conflict,
    KubeApi,
    NotFound,
    ResourceInfo,
)
from ansible_operator.kube.patching import json_patch, merge_patch
from ansible_operator.observability.events import ObjectRef

__all__ = ["Call", "FakeEvents", "FakeKube", "RecordedEvent"]

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

Verb = str
"""A KubeApi method name: "resource", "get", "get_or_none", "replace_status", "patch", "create",
"list_names"."""


@dataclass(frozen=True)
class Call:
    """One KubeApi call, as FakeKube received it."""

    verb: Verb
    kind: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


@dataclass(frozen=True)
class RecordedEvent:
    ref: ObjectRef
    type: str
    reason: str
    message: str


class FakeEvents:
    """An EventSink (controller.reconciler) that keeps every Event it is given, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[RecordedEvent] = []

    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None:
        with self._lock:
            self._events.append(RecordedEvent(ref, type, reason, message))

    @property
    def events(self) -> list[RecordedEvent]:
        with self._lock:
            return list(self._events)

    def reasons(self) -> list[tuple[str, str]]:
        """(type, reason) of every Event so far, e.g. [("Normal", "Running"), ...]."""
        return [(e.type, e.reason) for e in self.events]


def _timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _content(obj: Mapping[str, Any], *, with_status: bool) -> dict[str, Any]:
    """What `generation` tracks: everything but metadata (and status, with the subresource)."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if not with_status else set())
    return {k: v for k, v in obj.items() if k not in skip}


class FakeKube(KubeApi):
    """A thread-safe in-memory KubeApi; see the module docstring."""

    def __init__(
        self,
        *kinds: ResourceInfo,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._lock = threading.RLock()
        self._now = now
        self._kinds: dict[tuple[str, str, str], ResourceInfo] = {}
        self._objects: dict[tuple[str, str, str, str], JSON] = {}
        self._version = 0
        self._failures: dict[Verb, deque[BaseException]] = defaultdict(deque)
        self._before: dict[Verb, deque[Callable[[FakeKube], object]]] = defaultdict(deque)
        self.calls: list[Call] = []
        """Every KubeApi call received, in order (test-side helpers are not recorded)."""
        for res in kinds:
            self.serve(res)

    # --- test side ---------------------------------------------------------------------

    def serve(self, res: ResourceInfo) -> ResourceInfo:
        """Serve a kind from now on, as installing its CRD does."""
        with self._lock:
            self._kinds[(res.group, res.version, res.kind)] = res
        return res

    def stored(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        """A copy of the object as stored, or None; not recorded in `calls`."""
        with self._lock:
            found = self._objects.get(self._key(res, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def objects(self, res: ResourceInfo) -> list[JSON]:
        """Copies of every stored object of a kind (test side, not recorded)."""
        with self._lock:
            return [
                copy.deepcopy(obj)
                for key, obj in self._objects.items()
                if key[:2] == (res.api_version, res.kind)
            ]

    def edit(
        self,
        res: ResourceInfo,
        *,
        namespace: str,
        name: str,
        change: Callable[[JSON], object],
        subresource: str = "",
    ) -> JSON:
        """Change the object as another client would: `change` edits a fresh copy in place,
        which is written back by the server's rules (of the status subresource if asked)."""
        with self._lock:
            current = self._current(res, namespace, name)
            proposed = copy.deepcopy(current)
            change(proposed)
            proposed["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self._write(res, current, proposed, subresource=subresource)

    def delete(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        """Delete as kubectl does: the object as left (deletionTimestamp set, waiting for its
        finalizers), or None when it is gone. NotFound if there is none."""
        with self._lock:
            current = self._current(res, namespace, name)
            key = self._key(res, namespace, name)
            meta = current["metadata"]
            if not meta.get("finalizers"):
                del self._objects[key]
                return None
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = _timestamp(self._now())
                meta["deletionGracePeriodSeconds"] = 0
                meta["resourceVersion"] = self._next_version()
            return copy.deepcopy(current)

    def fail_next(self, verb: Verb, error: BaseException, *, times: int = 1) -> None:
        """The next `times` calls of `verb` raise `error` and change nothing."""
        with self._lock:
            self._failures[verb].extend([error] * times)

    def before_next(self, verb: Verb, action: Callable[[FakeKube], object]) -> None:
        """Run `action(self)` just before the next call of `verb` is served, e.g. a
        concurrent `edit` that makes the caller's resourceVersion stale (a real 409)."""
        with self._lock:
            self._before[verb].append(action)

    # --- KubeApi -----------------------------------------------------------------------

    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo:
        self._enter(Call("resource", kind))
        with self._lock:
            found = self._kinds.get((group, version, kind))
        if found is None:
            gv = f"{group}/{version}" if group else version
            raise NotFound(404, f"the server does not serve kind {kind} in {gv}")
        return found

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON:
        self._enter(Call("get", res.kind, namespace, name))
        with self._lock:
            return copy.deepcopy(self._current(res, namespace, name))

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        self._enter(Call("get_or_none", res.kind, namespace, name))
        with self._lock:
            found = self._objects.get(self._key(res, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        self._enter(Call("list_names", res.kind, namespace))
        with self._lock:
            return {
                (key[2], key[3])
                for key in self._objects
                if key[:2] == (res.api_version, res.kind) and namespace in ("", key[2])
            }

    def replace_status(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        self._enter(Call("replace_status", res.kind, namespace, name, "status"))
        with self._lock:
            current = self._current(res, namespace, name, subresource="status")
            if not meta.get("resourceVersion"):
                # CRDs do not allow unconditional updates.
                raise ApiError(
                    422,
                    "metadata.resourceVersion: must be specified for an update",
                    reason="Invalid",
                )
            return self._write(res, current, copy.deepcopy(dict(obj)), subresource="status")

    def patch(
        self,
        res: ResourceInfo,
        *,
        namespace: str,
        name: str,
        body: Any,
        content_type: str = MERGE_PATCH,
        subresource: str = "",
    ) -> JSON:
        self._enter(Call("patch", res.kind, namespace, name, subresource))
        with self._lock:
            current = self._current(res, namespace, name, subresource=subresource)
            if content_type == JSON_PATCH:
                proposed = json_patch(current, body)
            elif content_type == MERGE_PATCH:
                proposed = merge_patch(current, body)
            else:
                raise ApiError(415, f"unsupported patch type {content_type}")
            return self._write(res, current, proposed, subresource=subresource)

    def create(self, res: ResourceInfo, *, namespace: str, body: Mapping[str, Any]) -> JSON:
        meta = dict(body.get("metadata") or {})
        name = str(meta.get("name") or "")
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        self._enter(Call("create", res.kind, namespace, name))
        if not name:
            raise ApiError(422, "metadata.name: Required value", reason="Invalid")
        with self._lock:
            key = self._key(res, namespace, name)
            if key in self._objects:
                raise Conflict(
                    409, f'{self._what(res)} "{name}" already exists', reason="AlreadyExists"
                )
            obj = copy.deepcopy(dict(body))
            if res.has_status:
                obj.pop("status", None)  # the status subresource resets it on create
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            meta.update(
                name=name,
                uid=str(uuid.uuid4()),
                generation=1,
                creationTimestamp=_timestamp(self._now()),
                resourceVersion=self._next_version(),
            )
            meta.pop("deletionTimestamp", None)
            if res.namespaced:
                meta["namespace"] = namespace
            obj["metadata"] = meta
            self._objects[key] = obj
            return copy.deepcopy(obj)

    # --- the server's rules ------------------------------------------------------------

    def _enter(self, call: Call) -> None:
        """Record the call, run what was scheduled before it, raise an injected error."""
        with self._lock:
            self.calls.append(call)
            action = self._before[call.verb].popleft() if self._before[call.verb] else None
            error = self._failures[call.verb].popleft() if self._failures[call.verb] else None
        if action is not None:
            action(self)  # outside the lock's bookkeeping: it may call back into the fake
        if error is not None:
            raise error

    def _key(self, res: ResourceInfo, namespace: str, name: str) -> tuple[str, str, str, str]:
        return (res.api_version, res.kind, namespace if res.namespaced else "", name)

    @staticmethod
    def _what(res: ResourceInfo) -> str:
        return f"{res.plural}.{res.group}" if res.group else res.plural

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _current(
        self, res: ResourceInfo, namespace: str, name: str, *, subresource: str = ""
    ) -> JSON:
        """The stored object itself (callers copy before handing it out)."""
        if (res.group, res.version, res.kind) not in self._kinds:
            raise NotFound(404, f"the server could not find the requested resource ({res.kind})")
        if subresource == "status" and not res.has_status:
            raise NotFound(404, "the server could not find the requested resource")
        if subresource not in ("", "status"):
            raise NotFound(404, f"no subresource {subresource!r}")
        found = self._objects.get(self._key(res, namespace, name))
        if found is None:
            raise NotFound(404, f'{self._what(res)} "{name}" not found', reason="NotFound")
        return found

    def _write(
        self, res: ResourceInfo, current: JSON, proposed: Mapping[str, Any], *, subresource: str
    ) -> JSON:
        meta = current["metadata"]
        sent = (proposed.get("metadata") or {}).get("resourceVersion")
        if sent and sent != meta["resourceVersion"]:
            raise Conflict(
                409,
                f'Operation cannot be fulfilled on {self._what(res)} "{meta["name"]}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                reason="Conflict",
            )
        updated = self._merge_write(res, current, proposed, subresource=subresource)
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
        new_meta["resourceVersion"] = self._next_version()
        key = self._key(res, str(meta.get("namespace") or ""), str(meta["name"]))
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            self._objects.pop(key, None)  # the last finalizer is gone: so is the object
        else:
            self._objects[key] = updated
        return copy.deepcopy(updated)

    @staticmethod
    def _merge_write(
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
