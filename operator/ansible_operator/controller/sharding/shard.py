"""The shard coordinator: which CRs this replica runs, and the gate before every run.

Where it sits in the flow (only with `--sharding`; controller.manager builds
one `Shard` and wires it in)::

    kopf events --observe()--> Shard directory (every CR: creation time, claim)
    kopf / dependent events --WorkQueue.add()--> admit(): only this shard's keys
    WorkerPool --reconciler--> gate(): claim, release or run  (controller.reconciler)
    membership thread, every retry period: renew own Lease, list members,
        recompute the assignment, enqueue the keys that must move
    takeover thread: claim every CR of a dead member at once, enqueue them
        (controller.sharding.takeover)

Every replica sees every event and keeps the same directory, so all compute
the same owner for each CR (controller.sharding.assignment). The owner is a
wish; the claim annotation (controller.sharding.claims) is the right to run.
The gate runs in the worker that holds the key, after the reconciler's fresh
GET of the CR, so no run of that CR is in flight in this replica meanwhile:

* owner is me, claim is mine: run;
* owner is me, claim is free or its holder is dead: claim it (conditional
  write), then run;
* owner is me, the claim is a live member's: wait; that member releases it
  when its worker next holds the key (enqueued by its own tick);
* owner is another member, the claim is mine: release it (conditional
  write), do not run;
* otherwise: not mine, do not run.

docs/sharding.md has the argument that no two replicas ever run one CR at once.

Over 400 lines on purpose: the coordinator's state (the directory of CRs, the live
members, each CR's owner) is guarded by one lock across observe, admit, gate and
tick; split, each part would need the others' invariants.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from ansible_operator.controller.contract import Key, Outcome
from ansible_operator.controller.queue import Priority, WorkQueue
from ansible_operator.controller.sharding import claims
from ansible_operator.controller.sharding.assignment import Assignment, assign, placed
from ansible_operator.controller.sharding.grouplease import GroupLease
from ansible_operator.controller.sharding.membership import (
    Membership,
    MembershipConfig,
    member_identity,
)
from ansible_operator.controller.sharding.shardmetrics import ShardMetrics
from ansible_operator.controller.sharding.shardoptions import ShardOptions, check_options
from ansible_operator.controller.sharding.takeover import Candidate, Takeover
from ansible_operator.errors import ConfigError, Conflict, OperatorError, RetryLater
from ansible_operator.kube.client import JSON, KubeApi, ResourceInfo

log = logging.getLogger("ansible_operator.sharding")


@dataclass(slots=True)
class _Entry:
    created: str
    claim: str
    version: int = 0  # resourceVersion the claim was read at (0: unknown)


def _version(meta: Mapping[str, Any]) -> int:
    text = str(meta.get("resourceVersion") or "")
    return int(text) if text.isdigit() else 0


class Shard:
    """One replica's part of the shard group; see the module docstring."""

    def __init__(
        self,
        *,
        membership: Membership,
        queue: WorkQueue,
        metrics: ShardMetrics,
        load_factor: float,
        on_lost: Callable[[], None],
    ) -> None:
        self.membership = membership
        self.me = membership.identity
        self.queue = queue
        self.metrics = metrics
        self.load_factor = load_factor
        self.on_lost = on_lost
        self._lock = threading.Lock()
        self._directory: dict[Key, _Entry] = {}
        self._members: frozenset[str] = frozenset()
        self._table = Assignment((), load_factor=load_factor)
        self._dirty = False
        self._computed_at = 0.0
        self._kinds: dict[str, tuple[str, str]] = {}  # queue -> (apiVersion, kind)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.takeover = Takeover(
            kube=membership.kube,
            member=self.me,
            current=self._takeover_version,
            claimed=self._taken_over,
            fallback=lambda key: self.queue.add(key, priority=Priority.CHANGE),
        )
        cfg = membership.config
        self.group_lease = GroupLease(
            membership.kube,
            namespace=cfg.namespace,
            group=cfg.group,
            lease_duration=cfg.lease_duration,
            clock=membership.clock,
        )

    # -- life cycle ----------------------------------------------------------------

    def start(self, stop: threading.Event) -> bool:
        """Join the group, see the members once, then keep renewing; False if stopped first.

        Never while an unsharded leader of the same id holds its Lease
        (controller.sharding.grouplease): join, take the group Lease, and if
        a live unsharded leader holds it, leave and wait.
        Raises ConfigError if a Lease cannot be written (RBAC, namespace).
        """
        cfg = self.membership.config
        waiting = False
        while not stop.is_set():
            try:
                self.membership.join()
                leader = self.group_lease.hold()
            except OperatorError as err:  # ApiError included
                raise ConfigError(
                    f"--sharding: cannot write Leases in namespace {cfg.namespace}: {err}"
                ) from None
            if not leader:
                break
            if not waiting:
                log.warning(
                    "an unsharded replica (%s) leads with Lease %s/%s: waiting for it to stop",
                    leader,
                    cfg.namespace,
                    cfg.group,
                )
                waiting = True
            self.membership.leave()
            stop.wait(cfg.retry_period)
        if stop.is_set():
            return False
        self.takeover.start()
        self._round(renew=False)
        self._thread = threading.Thread(target=self._loop, name="shard-membership", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop renewing and release our Lease; call after the last run has ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
        self.takeover.stop()
        self.membership.leave()

    def members(self) -> frozenset[str]:
        with self._lock:
            return self._members

    def _loop(self) -> None:
        cfg = self.membership.config
        while not self._stop.wait(cfg.retry_period):
            self._round(renew=True)
            if self._stop.is_set():
                return
            if not self.membership.valid():
                log.error(
                    "shard member lease lost: could not renew within %ss; stopping",
                    cfg.renew_deadline,
                )
                self.on_lost()
                return

    def _round(self, *, renew: bool) -> None:
        if renew:
            self.membership.renew()
            try:
                foreign = self.group_lease.hold()
            except OperatorError as err:  # ApiError included
                log.warning("renewing the group lease failed: %s", err)
                foreign = ""
            if foreign:
                log.error("an unsharded replica (%s) took the group lease; stopping", foreign)
                self._stop.set()
                self.on_lost()
                return
        try:
            live = self.membership.refresh()
        except OperatorError as err:  # ApiError included
            log.warning("listing the shard members failed: %s", err)
            return
        self._set_members(frozenset(live))
        self.tick()

    def _set_members(self, live: frozenset[str]) -> None:
        with self._lock:
            before = self._members
            if live == before:
                return
            self._members = live
            self._dirty = True
            self._recompute()
        log.info(
            "shard members changed: %d live (joined: %s; left: %s)",
            len(live),
            ", ".join(sorted(live - before)) or "-",
            ", ".join(sorted(before - live)) or "-",
            extra={"members": sorted(live)},
        )
        self.metrics.members.set(len(live))

    # -- the directory and the assignment (lock held) ------------------------------

    def _recompute(self) -> None:
        items = [placed(key, entry.created) for key, entry in self._directory.items()]
        self._table = assign(sorted(self._members), items, load_factor=self.load_factor)
        self._dirty = False
        self._computed_at = self.membership.clock.monotonic()

    def _owner(self, key: Key) -> str | None:
        # A stale table is safe (the gate decides on the claim); recomputing at
        # most once per retry period keeps bursts of deletions cheap.
        if self._dirty and (
            key not in self._table.owner
            or self.membership.clock.monotonic() - self._computed_at
            >= self.membership.config.retry_period
        ):
            self._recompute()
        return self._table.owner.get(key)

    # -- called by the watch, the queue and the reconciler ---------------------------

    def observe(self, queue: str, event_type: str, body: Mapping[str, Any]) -> None:
        """Record a primary-watch event (every CR, every replica)."""
        meta = body.get("metadata") or {}
        key = Key(
            controller=queue, namespace=str(meta.get("namespace") or ""), name=str(meta["name"])
        )
        claim = claims.holder(body)
        with self._lock:
            if queue not in self._kinds:
                self._kinds[queue] = (
                    str(body.get("apiVersion") or ""),
                    str(body.get("kind") or ""),
                )
            if event_type == "DELETED":
                if self._directory.pop(key, None) is not None:
                    self._dirty = True
                return
            entry = self._directory.get(key)
            version = _version(meta)
            if entry is None:
                created = str(meta.get("creationTimestamp") or "")
                self._directory[key] = _Entry(created=created, claim=claim, version=version)
                item = placed(key, created)
                if not self._dirty and self._table.can_append(item):
                    self._table.append(item)
                else:
                    self._dirty = True
                return
            if version and version < entry.version:
                return  # older than what the gate read or wrote: keep the newer claim
            released = bool(entry.claim) and not claim
            entry.claim, entry.version = claim, version
            mine = released and self._owner(key) == self.me
        if mine:
            self.queue.add(key, priority=Priority.CHANGE)

    def admit(self, key: Key) -> bool:
        """Should this replica queue `key` at all? (Its owner or its claim holder.)"""
        with self._lock:
            entry = self._directory.get(key)
            if entry is None:
                return False
            return entry.claim == self.me or self._owner(key) == self.me

    def tick(self) -> None:
        """Queue every key that must change hands here: to claim, to take over, to release.

        The CRs of dead members go to the takeover thread, which claims them
        all at once (controller.sharding.takeover) and queues them to run.
        """
        with self._lock:
            if self._dirty:
                self._recompute()
            members = self._members
            rows = [(k, e, self._table.owner.get(k)) for k, e in self._directory.items()]
            kinds = dict(self._kinds)
        owned = claimed = 0
        dead: list[Candidate] = []
        for key, entry, owner in rows:
            claim = entry.claim
            owned += owner == self.me
            claimed += claim == self.me
            to_take = owner == self.me and claim != self.me and claim not in members
            to_release = owner != self.me and claim == self.me
            if to_take and claim and entry.version and key.controller in kinds:
                api_version, kind = kinds[key.controller]
                dead.append(Candidate(key, claim, api_version, kind))
            # A key a worker holds is being settled by the gate; adding it would
            # only run it once more.
            elif (to_take or to_release) and not self.queue.is_pending(key):
                self.queue.add(key, priority=Priority.CHANGE)
        self.takeover.submit(dead)
        self.metrics.owned.set(owned)
        self.metrics.claimed.set(claimed)

    def _takeover_version(self, candidate: Candidate) -> int | None:
        """The resourceVersion to take `candidate` over at, or None if no longer due."""
        if not self.membership.valid():
            return None
        with self._lock:
            entry = self._directory.get(candidate.key)
            if entry is None or entry.claim != candidate.holder or not entry.version:
                return None
            if self._owner(candidate.key) != self.me:
                return None
            version = entry.version
        return None if self.membership.is_live(candidate.holder) else version

    def _taken_over(self, candidate: Candidate, obj: JSON) -> None:
        self._note(candidate.key, obj)
        self.metrics.handovers.labels(direction="taken_over").inc()
        log.info("took over %s from dead shard member %s", candidate.key, candidate.holder)
        self.queue.add(candidate.key, priority=Priority.CHANGE)

    def gate(self, key: Key, res: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any] | Outcome:
        """Decide, on a fresh read of the CR, whether this replica runs it now.

        Returns the object to run (after claiming it if need be), or the
        Outcome that ends this reconcile without a run.
        """
        retry = self.membership.config.retry_period
        if not self.membership.valid():
            return Outcome(error=RetryLater("this shard member's Lease is stale", delay=retry))
        holder = claims.holder(obj)
        self._note(key, obj)
        with self._lock:
            entry = self._directory.get(key)
            owner = self._owner(key) if entry is not None else None
        if owner == self.me:
            return self._take(key, res, obj, holder)
        if holder == self.me:
            return self._release(key, res, obj, owner)
        return Outcome(forget=True)

    def _take(
        self, key: Key, res: ResourceInfo, obj: dict[str, Any], holder: str
    ) -> dict[str, Any] | Outcome:
        if holder == self.me:
            return obj
        if holder and self.membership.is_live(holder):
            # Its holder releases it once idle; the release event queues it here.
            log.debug("%s waits for %s to release it", key, holder)
            return Outcome(requeue_after=self.membership.config.lease_duration)
        try:
            claimed = claims.claim(self.membership.kube, res, obj, member=self.me)
        except Conflict:
            return Outcome(error=RetryLater(f"claiming {key} raced a write", delay=0.2))
        self._note(key, claimed)
        direction = "taken_over" if holder else "claimed"
        self.metrics.handovers.labels(direction=direction).inc()
        if holder:
            log.info("took over %s from dead shard member %s", key, holder)
        return claimed

    def _release(
        self, key: Key, res: ResourceInfo, obj: dict[str, Any], owner: str | None
    ) -> Outcome:
        try:
            released = claims.release(self.membership.kube, res, obj)
        except Conflict:
            return Outcome(error=RetryLater(f"releasing {key} raced a write", delay=0.2))
        self._note(key, released)
        self.metrics.handovers.labels(direction="released").inc()
        log.info("released %s to shard member %s", key, owner or "-")
        return Outcome(forget=True)

    def _note(self, key: Key, obj: Mapping[str, Any]) -> None:
        """Remember the claim of a fresh read or our own write of the CR."""
        version = _version(obj.get("metadata") or {})
        with self._lock:
            entry = self._directory.get(key)
            if entry is not None and version >= entry.version:
                entry.claim, entry.version = claims.holder(obj), version


def make_shard(
    kube: KubeApi,
    options: ShardOptions,
    *,
    queue: WorkQueue,
    registry: CollectorRegistry,
    on_lost: Callable[[], None],
) -> Shard:
    """A Shard for this replica, not yet started; the queue admits only its keys."""
    check_options(options)
    config = MembershipConfig(
        namespace=options.namespace,
        group=options.group,
        identity=member_identity(),
        lease_duration=options.lease_duration,
        renew_deadline=options.renew_deadline,
        retry_period=options.retry_period,
    )
    shard = Shard(
        membership=Membership(kube, config),
        queue=queue,
        metrics=ShardMetrics(registry),
        load_factor=options.load_factor,
        on_lost=on_lost,
    )
    queue.set_admit(shard.admit)
    return shard
