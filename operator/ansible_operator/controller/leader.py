"""Lease-based leader election, so only one replica reconciles.

Called by controller.manager before any reconcile starts (when `--leader-elect`
is set): `acquire` blocks until this replica leads, a daemon thread then
renews (`renew`, one round per retry period), and `release` at shutdown.
controller.sharding (membership, grouplease) builds on the same Lease record
semantics: `ObservedLease`, `lease_object`, `now_micro`. API calls go through
the `KubeApi` seam and readings of time through an injected `clocks.Clock`,
so tests run it on kube.fakekube.FakeKube and a FakeClock.

The protocol is client-go's: one coordination.k8s.io/v1 Lease named by
`--leader-election-id`; the holder renews it every `retry_period`; a candidate
takes it over only after it has seen the same record unchanged for a whole
`lease_duration` (judged on the local monotonic clock, so clock skew between
nodes does not matter). A leader that cannot renew within `renew_deadline`
gives up and calls `on_lost` (the manager exits; the Deployment restarts it).
On graceful shutdown the leader releases the Lease so a standby takes over at
once instead of waiting for it to expire.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_operator.clocks import SYSTEM, Clock
from ansible_operator.errors import Conflict, NotFound, OperatorError
from ansible_operator.kube.client import KubeApi, ResourceInfo

log = logging.getLogger("ansible_operator.leader")

LEASES = ResourceInfo(
    group="coordination.k8s.io",
    version="v1",
    kind="Lease",
    plural="leases",
    namespaced=True,
    has_status=False,
)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def now_micro(clock: Clock = SYSTEM) -> str:
    """A Lease's MicroTime, as client-go writes acquireTime and renewTime."""
    return clock.wall().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_object(
    *, name: str, namespace: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Lease to create (leader election, the shard group, shard members)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


@dataclass
class ObservedLease:
    """A Lease record judged on this process's clock, as client-go does: the record
    (holderIdentity, renewTime) expires a lease duration after this process first saw
    it, whatever renewTime says (the clocks of other machines are not trusted)."""

    record: tuple[str, str] = ("", "")
    since: float = 0.0  # monotonic time the record was first seen
    duration: float = 0.0

    @property
    def holder(self) -> str:
        return self.record[0]

    def observe(self, spec: dict[str, Any], now: float) -> None:
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        self.duration = float(spec.get("leaseDurationSeconds") or 0)
        if record != self.record:
            self.record, self.since = record, now

    def expired(self, now: float) -> bool:
        return now >= self.since + self.duration


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


class LeaderElector:
    """One replica's side of the election; see the module docstring."""

    def __init__(
        self,
        kube: KubeApi,
        config: ElectionConfig,
        *,
        on_lost: Callable[[], None],
        clock: Clock = SYSTEM,
    ) -> None:
        self.kube = kube
        self.config = config
        self.on_lost = on_lost
        self.clock = clock
        self._seen = ObservedLease()
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._last_renewal = 0.0  # clock.monotonic() of the last round that held the Lease

    # -- one attempt -------------------------------------------------------------

    def _spec(self, *, transitions: int, acquire: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "renewTime": now_micro(self.clock),
            "leaseTransitions": transitions,
        }
        spec["acquireTime"] = acquire or spec["renewTime"]
        return spec

    def try_acquire_or_renew(self) -> bool:
        """One round of the protocol; True if we hold the Lease afterwards."""
        cfg = self.config
        try:
            lease = self.kube.get(LEASES, namespace=cfg.namespace, name=cfg.name)
        except NotFound:
            spec = self._spec(transitions=0, acquire=None)
            body = lease_object(name=cfg.name, namespace=cfg.namespace, spec=spec)
            try:
                self.kube.create(LEASES, namespace=cfg.namespace, body=body)
            except Conflict:
                return False
            self._last_renewal = self.clock.monotonic()
            return True
        spec = lease.get("spec") or {}
        now = self.clock.monotonic()
        self._seen.observe(spec, now)
        holder = self._seen.holder
        ours = holder == cfg.identity
        if holder and not ours and not self._seen.expired(now):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        acquire = spec.get("acquireTime") if ours else None
        lease["spec"] = self._spec(transitions=transitions, acquire=acquire)
        try:
            updated = self.kube.replace(LEASES, lease)
        except Conflict:
            return False
        self._last_renewal = self.clock.monotonic()
        self._seen.observe(updated.get("spec") or {}, self._last_renewal)
        return True

    # -- life cycle --------------------------------------------------------------

    def acquire(self, stop: threading.Event) -> bool:
        """Block until we lead (True) or `stop` is set (False)."""
        log.info(
            "attempting to acquire leader lease %s/%s", self.config.namespace, self.config.name
        )
        while not stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    self._leader.set()
                    log.info(
                        "successfully acquired lease %s/%s", self.config.namespace, self.config.name
                    )
                    self._start_renewing()
                    return True
            except OperatorError as err:  # ApiError included
                log.warning("leader election attempt failed: %s", err)
            stop.wait(self.config.retry_period)
        return False

    def _start_renewing(self) -> None:
        self._renewer = threading.Thread(target=self._renew_loop, name="leader-renew", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.config.retry_period):
            if not self.renew():
                return

    def renew(self) -> bool:
        """One round of the renewing thread; False once the Lease is lost.

        A failed round is not yet a loss: only when no round has succeeded for
        `renew_deadline` does this replica stop leading and call `on_lost`.
        """
        try:
            if self.try_acquire_or_renew():
                return True
        except OperatorError as err:  # ApiError included
            log.warning("renewing the leader lease failed: %s", err)
        if self.clock.monotonic() - self._last_renewal > self.config.renew_deadline:
            self._leader.clear()
            log.error("leader lease lost: could not renew within %ss", self.config.renew_deadline)
            self.on_lost()
            return False
        return True

    def release(self) -> None:
        """Stop renewing and hand the Lease back, so a standby need not wait it out."""
        self._stop.set()
        if not self._leader.is_set():
            return
        self._leader.clear()
        cfg = self.config
        try:
            lease = self.kube.get(LEASES, namespace=cfg.namespace, name=cfg.name)
            if (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return
            lease["spec"].update(
                holderIdentity="", leaseDurationSeconds=1, renewTime=now_micro(self.clock)
            )
            self.kube.replace(LEASES, lease)
            log.info("released leader lease %s/%s", cfg.namespace, cfg.name)
        except OperatorError as err:  # ApiError included
            log.warning("releasing the leader lease failed: %s", err)
