"""Membership of a shard group: this replica's own Lease, and the Leases of the others.

Called by controller.sharding.shard, from its membership thread (one round
every retry period: `renew`, `refresh`), from the reconcile gate and the
takeover thread (`valid`, `is_live`), and at start and stop (`join`,
`leave`). API calls go through the `KubeApi` seam and readings of time
through an injected `clocks.Clock`, so tests run it on kube.fakekube.FakeKube
and a FakeClock.

Each replica holds a coordination.k8s.io/v1 Lease of its own, named by its
identity and labelled `GROUP_LABEL=<group>` (the `--leader-election-id`), so
`kubectl get leases -l <GROUP_LABEL>=<group>` lists the members. The
semantics are client-go's, as in controller.leader, with the same durations:

* the holder renews its Lease every retry period; it counts as renewed from
  the moment it *sent* the successful request (never later than the moment
  the API server stored it);
* `valid()` is false once the last renewal is `renew_deadline` old: the
  replica then starts no run, and its `on_lost` cancels running ones;
* another replica counts a member as dead once it has seen the member's
  Lease record unchanged for `leaseDurationSeconds` on its own monotonic
  clock (so clock skew between nodes does not matter), or released
  (holderIdentity ""), or gone. Since renew_deadline < lease_duration, by
  then the member has stopped running anything.

On graceful shutdown a member releases its Lease; dead members' Leases are
deleted by the survivors once they have been dead for a further lease
duration, so restarts leave nothing behind.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from ansible_operator.clocks import SYSTEM, Clock
from ansible_operator.controller.leader import LEASES, ObservedLease, lease_object, now_micro
from ansible_operator.errors import Conflict, NotFound, OperatorError
from ansible_operator.kube.client import KubeApi

log = logging.getLogger("ansible_operator.sharding")

#: The label on every member Lease; its value is the shard group.
GROUP_LABEL = "sharding.ansible.sdk.operatorframework.io/group"


def member_identity() -> str:
    """A unique, DNS-safe member name: the host (pod) name plus a random suffix."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")[:40] or "member"
    return f"{host}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class MembershipConfig:
    namespace: str
    group: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


@dataclass
class _Seen(ObservedLease):
    dead_since: float | None = None


@dataclass
class MemberView:
    """What this replica knows about the group's Leases, judged on its own clock."""

    seen: dict[str, _Seen] = field(default_factory=dict)

    def update(self, leases: list[dict[str, Any]], now: float) -> None:
        names = set()
        for lease in leases:
            name = str(lease["metadata"]["name"])
            names.add(name)
            seen = self.seen.get(name)
            if seen is None:
                seen = self.seen[name] = _Seen(since=now)
            before = seen.record
            seen.observe(lease.get("spec") or {}, now)
            if seen.record != before:
                seen.dead_since = None  # a new record: judged afresh
        for name in set(self.seen) - names:
            del self.seen[name]  # deleted: dead, and nothing to remember

    def live(self, now: float) -> set[str]:
        alive = set()
        for name, seen in self.seen.items():
            if seen.holder and not seen.expired(now):
                seen.dead_since = None
                alive.add(name)
            elif seen.dead_since is None:
                seen.dead_since = now
        return alive

    def collectable(self, now: float) -> list[str]:
        """Leases dead for over a further lease duration: safe to delete."""
        return [
            name
            for name, seen in self.seen.items()
            if seen.dead_since is not None and now >= seen.dead_since + seen.duration
        ]


class Membership:
    """This replica's Lease and its view of the others'; not thread-safe beyond `valid()`."""

    def __init__(self, kube: KubeApi, config: MembershipConfig, *, clock: Clock = SYSTEM) -> None:
        self.kube = kube
        self.config = config
        self.clock = clock
        self.identity = config.identity
        self.view = MemberView()
        self._lock = threading.Lock()  # the view: the membership thread and the workers
        self._renewed_at: float | None = None  # clock.monotonic() the last renewal was sent
        self._lease: dict[str, Any] | None = None

    def valid(self) -> bool:
        """True while this replica's Lease is fresh enough to start runs."""
        renewed = self._renewed_at
        return renewed is not None and self.clock.monotonic() - renewed < self.config.renew_deadline

    def _body(self) -> dict[str, Any]:
        cfg = self.config
        now = now_micro(self.clock)
        spec = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        labels = {GROUP_LABEL: cfg.group}
        return lease_object(name=cfg.identity, namespace=cfg.namespace, spec=spec, labels=labels)

    def join(self) -> None:
        """Create (or re-take, after `leave`) our Lease; raises ApiError/OperatorError."""
        cfg = self.config
        sent = self.clock.monotonic()
        body = self._body()
        try:
            self._lease = self.kube.create(LEASES, namespace=cfg.namespace, body=body)
        except Conflict:
            current = self.kube.get(LEASES, namespace=cfg.namespace, name=cfg.identity)
            current["spec"] = body["spec"]
            self._lease = self.kube.replace(LEASES, current)
        self._renewed_at = sent
        log.info(
            "joined shard group %s as %s (Lease %s/%s)",
            self.config.group,
            self.identity,
            self.config.namespace,
            self.identity,
        )

    def renew(self) -> bool:
        """One renewal; False if it failed (the caller judges the deadline)."""
        if self._lease is None:
            return False
        lease = dict(self._lease)
        lease["spec"] = {**lease["spec"], "renewTime": now_micro(self.clock)}
        sent = self.clock.monotonic()
        try:
            self._lease = self.kube.replace(LEASES, lease)
        except NotFound:
            # Deleted by the others: they judged us dead. Never come back.
            self._lease = None
            return False
        except OperatorError as err:  # ApiError included
            log.warning("renewing the member lease failed: %s", err)
            return False
        self._renewed_at = sent
        return True

    def refresh(self) -> set[str]:
        """List the group's Leases; the live members (this one included while valid)."""
        cfg = self.config
        listing = self.kube.list_page(
            LEASES, namespace=cfg.namespace, label_selector=f"{GROUP_LABEL}={cfg.group}"
        )
        now = self.clock.monotonic()
        with self._lock:
            self.view.update(listing.items, now)
            live = self.view.live(now)
            collectable = self.view.collectable(now)
        live.discard(self.identity)
        if self.valid():
            live.add(self.identity)
        for name in collectable:
            if name != self.identity:
                self._delete(name)
        return live

    def is_live(self, member: str) -> bool:
        """Is `member` alive? A member never listed is looked up (it may have just joined)."""
        if member == self.identity:
            return self.valid()
        now = self.clock.monotonic()
        with self._lock:
            if member in self.view.seen:
                return member in self.view.live(now)
        try:
            lease = self.kube.get(LEASES, namespace=self.config.namespace, name=member)
        except NotFound:
            return False
        if (lease.get("metadata", {}).get("labels") or {}).get(GROUP_LABEL) != self.config.group:
            return False
        spec = lease.get("spec") or {}
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        with self._lock:
            duration = float(spec.get("leaseDurationSeconds") or 0)
            self.view.seen.setdefault(member, _Seen(record=record, since=now, duration=duration))
        return bool(record[0])

    def _delete(self, name: str) -> None:
        try:
            self.kube.delete(LEASES, namespace=self.config.namespace, name=name)
            log.info("deleted the Lease of dead shard member %s", name)
        except NotFound:
            pass
        except OperatorError as err:  # ApiError included
            log.warning("deleting the Lease of dead shard member %s failed: %s", name, err)
        with self._lock:
            self.view.seen.pop(name, None)

    def leave(self) -> None:
        """Release this replica's Lease (after its last run), so the others take over at once."""
        lease, self._lease, self._renewed_at = self._lease, None, None
        if lease is None:
            return
        lease["spec"] = {**lease["spec"], "holderIdentity": "", "renewTime": now_micro(self.clock)}
        try:
            self.kube.replace(LEASES, lease)
            log.info("left shard group %s (released Lease %s)", self.config.group, self.identity)
        except (Conflict, NotFound):
            pass
        except OperatorError as err:  # ApiError included
            log.warning("releasing the member lease failed: %s", err)
