"""`FakeKube`: an in-memory API server behind the `KubeApi` seam (kube.kubeapi), for tests.

Where this sits: shipped in the package (as httpx ships MockTransport and
runner.fakerunner ships FakeRunner) so tests of the controller - ours and users' -
run with no cluster: the reconciler, leader election, shard membership and
dependent watches all take a `KubeApi`::

    kube = FakeKube(WIDGETS)                          # serves one kind
    kube.create(WIDGETS, namespace="ns", body={...})   # a user creates a CR
    reconciler = Reconciler(kube=kube, events=FakeEvents(), runner=FakeRunner(), ...)
    kube.delete(WIDGETS, namespace="ns", name="w")     # a user deletes it

It keeps what the operator relies on from a real API server:
resourceVersion bumped by every write (one counter for all kinds, as etcd's
revision) and checked (409 Conflict when stale; updates must carry one),
`generation` bumped by changes outside metadata and status, the status
subresource (status ignored by writes of the main resource and on create;
404 when the kind has none), finalizers and deletionTimestamp (a deleted
object with finalizers stays until the last one is removed; no finalizer may
be added meanwhile), NotFound for unknown objects and kinds, JSON / merge
patches (kube.patching), lists by label selector in pages, and watches: every
write is logged per kind (kube.fakewatch) and a watch replays the log after
its resourceVersion, then waits for more; `compact(res)` forgets the log, as
etcd's compaction does, so older versions get 410 Gone. The fake answers in
its own terms where the server is loose: unconditional updates are refused
(as for custom resources), and a list's later pages show the objects as they
are, not as they were at the first page.

Writes from the test side (`edit`, and `delete`, which is also a KubeApi
method) follow the same rules, so they conflict with the operator's as a
user's kubectl would.

Injection, for what a real server does only under load or races:
`fail_next(verb, error)` raises an error instead of the next call, and
`before_next(verb, action)` runs `action` (say, a concurrent `edit`) just before
it. Every call of the `KubeApi` methods is recorded in `calls`.

`FakeEvents` (kube.fakeevents, importable from here) records what the
reconciler's EventSink is given, in order.
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

from ansible_operator.errors import ApiError, NotFound
from ansible_operator.kube.fakeevents import FakeEvents, RecordedEvent
from ansible_operator.kube.fakestore import FakeStore, labels_of
from ansible_operator.kube.fakewatch import FakeWatchStream, selector_matches
from ansible_operator.kube.kubeapi import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    KubeApi,
    ListPage,
    ResourceInfo,
    WatchEvent,
    WatchStream,
)
from ansible_operator.kube.patching import json_patch, merge_patch

__all__ = ["Call", "FakeEvents", "FakeKube", "RecordedEvent"]

Verb = str
"""A KubeApi method name: "resource", "get", "get_or_none", "replace_status", "replace", "patch",
"create", "delete", "list_page", "list_names", "watch"."""

_NO_UNCONDITIONAL_UPDATE = "metadata.resourceVersion: must be specified for an update"


@dataclass(frozen=True)
class Call:
    """One KubeApi call, as FakeKube received it."""

    verb: Verb
    kind: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


class FakeKube(KubeApi):
    """A thread-safe in-memory KubeApi; see the module docstring."""

    def __init__(
        self,
        *kinds: ResourceInfo,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        """`now` stamps creation and deletion times: a clocks.FakeClock's `wall` in tests
        that move time."""
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # a write was logged: wakes watches
        self._store = FakeStore(now=now, changed=self._changed)
        self._failures: dict[Verb, deque[BaseException]] = defaultdict(deque)
        self._before: dict[Verb, deque[Callable[[FakeKube], object]]] = defaultdict(deque)
        self._watch_epoch = 0  # bumped by end_watches()
        self.calls: list[Call] = []
        """Every KubeApi call received, in order (test-side helpers are not recorded)."""
        for res in kinds:
            self.serve(res)

    # --- test side ---------------------------------------------------------------------

    def serve(self, res: ResourceInfo) -> ResourceInfo:
        """Serve a kind from now on, as installing its CRD does."""
        with self._lock:
            self._store.kinds[(res.group, res.version, res.kind)] = res
        return res

    def stored(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        """A copy of the object as stored, or None; not recorded in `calls`."""
        with self._lock:
            found = self._store.objects.get(self._store.key(res, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def objects(self, res: ResourceInfo) -> list[JSON]:
        """Copies of every stored object of a kind (test side, not recorded)."""
        with self._lock:
            return [
                copy.deepcopy(obj)
                for key, obj in self._store.objects.items()
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
            current = self._store.current(res, namespace, name)
            proposed = copy.deepcopy(current)
            change(proposed)
            proposed["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self._store.write(res, current, proposed, subresource=subresource)

    def compact(self, res: ResourceInfo) -> None:
        """Forget the kind's event log, as etcd's compaction does: a watch from any
        version before now, or a list continued from before now, gets 410 Gone."""
        with self._lock:
            log = self._store.log_of(res)
            log.compact()
            log.compacted = max(log.compacted, self._store.version)

    def bookmark(self, res: ResourceInfo) -> None:
        """Send a BOOKMARK at the current resourceVersion to the kind's watches."""
        with self._lock:
            version = str(self._store.version)
            obj = {"apiVersion": res.api_version, "kind": res.kind}
            self._store.log(res, "BOOKMARK", {**obj, "metadata": {"resourceVersion": version}})

    def end_watches(self) -> None:
        """End every watch open now once it has read what is logged, as the server
        does at a watch's timeout (the caller then watches again from where it was)."""
        with self._lock:
            self._watch_epoch += 1
            self._changed.notify_all()

    def fail_next(self, verb: Verb, error: BaseException, *, times: int = 1) -> None:
        """The next `times` calls of `verb` raise `error` and change nothing."""
        with self._lock:
            self._failures[verb].extend([error] * times)

    def before_next(self, verb: Verb, action: Callable[[FakeKube], object]) -> None:
        """Run `action(self)` just before the next call of `verb` is served, e.g. a
        concurrent `edit` that makes the caller's resourceVersion stale (a real 409)."""
        with self._lock:
            self._before[verb].append(action)

    # --- KubeApi: reads ----------------------------------------------------------------

    def resource(self, *, group: str, version: str, kind: str) -> ResourceInfo:
        self._enter(Call("resource", kind))
        with self._lock:
            found = self._store.kinds.get((group, version, kind))
        if found is None:
            gv = f"{group}/{version}" if group else version
            raise NotFound(404, f"the server does not serve kind {kind} in {gv}")
        return found

    def get(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON:
        self._enter(Call("get", res.kind, namespace, name))
        with self._lock:
            return copy.deepcopy(self._store.current(res, namespace, name))

    def get_or_none(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        self._enter(Call("get_or_none", res.kind, namespace, name))
        with self._lock:
            found = self._store.objects.get(self._store.key(res, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list_names(self, res: ResourceInfo, *, namespace: str = "") -> set[tuple[str, str]]:
        self._enter(Call("list_names", res.kind, namespace))
        with self._lock:
            return {
                (key[2], key[3])
                for key in self._store.objects
                if key[:2] == (res.api_version, res.kind) and namespace in ("", key[2])
            }

    def list_page(
        self,
        res: ResourceInfo,
        *,
        namespace: str = "",
        label_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> ListPage:
        self._enter(Call("list_page", res.kind, namespace))
        with self._lock:
            return self._store.page(res, namespace, label_selector, limit, continue_token)

    def watch(
        self,
        res: ResourceInfo,
        *,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        timeout_seconds: int = 300,
        bookmarks: bool = True,
    ) -> WatchStream:
        """See KubeApi.watch. `timeout_seconds` is how long, in real seconds, the stream
        waits for further events (0: it ends once it has read what is logged). From
        `resource_version` "" it starts with an ADDED event per object, as the API does;
        from a number (even "0", the version of a list before any write) it replays
        the log after it."""
        self._enter(Call("watch", res.kind, namespace))
        selector_matches(label_selector, {})  # a bad selector is refused at once

        def keep(where: str, event: WatchEvent) -> bool:
            if event.type == "BOOKMARK":
                return bookmarks
            in_scope = namespace in ("", where)
            return in_scope and selector_matches(label_selector, labels_of(event.object))

        with self._lock:
            self._store.served(res)
            log = self._store.log_of(res)
            first: list[WatchEvent] = []
            if not resource_version:
                # Start now, with the objects there are as ADDED events (the API's rule).
                position = log.end
                listed = self._store.select(res, namespace, label_selector)
                first = [WatchEvent("ADDED", copy.deepcopy(obj)) for _, _, obj in listed]
            else:
                position = log.position_after(int(resource_version))
            epoch = self._watch_epoch
            return FakeWatchStream(
                log,
                position=position,
                keep=keep,
                changed=self._changed,
                ended=lambda: self._watch_epoch > epoch,
                timeout=float(timeout_seconds),
                first=first,
            )

    # --- KubeApi: writes ---------------------------------------------------------------

    def replace_status(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        return self._replace(res, obj, subresource="status")

    def replace(self, res: ResourceInfo, obj: Mapping[str, Any]) -> JSON:
        return self._replace(res, obj, subresource="")

    def _replace(self, res: ResourceInfo, obj: Mapping[str, Any], *, subresource: str) -> JSON:
        meta = obj["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        verb = "replace_status" if subresource else "replace"
        self._enter(Call(verb, res.kind, namespace, name, subresource))
        with self._lock:
            current = self._store.current(res, namespace, name, subresource=subresource)
            if not meta.get("resourceVersion"):
                # CRDs do not allow unconditional updates; the fake allows none.
                raise ApiError(422, _NO_UNCONDITIONAL_UPDATE, reason="Invalid")
            proposed = copy.deepcopy(dict(obj))
            return self._store.write(res, current, proposed, subresource=subresource)

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
            current = self._store.current(res, namespace, name, subresource=subresource)
            if content_type == JSON_PATCH:
                proposed = json_patch(current, body)
            elif content_type == MERGE_PATCH:
                proposed = merge_patch(current, body)
            else:
                raise ApiError(415, f"unsupported patch type {content_type}")
            return self._store.write(res, current, proposed, subresource=subresource)

    def create(self, res: ResourceInfo, *, namespace: str, body: Mapping[str, Any]) -> JSON:
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        self._enter(Call("create", res.kind, namespace, name))
        if not name:
            raise ApiError(422, "metadata.name: Required value", reason="Invalid")
        with self._lock:
            return self._store.create(res, namespace, name, body)

    def delete(self, res: ResourceInfo, *, namespace: str, name: str) -> JSON | None:
        """Delete as kubectl does: the object as left (deletionTimestamp set, waiting for its
        finalizers), or None when it is gone. NotFound if there is none."""
        self._enter(Call("delete", res.kind, namespace, name))
        with self._lock:
            return self._store.delete(res, namespace, name)

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
