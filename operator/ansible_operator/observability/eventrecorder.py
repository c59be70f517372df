"""Kubernetes Events about custom resources, posted without ever blocking the caller.

Where this sits: the `run` command (controller.manager) builds one
`EventRecorder` on a `kube.eventposter.KubeEventPoster` and stops it at
shutdown; the reconciler (through controller.reporting) calls
`record(ref, type=..., reason=..., message=...)` when a run starts, succeeds
or fails (the reasons are the controller's choice). The Go operator records
no Events for CRs; this is an addition.

This layer is below kube, so the recorder posts through `EventPoster`, a
Protocol of the two calls it makes, which kube implements; the errors it
acts on are errors.py's.

`record()` only takes a lock and appends to a bounded queue; a daemon thread
posts to the API. Like client-go's recorder it:

* aggregates: the same (object, type, reason, message) again within 10
  minutes PATCHes `count` and `lastTimestamp` of the Event it already posted
  instead of creating another one;
* rate-limits per object with a token bucket (burst 25, one token per 5 s),
  so a hot loop cannot flood the API; drops are counted and logged once when
  an object starts being throttled;
* posts Events of cluster-scoped objects in the `default` namespace;
* retries transient API failures (KubeUnavailable: connection errors, 429,
  5xx; and 408) a few times.

When the queue is full the Event is dropped and counted: an Event is never
worth slowing a reconcile down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TypeVar

from ansible_operator.errors import ApiError, KubeUnavailable, NotFound
from ansible_operator.observability.logging import ObjectLogger

__all__ = ["EventPoster", "EventRecorder", "EventType", "ObjectRef", "RecorderStats"]

# The name this module's logger always had (it was observability/events.py):
# log lines carry it, and users may filter on it.
_log = logging.getLogger("ansible_operator.observability.events")

EventType = Literal["Normal", "Warning"]
_TYPES: Final = ("Normal", "Warning")
MESSAGE_LIMIT: Final = 1024  # bytes; the API server's limit for an Event's message
REASON_LIMIT: Final = 128
CLUSTER_EVENTS_NAMESPACE: Final = "default"  # where client-go puts Events of cluster-scoped objects
_CACHE_SIZE: Final = 4096  # aggregation entries kept, as client-go's LRU
_REQUEST_TIMEOUT: Final = 408  # an ApiError worth retrying; 429 and 5xx are KubeUnavailable
_T = TypeVar("_T")


class EventPoster(Protocol):
    """The recorder's two calls to the API server; kube.eventposter.KubeEventPoster.

    Both raise errors.py's errors: KubeUnavailable (unreachable, 429, 5xx:
    retried), NotFound (for `patch`: the Event expired), any other ApiError
    (refused). `timeout` bounds one request, in seconds.
    """

    def create(self, namespace: str, body: Mapping[str, Any], *, timeout: float) -> None:
        """POST a core/v1 Event into `namespace`."""
        ...

    def patch(self, namespace: str, name: str, body: Mapping[str, Any], *, timeout: float) -> None:
        """Merge-patch the Event `name` in `namespace`."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectRef:
    """The object an Event is about; `namespace` is "" for cluster-scoped objects."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference to a Kubernetes object given as a dict (a CR body)."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid") or ""),
        )


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """Counters since the recorder started (a snapshot)."""

    recorded: int = 0  # accepted by record()
    created: int = 0  # new Events posted
    patched: int = 0  # existing Events whose count went up
    dropped_queue_full: int = 0
    dropped_rate_limited: int = 0
    failed: int = 0  # given up on after retries, or rejected by the API


@dataclass(frozen=True, slots=True)
class _Item:
    ref: ObjectRef
    type: str
    reason: str
    message: str
    at: datetime


@dataclass(slots=True)
class _Posted:
    """An Event already in the API, for aggregation."""

    namespace: str
    name: str
    count: int
    last_seen: float  # clock() of the last occurrence


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


_STOP: Final = object()
_THROTTLED: Final = "Too many Events for one object; dropping more until its rate limit recovers"
_QUEUE_FULL: Final = "Event queue is full; dropping Events until it drains"


def _truncate(text: str, limit: int) -> str:
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    # Cut on a character boundary and say that something was cut.
    return encoded[: limit - 3].decode(errors="ignore") + "..."


class EventRecorder:
    """Posts core/v1 Events from a background thread; see the module docstring."""

    def __init__(
        self,
        poster: EventPoster,
        *,
        component: str = "ansible-operator",
        instance: str | None = None,
        queue_size: int = 1000,
        burst: int = 25,
        refill_seconds: float = 5.0,
        aggregate_seconds: float = 600.0,
        attempts: int = 3,
        retry_delay: float = 0.5,
        request_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._poster = poster
        self._component = component
        self._instance = _truncate(instance or socket.gethostname(), 128)
        self._burst = burst
        self._refill_seconds = refill_seconds
        self._window = aggregate_seconds
        self._attempts = max(1, attempts)
        self._retry_delay = retry_delay
        self._timeout = request_timeout
        self._clock = clock
        self._queue: queue.Queue[_Item | object] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0  # queued or being posted
        self._counts: dict[str, int] = {f.name: 0 for f in dataclasses.fields(RecorderStats)}
        self._buckets: dict[ObjectRef, _Bucket] = {}
        self._throttled: set[ObjectRef] = set()
        self._queue_full_logged = False
        self._closed = False
        self._stopping = threading.Event()
        self._posted: OrderedDict[tuple[ObjectRef, str, str, str], _Posted] = OrderedDict()
        self._thread = threading.Thread(target=self._work, name="event-recorder", daemon=True)
        self._thread.start()

    # --- caller side: never blocks -------------------------------------------------------

    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None:
        """Queue an Event about `ref`; returns at once. `type` is "Normal" or "Warning"."""
        if type not in _TYPES:
            raise ValueError(f"event type {type!r}: expected Normal or Warning")
        item = _Item(
            ref=ref,
            type=type,
            reason=_truncate(reason, REASON_LIMIT),
            message=_truncate(message, MESSAGE_LIMIT),
            at=datetime.now(UTC).replace(microsecond=0),
        )
        with self._lock:
            if self._closed:
                return
            if self._take_token(ref):
                self._throttled.discard(ref)
                warning = self._enqueue(item)
            else:
                self._counts["dropped_rate_limited"] += 1
                first_drop = ref not in self._throttled
                self._throttled.add(ref)
                warning = _THROTTLED if first_drop else None
        if warning is not None:  # logged outside the lock: a slow log sink must not stall callers
            _object_log(ref).warning(warning)

    def _enqueue(self, item: _Item) -> str | None:
        """Queue `item` (lock held); the warning to log if it had to be dropped."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._counts["dropped_queue_full"] += 1
            first_drop = not self._queue_full_logged
            self._queue_full_logged = True
            return _QUEUE_FULL if first_drop else None
        self._queue_full_logged = False
        self._pending += 1
        self._counts["recorded"] += 1
        return None

    def _take_token(self, ref: ObjectRef) -> bool:
        now = self._clock()
        bucket = self._buckets.get(ref)
        if bucket is None:
            if len(self._buckets) >= _CACHE_SIZE:
                self._forget_full_buckets(now)
            bucket = self._buckets[ref] = _Bucket(tokens=float(self._burst), updated=now)
        refill = (now - bucket.updated) / self._refill_seconds if self._refill_seconds > 0 else 1e9
        bucket.tokens = min(float(self._burst), bucket.tokens + refill)
        bucket.updated = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _forget_full_buckets(self, now: float) -> None:
        # A bucket that has refilled completely is the same as no bucket.
        seconds_to_full = self._burst * self._refill_seconds
        for ref in [r for r, b in self._buckets.items() if now - b.updated >= seconds_to_full]:
            del self._buckets[ref]

    @property
    def stats(self) -> RecorderStats:
        with self._lock:
            return RecorderStats(**self._counts)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued Event was posted (or given up on); False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Post what is queued (up to `timeout`), then stop; later records are ignored."""
        with self._lock:
            self._closed = True
        self.flush(timeout)
        self._stopping.set()
        # When the queue is full the worker is busy, not waiting: it sees _stopping after its item.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        self._thread.join(timeout=max(1.0, timeout))
        if self._pending:
            _log.warning("Events not posted at shutdown", extra={"count": self._pending})

    # --- worker side ----------------------------------------------------------------------

    def _work(self) -> None:
        while not self._stopping.is_set():
            item = self._queue.get()
            if not isinstance(item, _Item):
                break
            try:
                self._post(item)
            except Exception as err:
                self._count("failed")
                _object_log(item.ref).warning(
                    "Could not post Event", extra={"reason": item.reason, "error": _describe(err)}
                )
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _post(self, item: _Item) -> None:
        key = (item.ref, item.type, item.reason, item.message)
        now = self._clock()
        self._expire(now)
        seen = self._posted.get(key)
        if seen is not None:
            seen.count += 1
            seen.last_seen = now
            self._posted.move_to_end(key)
            if self._patch(seen, item):
                self._count("patched")
                return
            count = seen.count  # the Event expired server-side: post it again, count kept
        else:
            count = 1
        self._posted[key] = self._create(item, count=count, now=now)
        self._count("created")

    def _expire(self, now: float) -> None:
        while self._posted:
            oldest = next(iter(self._posted.values()))
            if len(self._posted) < _CACHE_SIZE and now - oldest.last_seen <= self._window:
                return
            self._posted.popitem(last=False)

    def _create(self, item: _Item, *, count: int, now: float) -> _Posted:
        ref = item.ref
        namespace = ref.namespace or CLUSTER_EVENTS_NAMESPACE
        # client-go's naming: the object's name and a hex timestamp, unique enough.
        name = f"{ref.name[:200]}.{time.time_ns():x}"
        at = item.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace or None,
            "uid": ref.uid or None,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "type": item.type,
            "reason": item.reason,
            "message": item.message,
            "count": count,
            "firstTimestamp": at,
            "lastTimestamp": at,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }
        self._retrying(lambda: self._poster.create(namespace, body, timeout=self._timeout))
        return _Posted(namespace=namespace, name=name, count=count, last_seen=now)

    def _patch(self, seen: _Posted, item: _Item) -> bool:
        """Bump count and lastTimestamp of an Event we posted; False if it no longer exists."""
        patch = {
            "count": seen.count,
            "lastTimestamp": item.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "message": item.message,
        }
        try:
            self._retrying(
                lambda: self._poster.patch(seen.namespace, seen.name, patch, timeout=self._timeout)
            )
        except NotFound:
            return False
        return True

    def _retrying(self, call: Callable[[], _T]) -> _T:
        for attempt in range(1, self._attempts + 1):
            try:
                return call()
            except KubeUnavailable:
                if attempt == self._attempts:
                    raise
            except ApiError as err:
                if err.status != _REQUEST_TIMEOUT or attempt == self._attempts:
                    raise
            # Back off, but give up at once when the operator is shutting down.
            if self._stopping.wait(self._retry_delay * 2 ** (attempt - 1)):
                raise TimeoutError("stopping")
        raise AssertionError("unreachable")


def _object_log(ref: ObjectRef) -> ObjectLogger:
    # Through ObjectLogger: a plain logger refuses a field called "name".
    return ObjectLogger(_log, {"namespace": ref.namespace, "name": ref.name, "kind": ref.kind})


def _describe(err: BaseException) -> str:
    if isinstance(err, ApiError):
        return f"({err.status}) {err.reason or err.message}"
    return f"{type(err).__name__}: {err}"
