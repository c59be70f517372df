"""From kopf watch events to queue entries: the predicates of the primary watch.

kopf does the watching (list + watch with bookmarks, reconnects, and kinds whose
CRD appears after start-up). It is used only through low-level `on.event`
handlers, which persist nothing: no annotation, finalizer or status key of
kopf's ever lands on a user's object. The handler never blocks: it decides
whether the event matters and adds the object's key to the work queue.

The decision mirrors the Go operator's predicates (docs/watches.md): an update
counts when `metadata.generation` changed, or the object has no generation
(e.g. Secrets), or annotations changed and the watch sets
`watchAnnotationsChanges`, or the drift annotations changed (ours,
controller.driftsettings: turning observe-only off must reconcile at once);
the label `selector` filters every event. So the
operator's own status writes (which never bump the generation) trigger nothing.
A DELETED event enqueues the key once more, so the reconciler can clean up.

Every object the API server accepts must reach the queue, however deeply it
is nested: the reconciler then either runs it or writes a Failure condition
saying why not. `register` therefore also installs controller.deepobjects,
without which kopf stops the whole operator on an object nested about 1,000
levels deep and silently drops one nested about 500 levels deep. The handler
itself reads only metadata and whether `status.conditions` is set, never the
spec, so it costs the same at any depth.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ansible_operator.config.watches import Watch
from ansible_operator.controller import deepobjects
from ansible_operator.controller.contract import Key
from ansible_operator.controller.driftsettings import annotations_state
from ansible_operator.controller.kopfimport import kopf
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.restartrule import RestartRule
from ansible_operator.controller.watchbodies import WatchBodies

log = logging.getLogger("ansible_operator.watching")


def _digest(value: Any) -> str:
    return hashlib.sha1(
        json.dumps(value, sort_keys=True).encode(), usedforsecurity=False
    ).hexdigest()


#: Annotations the operator itself writes in sharded mode (controller.sharding.claims):
#: never a change of the CR for `watchAnnotationsChanges`.
OPERATOR_ANNOTATION_PREFIX = "sharding.ansible.sdk.operatorframework.io/"


def _user_annotations(meta: Mapping[str, Any]) -> dict[str, Any]:
    annotations = meta.get("annotations") or {}
    return {k: v for k, v in annotations.items() if not k.startswith(OPERATOR_ANNOTATION_PREFIX)}


_State = tuple[int | None, str, tuple[str | None, str | None]]


class PrimaryWatch:
    """Predicates and enqueueing for one watches.yaml entry."""

    def __init__(
        self,
        watch: Watch,
        queue: WorkQueue,
        *,
        on_object: Callable[[str, Mapping[str, Any]], None] | None = None,
        restart: RestartRule | None = None,
        bodies: WatchBodies | None = None,
    ) -> None:
        self.watch = watch
        self.restart = restart
        self.bodies = bodies  # the bodies of queued CRs, for their reconcile
        self.queue = queue
        self.name = watch.controller_name
        self.on_object = on_object
        # Per object: (generation, annotations digest, drift annotations) last
        # seen. Small and bounded by the number of CRs; entries go with DELETED events.
        self._seen: dict[tuple[str, str], _State] = {}
        self._lock = threading.Lock()

    def _selected(self, body: Mapping[str, Any]) -> bool:
        selector = self.watch.selector
        if selector is None:
            return True
        labels = (body.get("metadata") or {}).get("labels") or {}
        return bool(selector.matches(labels))

    def handle(self, event_type: str | None, body: Mapping[str, Any]) -> Priority | None:
        """Enqueue the object if the event matters; return the priority used (None: ignored)."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        generation = meta.get("generation")
        state = (generation, _digest(_user_annotations(meta)), annotations_state(body))
        with self._lock:
            previous = self._seen.get(key)
            if event_type == "DELETED":
                self._seen.pop(key, None)
            else:
                self._seen[key] = state
        if self.on_object is not None:
            self.on_object(event_type or "ADDED", body)
        if not self._selected(body):
            return None
        queued = Key(controller=self.name, namespace=key[0], name=key[1])
        if event_type is None and self.restart is not None and self.restart.unchanged(body):
            # Reconciled already with what would run now (controller/restartrule.py).
            self.queue.add_after(queued, self.restart.delay(body), priority=Priority.RESYNC)
            return Priority.RESYNC
        priority = self._priority(event_type, body, previous, state)
        self._keep_body(queued, event_type, body, queue=priority is not None)
        if priority is not None:
            self.queue.add(queued, priority=priority)
        return priority

    def _keep_body(
        self, key: Key, event_type: str | None, body: Mapping[str, Any], *, queue: bool
    ) -> None:
        if self.bodies is None:
            return
        if event_type == "DELETED":
            self.bodies.drop(key)
        elif queue:
            self.bodies.keep(key, body)
        else:
            self.bodies.update(key, body)

    def _initial_priority(self, body: Mapping[str, Any]) -> Priority:
        """The initial listing at start-up: a CR that was never reconciled, or whose spec
        changed since its last reconcile, is new work; another one waits behind real
        changes (unchanged ones wait for their period: handle())."""
        status = body.get("status")
        reconciled = isinstance(status, Mapping) and bool(status.get("conditions"))
        if self.restart is not None and reconciled and self.restart.spec_changed(body):
            return Priority.CHANGE
        return Priority.RESYNC if reconciled else Priority.CHANGE

    def _priority(
        self,
        event_type: str | None,
        body: Mapping[str, Any],
        previous: _State | None,
        state: _State,
    ) -> Priority | None:
        if event_type is None:
            return self._initial_priority(body)
        if event_type in {"ADDED", "DELETED"} or previous is None:
            return Priority.CHANGE
        generation, annotations, drift = state
        if not generation or generation != previous[0]:
            return Priority.CHANGE
        if self.watch.watch_annotations_changes and annotations != previous[1]:
            return Priority.CHANGE
        if drift != previous[2]:
            return Priority.CHANGE
        return None


def register(registry: kopf.OperatorRegistry, primary: PrimaryWatch) -> None:
    """Register the kopf handler that feeds `primary`, with kopf guarded against deep objects."""
    gvk = primary.watch.gvk
    deepobjects.install(registry)

    async def on_event(**kwargs: Any) -> None:
        primary.handle(kwargs.get("type"), kwargs["body"])

    kopf.on.event(
        group=gvk.group, version=gvk.version, kind=gvk.kind, id=primary.name, registry=registry
    )(on_event)
