"""Dependent watches: re-reconcile a CR when an object its role wrote changes or goes away.

Where it sits in the flow::

    ApiProxy --on_touch(Owner, Touch)--> DependentWatches.touched()
        -> one _KindWatch per dependent kind (daemon threads: list + watch)
        -> owners from ownerReferences / primary-resource annotations
        -> WorkQueue.add(Key(<primary's controller>, ns, name), Priority.CHANGE)

The manager creates one DependentWatches and passes `touched` to the API
proxy as its `on_touch`; `stop()` at shutdown. Lists and watches go through
the `KubeApi` seam (`list_page`, `watch`), so tests run them on
kube.fakekube.FakeKube. Like the Go operator, a kind is watched only once a role
has written an object of it through the proxy, honouring the owner watch's
`watchDependentResources`, `blacklist` and `watchClusterScopedResources`; so
kinds no role touched (Secrets, unless a role wrote Secrets) are never listed
or watched.

Predicate (the Go operator's DependentPredicate): ADDED, including the
initial list, triggers nothing; DELETED enqueues the owners; MODIFIED enqueues
them unless old and new differ only in `status`, `metadata.resourceVersion`,
`metadata.managedFields` or `metadata.generation`. The generation is ignored
because it only ever moves with the content it counts: a real spec change is
seen in the spec itself, while a custom resource without a status
subresource bumps its generation on status-only writes, which must not
loop. Instead of the informer cache's whole objects, each stream keeps a
16-byte digest and the owners of each object owned by a primary kind, so
memory is bounded by the owned objects, not by the cluster.

Nothing is persisted across restarts: every CR is reconciled at start-up and
its role writes its objects again (kubernetes.core patches even unchanged
objects), which re-creates the watches. The Go operator re-created them from
reads served by its cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.config.watches import GVK, Watch
from ansible_operator.controller.contract import Key
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.errors import ApiError, OperatorError
from ansible_operator.kube import deepjson
from ansible_operator.kube.client import KubeApi, ResourceInfo, WatchEvent, WatchStream, is_gone
from ansible_operator.proxy.credentials import Owner
from ansible_operator.proxy.ownership import OwnerLink, PrimaryIndex, Touch, owner_links

log = logging.getLogger("ansible_operator.dependents")

_IGNORED_METADATA = ("resourceVersion", "managedFields", "generation")
_WATCH_SECONDS = 300  # server-side timeout of one watch request; then resume
_PAGE = 500
_MAX_BACKOFF = 60.0


def object_digest(obj: Mapping[str, Any]) -> bytes:
    """Digest of what matters in a dependent: all but status and bookkeeping metadata.

    apiVersion and kind are left out too: list items lack them, watch events
    carry them, and the two must compare equal.
    """
    kept = {k: v for k, v in obj.items() if k not in {"status", "apiVersion", "kind"}}
    meta = kept.get("metadata")
    if isinstance(meta, Mapping):
        kept["metadata"] = {k: v for k, v in meta.items() if k not in _IGNORED_METADATA}
    try:
        text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    except RecursionError:
        # Nested deeper than json recurses: the API server's own key order
        # (sorted, as Go encodes maps) stands in for sort_keys.
        text = deepjson.dumps(kept)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def should_enqueue(event_type: str, previous: bytes | None, current: bytes) -> bool:
    """DependentPredicate on digests; `previous` None = not known as owned before."""
    if event_type == "DELETED":
        return True
    if event_type == "MODIFIED":
        return previous is None or previous != current
    return False  # ADDED (and the initial list), BOOKMARK


@dataclass
class _Registrations:
    """Which primaries asked for this kind to be watched, and how."""

    by_owner_reference: set[str] = field(default_factory=set)
    by_annotation: set[str] = field(default_factory=set)
    cluster_scoped_owner: dict[str, bool] = field(default_factory=dict)

    def key(self, link: OwnerLink) -> Key | None:
        wanted = self.by_owner_reference if link.by_owner_reference else self.by_annotation
        if link.controller not in wanted:
            return None
        namespace = link.namespace
        if link.by_owner_reference and self.cluster_scoped_owner.get(link.controller):
            namespace = ""  # a cluster-scoped CR's key has no namespace
        return Key(controller=link.controller, namespace=namespace, name=link.name)


class _Gone(Exception):
    """The resourceVersion is too old (410): list again."""


_Store = dict[str, tuple[bytes, frozenset[OwnerLink]]]  # uid -> (digest, owners)


class _KindWatch:
    """List + watch of one dependent kind: one stream per watched namespace, or one for all."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        queue: WorkQueue,
        resource: ResourceInfo,
        index: PrimaryIndex,
        namespaces: tuple[str, ...],
    ) -> None:
        self.kube = kube
        self.queue = queue
        self.resource = resource
        self.index = index
        self.streams = ("",) if not resource.namespaced or not namespaces else namespaces
        self.registrations = _Registrations()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = {ns: threading.Event() for ns in self.streams}
        self._threads: list[threading.Thread] = []
        self._streams: set[WatchStream] = set()

    def register(self, owner: Owner, touch: Touch) -> None:
        with self._lock:
            wanted = self.registrations
            group = wanted.by_owner_reference if touch.by_owner_reference else wanted.by_annotation
            group.add(owner.controller)
            wanted.cluster_scoped_owner[owner.controller] = owner.cluster_scoped

    def start(self) -> None:
        for namespace in self.streams:
            name = f"dependents-{self.resource.plural}.{self.resource.group or 'core'}-{namespace}"
            thread = threading.Thread(target=self._run, args=(namespace,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            streams = list(self._streams)
        for stream in streams:
            stream.stop()  # unblocks a thread waiting for the next event

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def synced(self, timeout: float) -> bool:
        return all(event.wait(timeout) for event in self._ready.values())

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    # -- enqueueing ----------------------------------------------------------

    def _enqueue(self, links: frozenset[OwnerLink], why: str, obj_name: str) -> None:
        with self._lock:
            keys = {k for k in map(self.registrations.key, links) if k is not None}
        for key in keys:
            log.debug("Dependent %s %s %s: enqueue %s", self.resource.kind, obj_name, why, key)
            self.queue.add(key, priority=Priority.CHANGE)

    # -- the stream thread ---------------------------------------------------

    def _run(self, namespace: str) -> None:
        store: _Store = {}
        version = ""
        initial = True
        delay = 1.0
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list(namespace, store, initial=initial)
                    initial = False
                    self._ready[namespace].set()
                version = self._watch(namespace, version, store)
                delay = 1.0
            except _Gone:
                version = ""
            except OperatorError as err:  # KubeApi's errors, a dropped stream included
                if self._stop.is_set():
                    break
                log.warning(
                    "Watch of %s in %r failed, retrying in %.0fs: %s",
                    self.resource.plural,
                    namespace or "*",
                    delay,
                    err,
                )
                self._stop.wait(delay)
                delay = min(delay * 2, _MAX_BACKOFF)

    def _list(self, namespace: str, store: _Store, *, initial: bool) -> str:
        """List in pages; compare with `store` (after a 410: missed changes and deletes)."""
        seen: set[str] = set()
        token = ""
        while True:
            try:
                page = self.kube.list_page(
                    self.resource, namespace=namespace, limit=_PAGE, continue_token=token
                )
            except ApiError as err:
                if is_gone(err):
                    raise _Gone from err  # the continue token expired: start over
                raise
            for obj in page.items:
                seen.add(self._apply("ADDED" if initial else "SYNC", obj, store))
            token = page.continue_token
            if not token:
                break
        for uid in set(store) - seen:
            # Deleted while we were not watching.
            self._enqueue(store.pop(uid)[1], "deleted", uid)
        return page.resource_version

    def _watch(self, namespace: str, version: str, store: _Store) -> str:
        try:
            stream = self.kube.watch(
                self.resource,
                namespace=namespace,
                resource_version=version,
                timeout_seconds=_WATCH_SECONDS,
            )
        except ApiError as err:
            if is_gone(err):
                raise _Gone from err
            raise
        with self._lock:
            # Checked under the lock stop() takes: either stop() sees this
            # stream and stops it, or we see the flag here.
            self._streams.add(stream)
            stopping = self._stop.is_set()
        try:
            if stopping:
                return version
            for event in stream:
                version = self._event(event, store) or version
            return version
        except ApiError as err:
            if is_gone(err):
                raise _Gone from err
            raise
        finally:
            with self._lock:
                self._streams.discard(stream)
            stream.close()

    def _event(self, event: WatchEvent, store: _Store) -> str:
        """Apply one watch event; the resourceVersion to resume from after it."""
        if event.type != "BOOKMARK":
            self._apply(event.type, event.object, store)
        return event.resource_version

    def _apply(self, kind: str, obj: Mapping[str, Any], store: _Store) -> str:
        """Update `store` with one object; enqueue its owners if the predicate says so."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        links = owner_links(obj, self.index)
        previous = store.get(uid)
        digest = object_digest(obj)
        if kind == "DELETED" or not links:
            store.pop(uid, None)
        else:
            store[uid] = (digest, links)
        if kind == "SYNC":
            # A relist: changed while we were not watching; new ones are ADDED.
            kind = "MODIFIED" if previous is not None else "ADDED"
        if not links and previous is None:
            return uid  # not owned by any primary, now or before
        if should_enqueue(kind, previous[0] if previous else None, digest):
            old = previous[1] if previous else frozenset()
            self._enqueue(links | old, kind.lower(), str(meta.get("name")))
        return uid


class DependentWatches:
    """The dependent watches of all primary kinds; see the module docstring."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        queue: WorkQueue,
        namespaces: tuple[str, ...],
        primaries: Mapping[str, Watch],
    ) -> None:
        self.kube = kube
        self.queue = queue
        self.namespaces = tuple(namespaces)
        self.primaries = dict(primaries)
        self._index = PrimaryIndex.of(self.primaries)
        self._watches: dict[tuple[str, str, str], _KindWatch] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def _refusal(self, watch: Watch, owner: Owner, touch: Touch) -> str | None:
        if not watch.watch_dependent_resources:
            return "watchDependentResources is false"
        if GVK(touch.group, touch.version, touch.kind) in watch.blacklist:
            return "blacklisted"
        if touch.cluster_scoped and not owner.cluster_scoped:
            if not watch.watch_cluster_scoped_resources:
                return "cluster-scoped and watchClusterScopedResources is false"
        elif (
            not touch.cluster_scoped and self.namespaces and touch.namespace not in self.namespaces
        ):
            return f"namespace {touch.namespace!r} is not watched"
        return None

    def touched(self, owner: Owner, touch: Touch) -> None:
        """A run wrote `touch` for `owner`: make sure its kind is watched. Never blocks."""
        watch = self.primaries.get(owner.controller)
        if watch is None:
            log.warning("No primary watch %r for the owner of %s", owner.controller, touch)
            return
        refusal = self._refusal(watch, owner, touch)
        if refusal is not None:
            log.debug("Resource will not be watched/cached (%s): %s", refusal, touch)
            return
        key = (touch.group, touch.version, touch.plural)
        with self._lock:
            if self._stopped:
                return
            kind_watch = self._watches.get(key)
            new = kind_watch is None
            if kind_watch is None:
                resource = ResourceInfo(
                    group=touch.group,
                    version=touch.version,
                    kind=touch.kind,
                    plural=touch.plural,
                    namespaced=not touch.cluster_scoped,
                    has_status=False,
                )
                kind_watch = _KindWatch(
                    kube=self.kube,
                    queue=self.queue,
                    resource=resource,
                    index=self._index,
                    namespaces=self.namespaces,
                )
                self._watches[key] = kind_watch
        kind_watch.register(owner, touch)
        if new:
            log.info("Watching child resource %s/%s %s", touch.group, touch.version, touch.kind)
            kind_watch.start()

    def watched(self) -> set[GVK]:
        """The dependent kinds being watched."""
        with self._lock:
            return {
                GVK(w.resource.group, w.resource.version, w.resource.kind)
                for w in self._watches.values()
            }

    def synced(self, timeout: float) -> bool:
        """Wait until every watch has done its first list; False on timeout."""
        with self._lock:
            watches = list(self._watches.values())
        return all(w.synced(timeout) for w in watches)

    def alive(self) -> bool:
        """True while any watch thread runs."""
        with self._lock:
            return any(w.alive() for w in self._watches.values())

    def stop(self, timeout: float = 5.0) -> None:
        """End every watch thread; later touches are ignored."""
        with self._lock:
            self._stopped = True
            watches = list(self._watches.values())
        for kind_watch in watches:
            kind_watch.stop()
        for kind_watch in watches:
            kind_watch.join(timeout)
