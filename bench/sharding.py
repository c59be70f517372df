"""Sharded mode's figures: throughput of 1, 2 and 3 replicas, rebalance time, API load.

Not part of `make bench` (its scenarios compare us with the Go operator, which
has no sharded mode); run by hand against the testbed:

    flock /tmp/ao-bench.lock env PATH=$PWD/.venv/bin:$PATH \
        .venv/bin/python -m bench.sharding [--crs 300] [--delay 15] [--per-replica 6]

It uses the sharding tests' project and fleet (tests/sharding): a kind whose
runs mostly wait (`sleep spec.delay`), so that the machine's cores do not cap
the result and the replicas' concurrency does. Each replica runs at most
`--per-replica` CRs at once, the same in every column. The waits are long
enough that 3 replicas start about one run a second, i.e. well under one
core of Ansible at the measured CPU per reconcile (the `cpu_seconds_*`
figures); docs/benchmarks.md says why. Figures, printed as JSON and written
to bench/results/sharding.json after each column (docs/benchmarks.md quotes
them):

* throughput: CRs created at once → all Successful, for 1, 2 and 3 sharded
  replicas, the speed-up over one replica, how the CRs were split (by the
  reconciled-by annotation) and the CPU used per reconcile: the operators'
  own and all of theirs with Ansible (getrusage of their reaped process
  trees, start to stop);
* rebalance: SIGKILL one of 3 replicas (default Lease timings: 15 s) → the
  first and the last of its CRs claimed by a survivor;
* API requests per reconcile (the testbed API server's apiserver_request_total,
  minus its background and the benchmark's own requests), single mode
  (`--single-crs` CRs: a ratio needs fewer) against sharded, and per idle
  minute; the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    RECONCILED_BY,
    Fleet,
    create_shardees,
    shardees,
    successful,
)

RESULTS = Path(__file__).parent / "results" / "sharding.json"
DEFAULT_TIMINGS = ()  # the operator's defaults: 15 s / 10 s / 2 s
POLL = 1.0


def _children_cpu() -> float:
    """CPU seconds of all reaped child process trees of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu(pid: int) -> float:
    """CPU seconds a live process used itself (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _ours(net: dict[RequestKey, float]) -> dict[RequestKey, float]:
    """The requests an operator of this kind makes: others share the testbed's API server."""
    return {
        key: value
        for key, value in net.items()
        if key[1] in {GROUP, "coordination.k8s.io"} or key[2] == "events"
    }


class Bench:
    def __init__(
        self,
        *,
        crs: int,
        single_crs: int,
        delay: float,
        per_replica: int,
        idle: float,
        workdir: Path,
    ) -> None:
        report = ControlPlane().up()
        self.kubeconfig = report.kubeconfig
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        docs = yaml.safe_load_all((PROJECT / "crds" / "crds.yaml").read_text())
        apply_crds(self.api, docs, what="sharding bench")
        self.counter = ApiCounter(self.api)
        self.crs, self.delay, self.per_replica, self.idle_seconds = crs, delay, per_replica, idle
        self.single_crs = single_crs
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
        split = Counter(
            (obj["metadata"].get("annotations") or {}).get(RECONCILED_BY, "unsharded")
            for obj in shardees(self.api, fleet.namespace)
        )
        operators = sum(_own_cpu(r.proc.pid) for r in fleet.replicas.values() if r.proc is not None)
        return {
            "seconds": round(took, 1),
            "crs_per_replica": sorted(split.values(), reverse=True),
            "operator_cpu_seconds_per_reconcile": round(operators / count, 3),
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

    def column(self, tag: str, replicas: int, crs: int, *, sharded: bool) -> dict[str, Any]:
        """One fleet: start it, one burst, (3 replicas: idle and rebalance), stop it."""
        fleet = self.fleet(tag)
        cpu = _children_cpu()
        try:
            self.start(fleet, replicas, sharded=sharded)
            figures = self.burst(fleet, crs)
            if replicas == 3 or not sharded:
                figures["idle_requests_per_minute"] = self.idle(self.idle_seconds)
            if replicas == 3:
                figures["rebalance"] = self.rebalance(fleet)
        finally:
            fleet.stop_all()
            drop_namespace(self.api, fleet.namespace)
        # Everything the fleet's processes and their Ansible runs used, start to stop.
        figures["cpu_seconds_per_reconcile"] = round((_children_cpu() - cpu) / crs, 3)
        return figures

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
        first: list[float] = []

        def moved() -> bool:
            claims = {
                obj["metadata"]["name"]: obj["metadata"].get("annotations", {}).get(CLAIM)
                for obj in shardees(self.api, fleet.namespace)
            }
            taken = [name for name in held if claims.get(name) not in {identity, None}]
            if taken and not first:
                first.append(time.monotonic() - killed)
            return len(taken) == len(held)

        wait_until("the dead member's CRs are claimed", moved, timeout=120)
        return {
            "crs_held": len(held),
            "first_claimed_seconds": round(first[0], 1),
            "seconds": round(time.monotonic() - killed, 1),
        }

    def run(self) -> dict[str, Any]:
        self.counter.measure_background(min(15.0, self.idle_seconds))
        figures: dict[str, Any] = {
            "crs": self.crs,
            "single_crs": self.single_crs,
            "delay": self.delay,
            "per_replica": self.per_replica,
            "load_before": _load(),
        }
        figures["single"] = self.column("single", 1, self.single_crs, sharded=False)
        _save(figures)
        for count in (1, 2, 3):
            figures[f"sharded_{count}"] = self.column(f"x{count}", count, self.crs, sharded=True)
            _save(figures)
        base = figures["sharded_1"]["crs_per_second"]
        for count in (2, 3):
            figures[f"sharded_{count}"]["speedup"] = round(
                figures[f"sharded_{count}"]["crs_per_second"] / base, 2
            )
        figures["rebalance"] = figures["sharded_3"].pop("rebalance")
        figures["load_after"] = _load()
        _save(figures)
        return figures


def _save(figures: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=300)
    parser.add_argument("--single-crs", type=int, default=60)
    parser.add_argument("--delay", type=float, default=15.0)
    parser.add_argument("--per-replica", type=int, default=6)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measurement")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/bench-sharding"))
    args = parser.parse_args()
    bench = Bench(
        crs=args.crs,
        single_crs=args.single_crs,
        delay=args.delay,
        per_replica=args.per_replica,
        idle=args.idle,
        workdir=args.workdir,
    )
    print(json.dumps(bench.run(), indent=2))


if __name__ == "__main__":
    main()
