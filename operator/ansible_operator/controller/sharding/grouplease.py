"""The group Lease: sharded replicas keep the leader-election Lease of their id held.

Called by controller.sharding.shard at start-up and in every membership
round, with the membership's `KubeApi` and clock. The Lease named by
`--leader-election-id` is the one an unsharded replica with `--leader-elect`
(same id) competes for. Sharded members hold it together under the holder
identity `sharding/<group>`: each member's round renews it (a conflict means
another member just did, which is as good). So:

* an unsharded replica started next to sharded ones never sees the record
  stand still for a lease duration, and stands by, as any leader-election
  standby does, until the last sharded replica is gone;
* a sharded replica started while an unsharded leader holds the Lease waits
  (it leaves the group again) until the leader's record has stood still for a
  lease duration or was released, then takes it with a conditional update;
* if an unsharded replica ever does take it (every member failed to renew it
  for a whole lease duration), the members see a foreign holder in their next
  round and stop.

Only get, create and update on Leases are needed: the verbs leader election
already has.
"""

from __future__ import annotations

from typing import Any

from ansible_operator.clocks import SYSTEM, Clock
from ansible_operator.controller.leader import LEASES, ObservedLease, lease_object, now_micro
from ansible_operator.errors import Conflict, NotFound
from ansible_operator.kube.client import KubeApi

HOLDER_PREFIX = "sharding/"


class GroupLease:
    """Hold the `--leader-election-id` Lease for the whole shard group."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespace: str,
        group: str,
        lease_duration: float,
        clock: Clock = SYSTEM,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.namespace = namespace
        self.name = group
        self.holder = HOLDER_PREFIX + group
        self.lease_duration = lease_duration
        self._seen = ObservedLease()

    def _spec(self, old: dict[str, Any]) -> dict[str, Any]:
        now = now_micro(self.clock)
        ours = old.get("holderIdentity") == self.holder
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": old.get("acquireTime") if ours else now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if ours else 1),
        }

    def hold(self) -> str:
        """Renew or take the Lease; "" if the group holds it, else the foreign live holder."""
        for _ in range(3):  # conflicts: another member renewed between our read and write
            try:
                lease = self.kube.get(LEASES, namespace=self.namespace, name=self.name)
            except NotFound:
                body = lease_object(name=self.name, namespace=self.namespace, spec=self._spec({}))
                try:
                    self.kube.create(LEASES, namespace=self.namespace, body=body)
                except Conflict:
                    continue
                return ""
            spec = lease.get("spec") or {}
            now = self.clock.monotonic()
            self._seen.observe(spec, now)
            holder = self._seen.holder
            if holder and holder != self.holder and not self._seen.expired(now):
                return holder
            lease["spec"] = self._spec(spec)
            try:
                self.kube.replace(LEASES, lease)
            except Conflict:
                continue
            return ""
        return ""  # three conflicts in a row: other members are renewing it
