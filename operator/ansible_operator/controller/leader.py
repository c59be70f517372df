"""Lease-based leader election, so only one replica reconciles.

Called by controller.manager before any reconcile starts (when `--leader-elect`
is set). The protocol is client-go's: one coordination.k8s.io/v1 Lease named by
`--leader-election-id`; the holder renews it every `retry_period`; a candidate
takes it over only after it has seen the same record unchanged for a whole
`lease_duration` (judged on the local monotonic clock, so clock skew between
nodes does not matter). A leader that cannot renew within `renew_deadline`
gives up and calls `on_lost` (the manager exits; the Deployment restarts it).
On graceful shutdown the leader releases the Lease so a standby takes over at
once instead of waiting for it to expire.
"""

from __future__ import annotations

import datetime
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_operator.errors import Conflict, NotFound, OperatorError
from ansible_operator.kube.client import Kube, ResourceInfo

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


def now_micro() -> str:
    """A Lease's MicroTime, as client-go writes acquireTime and renewTime."""
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
    def __init__(self, kube: Kube, config: ElectionConfig, *, on_lost: Callable[[], None]) -> None:
        self.kube = kube
        self.config = config
        self.on_lost = on_lost
        self._seen = ObservedLease()
        self._leader = threading.Event()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    # -- one attempt -------------------------------------------------------------

    def _spec(self, *, transitions: int, acquire: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "renewTime": now_micro(),
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
            return True
        spec = lease.get("spec") or {}
        now = time.monotonic()
        self._seen.observe(spec, now)
        holder = self._seen.holder
        ours = holder == cfg.identity
        if holder and not ours and not self._seen.expired(now):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        acquire = spec.get("acquireTime") if ours else None
        lease["spec"] = self._spec(transitions=transitions, acquire=acquire)
        try:
            updated = self.kube.request(
                "PUT", LEASES.path(namespace=cfg.namespace, name=cfg.name), body=lease
            )
        except Conflict:
            return False
        self._seen.observe(updated.get("spec") or {}, time.monotonic())
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
        last_renewal = time.monotonic()
        while not self._stop.wait(self.config.retry_period):
            try:
                if self.try_acquire_or_renew():
                    last_renewal = time.monotonic()
                    continue
            except OperatorError as err:  # ApiError included
                log.warning("renewing the leader lease failed: %s", err)
            if time.monotonic() - last_renewal > self.config.renew_deadline:
                self._leader.clear()
                log.error(
                    "leader lease lost: could not renew within %ss", self.config.renew_deadline
                )
                self.on_lost()
                return

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
            lease["spec"].update(holderIdentity="", leaseDurationSeconds=1, renewTime=now_micro())
            self.kube.request(
                "PUT", LEASES.path(namespace=cfg.namespace, name=cfg.name), body=lease
            )
            log.info("released leader lease %s/%s", cfg.namespace, cfg.name)
        except OperatorError as err:  # ApiError included
            log.warning("releasing the leader lease failed: %s", err)
