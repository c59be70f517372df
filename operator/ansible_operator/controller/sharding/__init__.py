"""Sharded mode (`--sharding`): replicas share the custom resources.

Inside the controller layer because it is wired by controller.wiring into
the work queue (admit), the primary watch (observe) and the reconciler (the
gate before each run), and builds on controller.queue's keys and
controller.leader's Lease semantics. Modules:

* membership: this replica's Lease and its view of the other members';
* assignment: rendezvous hashing with bounded loads over the live members;
* claims: the per-CR claim annotation, written only conditionally;
* takeover: claims all of a dead member's CRs at once, ahead of their runs;
* shardmetrics: the per-replica sharding metrics;
* grouplease: the leader-election Lease the members hold together;
* shard: the coordinator (directory of CRs, gate, membership thread);
* shardoptions: the `--sharding` settings, checked before joining.

docs/sharding.md describes the protocol, its guarantees and its limits.
"""
