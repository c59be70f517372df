"""Drift checks in the operator: plan a CR periodically and report drift, change nothing.

Where it sits (docs/plan.md, "Drift checks and observe-only"): the manager
builds one `DriftChecker` per watch and one `DriftScheduler` over them, and
feeds the scheduler every kopf event of the primary watches (`observe`).
When a CR's check is due, a scheduler thread holds the CR's queue key
(`WorkQueue.claim`: never while a reconcile of the CR waits or runs, and
within the same per-kind and total limits), and the checker:

1. reads the CR live; gone, being deleted or no longer checked: stop;
2. in sharded mode asks the reconciler's gate (controller.sharding) whether
   this replica owns the CR; not ours: check again a period later;
3. plans it with its `Planner` (plan/engine.py's `drift_findings`: the same
   plan as `ansible-operator plan KIND NAME`, through a read-only proxy, so
   nothing is changed);
4. sets the `Drifted` condition (status.driftcondition), posts one Event when drift
   appears (Warning `Drifted`) or goes away (Normal `DriftResolved`), and
   updates the gauge of drifted CRs of the kind.

A drift check is no reconcile: no reconcile metrics, Events or
requeues, and a failed plan only makes the condition Unknown.
"""

from __future__ import annotations

import datetime
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from ansible_operator.config import defaults
from ansible_operator.config.watches import Watch
from ansible_operator.controller import statuswrite
from ansible_operator.controller.contract import Gate, Key, Outcome
from ansible_operator.controller.driftsettings import settings_for
from ansible_operator.controller.queue import WorkQueue
from ansible_operator.controller.reporting import EventSink
from ansible_operator.errors import BadAnnotation, OperatorError
from ansible_operator.kube.client import KindResource, KubeApi, ResourceInfo
from ansible_operator.observability.eventrecorder import ObjectRef
from ansible_operator.observability.metrics import format_gvk
from ansible_operator.status import driftcondition as status_drift

if TYPE_CHECKING:
    # Only a type here: the engine (and the runner, difflib ...) is imported by the
    # first check, through the planner controller/wiring.py binds.
    from ansible_operator.plan.engine import Findings

log = logging.getLogger("ansible_operator.drift")

# Event reasons (docs/observability.md).
EVENT_DRIFTED: Final = "Drifted"
EVENT_RESOLVED: Final = "DriftResolved"


class Planner(Protocol):
    """Plans one existing CR without changing anything: plan/engine.py's `drift_findings`
    with the operator's runner (the manager binds it), or a fake in tests."""

    def __call__(self, watch: Watch, resource: ResourceInfo, obj: dict[str, Any]) -> Findings: ...


class DriftGauge(Protocol):
    """The gauge of drifted CRs per kind (observability.metrics.OperatorMetrics)."""

    def drifted_resources(self, *, gvk: str, count: int) -> None: ...


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class DriftChecker:
    """The drift checks of one watch's CRs; see the module docstring."""

    def __init__(
        self,
        *,
        watch: Watch,
        gvk: str,
        kube: KubeApi,
        planner: Planner,
        events: EventSink,
        gauge: DriftGauge,
        gate: Gate | None = None,
        now: Callable[[], datetime.datetime] = _now,
        cancel: threading.Event | None = None,
    ) -> None:
        """`cancel`: the event the planner's runs are cancelled by (the operator
        stops); a plan that ends after it was set reports nothing."""
        self.watch, self.gvk, self.kube = watch, gvk, kube
        self.planner, self.events, self.gauge = planner, events, gauge
        self.gate, self.now = gate, now
        self.cancel = cancel if cancel is not None else threading.Event()
        self._lock = threading.Lock()
        self._drifted: set[Key] = set()
        self._last: dict[Key, str] = {}  # last True/False found, for Events on changes only
        self._kind = KindResource(
            kube, group=watch.gvk.group, version=watch.gvk.version, kind=watch.gvk.kind
        )

    @property
    def resource(self) -> ResourceInfo:
        return self._kind()

    def check(self, key: Key) -> float | None:
        """Check `key` once; seconds until its next check, None when it has none."""
        res = self.resource
        obj = self.kube.get_or_none(res, namespace=key.namespace, name=key.name)
        if obj is None:
            self.forget(key)
            return None
        try:
            settings = settings_for(self.watch, obj)
        except BadAnnotation as err:
            log.warning("%s: no drift check: %s", key, err)  # the reconciler reports it
            return None
        if not settings.period or obj["metadata"].get("deletionTimestamp"):
            return None
        if self.gate is not None:
            gated = self.gate(key, res, obj)
            if isinstance(gated, Outcome):
                self.forget(key)  # another replica's CR (for now): its gauge counts it
                return settings.period
            obj = gated
        return self._plan(key, res, obj, settings.period)

    def _plan(
        self, key: Key, res: ResourceInfo, obj: dict[str, Any], period: float
    ) -> float | None:
        """Plan the CR and report what was found; as check()."""
        started = time.monotonic()
        findings = self.planner(self.watch, res, obj)
        if self.cancel.is_set():
            # Cut short by the shutdown: no finding, and no Unknown to write (the
            # next operator's first check would post the drift Event again).
            log.debug("Drift check of %s cancelled", key)
            return period
        state = status_drift.found(
            findings.drifted, error=findings.error, shown=defaults.DRIFT_MESSAGE_OBJECTS
        )
        log.info("Drift check of %s: %s (%.1fs)", key, state.message, time.monotonic() - started)
        if not self._write(key, res, obj, state):
            self.forget(key)  # deleted while it was planned
            return None
        self._announce(key, obj, state)
        return period

    def forget(self, key: Key) -> None:
        """`key` is no longer checked here (gone, switched off, another replica's)."""
        with self._lock:
            known = self._last.pop(key, None) is not None or key in self._drifted
            self._drifted.discard(key)
            count = len(self._drifted)
        if known:
            self.gauge.drifted_resources(gvk=self.gvk, count=count)

    def _write(self, key: Key, res: ResourceInfo, obj: Mapping[str, Any], state: Any) -> bool:
        """Set the Drifted condition; False when the CR is gone."""
        if not res.has_status:
            return True  # no status subresource: the Event and the gauge still tell
        generation = obj["metadata"].get("generation")

        def compute(status: Any) -> dict[str, Any]:
            return status_drift.with_drift(status, state, generation=generation, now=self.now())

        try:
            return statuswrite.write(self.kube, res, obj, compute) is not None
        except OperatorError as err:
            # By key: the metadata may carry the whole CR (last-applied-configuration).
            log.warning("could not write the Drifted condition of %s: %s", key, err)
            return True

    def _announce(self, key: Key, obj: Mapping[str, Any], state: Any) -> None:
        if state.status == status_drift.UNKNOWN:
            return
        drifted = state.status == status_drift.DRIFTED
        with self._lock:
            before = self._last.get(key)
            if before is None:
                written = status_drift.current(obj.get("status"))
                before = str(written.get("status")) if written is not None else None
            self._last[key] = state.status
            (self._drifted.add if drifted else self._drifted.discard)(key)
            count = len(self._drifted)
        self.gauge.drifted_resources(gvk=self.gvk, count=count)
        ref = ObjectRef.from_object(obj)
        if drifted and before != status_drift.DRIFTED:
            self.events.record(ref, type="Warning", reason=EVENT_DRIFTED, message=state.message)
        elif not drifted and before == status_drift.DRIFTED:
            self.events.record(ref, type="Normal", reason=EVENT_RESOLVED, message=state.message)


class DriftScheduler:
    """When each CR is checked next, and the threads that check; see the module docstring."""

    def __init__(
        self,
        *,
        queue: WorkQueue,
        checkers: Mapping[str, DriftChecker],
        workers: int = defaults.DRIFT_CHECK_WORKERS,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
        cancel: threading.Event | None = None,
    ) -> None:
        """`cancel` is set by stop(): the checkers' planners and checkers share it."""
        self._queue, self._checkers = queue, checkers
        self.cancel = cancel if cancel is not None else threading.Event()
        self._clock, self._jitter = clock, jitter
        self._cond = threading.Condition()
        self._period: dict[Key, float] = {}  # CRs with drift checks, and their period
        self._due: dict[Key, float] = {}
        self._running: set[Key] = set()
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._work, name=f"drift-{n}", daemon=True)
            for n in range(max(1, workers))
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, *, grace: float) -> None:
        """Start no more checks, cancel the running ones (they change nothing, so
        nothing is lost) and wait up to `grace` seconds for them to end."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.cancel.set()
        deadline = time.monotonic() + grace
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))

    def due(self, key: Key) -> float | None:
        """When `key`'s next check is due (clock time), None when none is scheduled."""
        with self._cond:
            return self._due.get(key)

    def observe(self, queue: str, event_type: str, body: Mapping[str, Any]) -> None:
        """A watch event of a CR (the kopf hook): schedule, reschedule or drop its checks."""
        checker = self._checkers.get(queue)
        meta = body.get("metadata") or {}
        if checker is None:
            return
        key = Key(
            controller=queue, namespace=str(meta.get("namespace") or ""), name=str(meta["name"])
        )
        period = 0.0 if event_type == "DELETED" else self._period_of(checker.watch, body)
        with self._cond:
            # A check running now is forgotten when it ends (_reschedule).
            dropped = not period and key not in self._running
            if not period:
                self._period.pop(key, None)
                self._due.pop(key, None)
            else:
                known = self._period.get(key)
                self._period[key] = period
                if key not in self._running and (known is None or known != period):
                    # New, or a new period: spread the first checks over the period.
                    wanted = self._clock() + period * (0.5 + 0.5 * self._jitter())
                    if key not in self._due or wanted < self._due[key]:
                        self._due[key] = wanted
                        self._cond.notify()
        if event_type == "DELETED" or dropped:
            checker.forget(key)

    @staticmethod
    def _period_of(watch: Watch, body: Mapping[str, Any]) -> float:
        selector = watch.selector
        labels = (body.get("metadata") or {}).get("labels") or {}
        if selector is not None and not selector.matches(labels):
            return 0.0
        try:
            return settings_for(watch, body).period
        except BadAnnotation:
            return 0.0

    def _next(self) -> Key | None:
        """Wait for the next due check and take it; None when stopping."""
        with self._cond:
            while not self._stopping:
                now = self._clock()
                ready = [k for k, due in self._due.items() if due <= now]
                if ready:
                    key = min(ready, key=self._due.__getitem__)
                    del self._due[key]
                    self._running.add(key)
                    return key
                soonest = min(self._due.values(), default=None)
                self._cond.wait(None if soonest is None else max(0.01, soonest - now))
            return None

    def _work(self) -> None:
        while (key := self._next()) is not None:
            delay: float | None = defaults.DRIFT_CHECK_RETRY
            try:
                if self._queue.claim(key):
                    try:
                        delay = self._checkers[key.controller].check(key)
                    except Exception:
                        log.exception("Drift check of %s failed", key)
                        delay = self._period.get(key)
                    finally:
                        self._queue.release(key)
            finally:
                self._reschedule(key, delay)

    def _reschedule(self, key: Key, delay: float | None) -> None:
        with self._cond:
            self._running.discard(key)
            if delay is None:
                self._period.pop(key, None)
            dropped = key not in self._period  # deleted or switched off meanwhile
            if not dropped and key not in self._due:
                self._due[key] = self._clock() + cast(float, delay)
                self._cond.notify()
        if dropped:
            self._checkers[key.controller].forget(key)


def build_scheduler(
    watches: Sequence[Watch],
    *,
    queue: WorkQueue,
    planner: Planner,
    kube: KubeApi,
    events: EventSink,
    gauge: DriftGauge,
    gate: Gate | None,
    cancel: threading.Event,
) -> DriftScheduler:
    """One checker per watch (keyed by controller name) under one scheduler, not started.

    `cancel` must be the event the planner was built with: the scheduler's
    stop() sets it.
    """
    checkers = {
        watch.controller_name: DriftChecker(
            watch=watch,
            gvk=format_gvk(group=watch.group, version=watch.version, kind=watch.kind),
            kube=kube,
            planner=planner,
            events=events,
            gauge=gauge,
            gate=gate,
            cancel=cancel,
        )
        for watch in watches
    }
    return DriftScheduler(queue=queue, checkers=checkers, cancel=cancel)
