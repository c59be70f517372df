"""Sharded mode's figures: throughput of 1, 2 and 3 replicas, rebalance time, API load.

Not part of `make bench` (its scenarios compare us with the Go operator, which
has no sharded mode); run by hand against the testbed:

    PATH=$PWD/.venv/bin:$PATH .venv/bin/python -m bench.sharding [--crs 300] [--delay 6]

It uses the sharding tests' project and fleet (tests/sharding): a kind whose
runs mostly wait (`sleep spec.delay`), so that the machine's cores do not cap
the result and the replicas' concurrency does. Each replica runs at most
`--per-replica` CRs at once. Figures, printed as JSON and written to
bench/results/sharding.json (docs/benchmarks.md quotes them):

* throughput: CRs created at once → all Successful, for 1, 2 and 3 sharded
  replicas, and the speed-up over one replica;
* rebalance: SIGKILL one of 3 replicas (default Lease timings: 15 s) → every
  CR it held claimed by a survivor;
* API requests per reconcile (the testbed API server's apiserver_request_total,
  minus its background and the benchmark's own requests), single mode against
  3 sharded replicas, and per idle minute.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from kubernetes import config

from bench.cluster import ApiCounter, RequestKey
from testbed import ControlPlane
from testbed.probes import wait_until
from tests.e2e.conftest import drop_namespace, make_namespace
from tests.e2e.harness import apply_crds
from tests.sharding.fleet import (
    CLAIM,
    GROUP,
    PLURAL,
    PROJECT,
    Fleet,
    create_shardees,
    shardees,
    successful,
)

RESULTS = Path(__file__).parent / "results" / "sharding.json"
DEFAULT_TIMINGS = ()  # the operator's defaults: 15 s / 10 s / 2 s
POLL = 1.0


def _ours(net: dict[RequestKey, float]) -> dict[RequestKey, float]:
    """The requests an operator of this kind makes: others share the testbed's API server."""
    return {
        key: value
        for key, value in net.items()
        if key[1] in {GROUP, "coordination.k8s.io"} or key[2] == "events"
    }


class Bench:
    def __init__(
        self, *, crs: int, delay: float, per_replica: int, idle: float, workdir: Path
    ) -> None:
        report = ControlPlane().up()
        self.kubeconfig = report.kubeconfig
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
        apply_crds(self.api, docs, what="sharding bench")
        self.counter = ApiCounter(self.api)
        self.crs, self.delay, self.per_replica, self.idle_seconds = crs, delay, per_replica, idle
        self.workdir = workdir
        self.own: Counter[RequestKey] = Counter()

    def fleet(self, tag: str) -> Fleet:
        namespace = make_namespace(self.api, f"bench-{tag}")
        return Fleet(kubeconfig=self.kubeconfig, workdir=self.workdir / tag, namespace=namespace)

    def start(self, fleet: Fleet, count: int, *, sharded: bool = True) -> None:
        (self.workdir / fleet.namespace).mkdir(parents=True, exist_ok=True)
        fleet.workdir = self.workdir / fleet.namespace
        extra = [
            f"--max-concurrent-reconciles={self.per_replica}",
            f"--max-concurrent-reconciles-total={self.per_replica}",
        ]
        for index in range(count):
            fleet.start(f"r{index + 1}", sharded=sharded, extra=extra, timings=DEFAULT_TIMINGS)
        if sharded:
            wait_until("members", lambda: fleet.members_seen(count), timeout=60)

    def all_done(self, namespace: str, count: int) -> bool:
        self.own[("LIST", GROUP, PLURAL, "")] += 1
        items = shardees(self.api, namespace)
        return len(items) == count and all(successful(obj) for obj in items)

    def burst(self, fleet: Fleet, count: int) -> dict[str, Any]:
        """Create `count` CRs at once; seconds until all are Successful, and API requests."""
        self.own.clear()
        names = [f"cr-{index:04d}" for index in range(count)]
        before, began = self.counter.read(), time.monotonic()
        create_shardees(
            self.api, fleet.namespace, names, {"delay": self.delay, "keep_records": False}
        )
        self.own[("POST", GROUP, PLURAL, "")] += count
        while not self.all_done(fleet.namespace, count):
            time.sleep(POLL)
        took = time.monotonic() - began
        window = self.counter.window(before, self.counter.read(), took, own=self.own)
        net = _ours(window.net)
        requests = sum(net.values())
        return {
            "seconds": round(took, 1),
            "crs_per_second": round(count / took, 3),
            "api_requests": round(requests),
            "api_requests_per_reconcile": round(requests / count, 2),
            "by_request": {" ".join(k): round(v) for k, v in sorted(net.items()) if v >= 1},
        }

    def idle(self, seconds: float) -> float:
        before, began = self.counter.read(), time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - began
        window = self.counter.window(before, self.counter.read(), took)
        return round(sum(_ours(window.net).values()) / took * 60, 1)

    def rebalance(self, fleet: Fleet) -> dict[str, Any]:
        victim = "r3"
        member = fleet.replicas[victim].logged(lambda e: "joined shard group" in e.get("msg", ""))
        identity = str(member[0]["msg"].split(" as ")[1].split(" ")[0])
        held = {
            obj["metadata"]["name"]
            for obj in shardees(self.api, fleet.namespace)
            if obj["metadata"].get("annotations", {}).get(CLAIM) == identity
        }
        killed = time.monotonic()
        fleet.kill(victim)

        def moved() -> bool:
            claims = {
                obj["metadata"]["name"]: obj["metadata"].get("annotations", {}).get(CLAIM)
                for obj in shardees(self.api, fleet.namespace)
            }
            return all(claims.get(name) not in {identity, None} for name in held)

        wait_until("the dead member's CRs are claimed", moved, timeout=120)
        return {"crs_held": len(held), "seconds": round(time.monotonic() - killed, 1)}

    def run(self) -> dict[str, Any]:
        self.counter.measure_background(min(15.0, self.idle_seconds))
        figures: dict[str, Any] = {
            "crs": self.crs,
            "delay": self.delay,
            "per_replica": self.per_replica,
        }
        single = self.fleet("single")
        try:
            self.start(single, 1, sharded=False)
            figures["single"] = self.burst(single, self.crs)
            figures["single"]["idle_requests_per_minute"] = self.idle(self.idle_seconds)
        finally:
            single.stop_all()
            drop_namespace(self.api, single.namespace)
        for count in (1, 2, 3):
            fleet = self.fleet(f"x{count}")
            try:
                self.start(fleet, count)
                figures[f"sharded_{count}"] = self.burst(fleet, self.crs)
                if count == 3:
                    figures["sharded_3"]["idle_requests_per_minute"] = self.idle(self.idle_seconds)
                    figures["rebalance"] = self.rebalance(fleet)
            finally:
                fleet.stop_all()
                drop_namespace(self.api, fleet.namespace)
        base = figures["sharded_1"]["crs_per_second"]
        for count in (2, 3):
            figures[f"sharded_{count}"]["speedup"] = round(
                figures[f"sharded_{count}"]["crs_per_second"] / base, 2
            )
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=300)
    parser.add_argument("--delay", type=float, default=6.0)
    parser.add_argument("--per-replica", type=int, default=6)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle measurement")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-sharding"))
    args = parser.parse_args()
    bench = Bench(
        crs=args.crs,
        delay=args.delay,
        per_replica=args.per_replica,
        idle=args.idle,
        workdir=args.workdir,
    )
    figures = bench.run()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
