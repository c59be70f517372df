"""Per-replica metrics of sharded mode; controller.sharding.shard updates them.

Registered on the operator's metrics registry by controller.sharding.shard's
`make_shard`; docs/sharding.md ("Metrics and logs") lists them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ShardMetrics:
    """Per-replica sharding metrics (runs are counted by the existing run metrics)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.members = Gauge(
            "ansible_operator_shard_members", "Live members of the shard group", registry=registry
        )
        self.owned = Gauge(
            "ansible_operator_shard_owned_resources",
            "Custom resources the assignment gives this replica",
            registry=registry,
        )
        self.claimed = Gauge(
            "ansible_operator_shard_claimed_resources",
            "Custom resources whose claim this replica holds",
            registry=registry,
        )
        self.handovers = Counter(
            "ansible_operator_shard_handovers",
            "Claims this replica took (claimed: free; taken_over: from a dead member) "
            "or released to another member",
            ["direction"],
            registry=registry,
        )
