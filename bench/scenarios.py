"""The four short scenarios, each run against one started operator in a fresh namespace.

Called by `bench.run`, once per scenario and operator. Every scenario receives
a `Context` (cluster, running operator, sizes, API counter) and returns a flat
dict of figures (names as in `bench.report.FIGURES`) plus raw details.

* latency - one CR at a time: create → `Successful=True`, 1-task and 5-task roles;
  the first CR of each kind is a warm-up, reported apart (`first_*`).
* burst - N CRs created at once (8 client threads) → time until all are Successful.
* steady - M CRs reconciled, then an idle period: RSS/PSS and CPU of the process
  tree, API requests per reconcile and per idle minute.
* churn - C create → update → delete cycles (every other cycle deletes without
  waiting for the update's run, i.e. usually while it runs), then leaks.

The fifth, `fleet`, creates its CRs before the operator starts and restarts it, so it
starts its operators itself: bench/fleet.py.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procs
from bench.cluster import ApiCounter, BenchCluster, CrWatch, RequestKey
from bench.operators import OperatorRun
from bench.report import median, percentile

MIB = 2**20
CLIENT_THREADS = 8


@dataclass(frozen=True)
class Sizes:
    latency: int = 20
    latency_rounds: int = 2
    burst: int = 100
    steady: int = 500
    idle: float = 60.0
    churn: int = 200
    concurrency: int = 4
    background: float = 60.0  # seconds of quiet cluster to learn its own API traffic
    settle: float = 10.0  # seconds to let trailing work finish before reading leaks
    # The fleet (bench/fleet.py): N CRs created before the operator starts.
    fleet: int = 10_000
    fleet_idle: float = 300.0  # seconds at rest after the fleet converged
    fleet_window: float = 600.0  # seconds after the restart in which runs are counted
    fleet_cap: float = 3600.0  # wall-time cap of the convergence wait (0: none)
    fleet_change_cap: float = 600.0  # wall-time cap of the changed CR's wait (0: none)

    @classmethod
    def quick(cls, concurrency: int = 4) -> Sizes:
        return cls(
            latency=6,
            burst=20,
            steady=50,
            idle=15.0,
            churn=20,
            concurrency=concurrency,
            background=20.0,
            settle=5.0,
            fleet=1_000,
            fleet_idle=60.0,
            fleet_window=120.0,
            fleet_cap=1200.0,
            fleet_change_cap=60.0,
        )

    def as_labels(self) -> dict[str, Any]:
        return {
            "latency": self.latency,
            "burst": self.burst,
            "steady": self.steady,
            "idle": f"{self.idle:g}",
            "churn": self.churn,
            "concurrency": self.concurrency,
            "fleet": self.fleet,
            "fleet_idle": f"{self.fleet_idle:g}",
            "fleet_window": f"{self.fleet_window:g}",
        }


@dataclass
class Context:
    cluster: BenchCluster
    operator: OperatorRun
    sizes: Sizes
    api: ApiCounter

    @property
    def namespace(self) -> str:
        return self.operator.namespace

    def run_timeout(self, count: int) -> float:
        """A generous bound for `count` runs: 20 s each at the configured concurrency, +2 min."""
        return 120 + 20 * count / max(1, self.sizes.concurrency)


def _create_many(ctx: Context, kind: str, names: list[str], own: Counter[RequestKey]) -> None:
    counters = [Counter[RequestKey]() for _ in names]
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(
            pool.map(
                lambda nc: ctx.cluster.create_cr(ctx.namespace, kind, nc[0], "v1", nc[1]),
                zip(names, counters, strict=True),
            )
        )
    for c in counters:
        own.update(c)


def latency(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, short in (("BenchOne", "one"), ("BenchFive", "five")):
        samples = []
        with ctx.cluster.watching(ctx.namespace, kind) as crs:
            for i in range(ctx.sizes.latency + 1):
                name = f"lat-{short}-{i}"
                began = time.monotonic()
                ctx.cluster.create_cr(ctx.namespace, kind, name, "v1", Counter())
                done = crs.wait_success(name, timeout=ctx.run_timeout(1))
                samples.append(done - began)
        out[f"first_{short}"] = samples[0]
        rest = samples[1:]
        out[f"{short}_median"] = median(rest)
        out[f"{short}_p90"] = percentile(rest, 90)
        out[f"{short}_samples"] = [round(s, 3) for s in rest]
    out["k8s_task_seconds"] = per_task(out["one_median"], out["five_median"])
    return out


def per_task(one: float, five: float) -> float:
    """What one more kubernetes.core.k8s task costs: the two roles differ by four of them."""
    return (five - one) / 4


def merge_latency(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool the samples of several latency rounds; an errored round is reported as such."""
    errors = [p["error"] for p in parts if "error" in p]
    good = [p for p in parts if "error" not in p]
    if not good:
        return {"error": "; ".join(errors)}
    out: dict[str, Any] = {"rounds": len(parts)}
    for load in ("other_load", "kernel_load"):
        values = [p[load] for p in good if load in p]
        if values:
            out[load] = sum(values) / len(values)
    if errors:
        out["round_errors"] = errors
    for short in ("one", "five"):
        samples = [s for p in good for s in p[f"{short}_samples"]]
        out[f"first_{short}"] = median([p[f"first_{short}"] for p in good])
        out[f"{short}_median"] = median(samples)
        out[f"{short}_p90"] = percentile(samples, 90)
        out[f"{short}_samples"] = samples
    out["k8s_task_seconds"] = per_task(out["one_median"], out["five_median"])
    return out


def burst(ctx: Context) -> dict[str, Any]:
    n = ctx.sizes.burst
    names = [f"burst-{i}" for i in range(n)]
    with ctx.cluster.watching(ctx.namespace, "BenchOne") as crs:
        cpu0 = procs.sample(ctx.operator.pid).cpu
        with procs.PeakSampler(ctx.operator.pid) as peak:
            began = time.monotonic()
            _create_many(ctx, "BenchOne", names, Counter())
            created = time.monotonic()
            last = crs.wait_all(names, timeout=ctx.run_timeout(n))
        cpu1 = procs.sample(ctx.operator.pid).cpu
    took = last - began
    return {
        "seconds": took,
        "create_seconds": created - began,
        "throughput": n / took,
        "peak_rss_mib": peak.peak_rss / MIB,
        "peak_pss_mib": peak.peak_pss / MIB,
        "peak_pss_unchecked_mib": peak.peak_pss_unchecked / MIB,
        "pss_samples": peak.samples,
        "pss_samples_inconsistent": peak.inconsistent,
        "peak_processes": peak.peak_processes,
        "cpu_per_reconcile": (cpu1 - cpu0) / n,
    }


def steady(ctx: Context) -> dict[str, Any]:
    m = ctx.sizes.steady
    names = [f"steady-{i}" for i in range(m)]
    own: Counter[RequestKey] = Counter()
    with ctx.cluster.watching(ctx.namespace, "BenchOne") as crs:
        watch_before = Counter(crs.requests)
        runs_before = ctx.operator.successful_runs()
        api_before, cpu_before = ctx.api.read(), procs.sample(ctx.operator.pid).cpu
        began = time.monotonic()
        with procs.PeakSampler(ctx.operator.pid) as peak:
            _create_many(ctx, "BenchOne", names, own)
            last = crs.wait_all(names, timeout=ctx.run_timeout(m))
            time.sleep(ctx.sizes.settle)  # trailing requests (status writes, events)
        api_after, cpu_after = ctx.api.read(), procs.sample(ctx.operator.pid).cpu
        elapsed = time.monotonic() - began
        own.update(crs.requests - watch_before)
        busy = ctx.api.window(api_before, api_after, elapsed, own)
        runs = ctx.operator.successful_runs() - runs_before

        idle_before_api = ctx.api.read()
        s0 = procs.sample(ctx.operator.pid)
        idle_began = time.monotonic()
        time.sleep(ctx.sizes.idle)
        s1 = procs.sample(ctx.operator.pid)
        idle = ctx.api.window(
            idle_before_api, ctx.api.read(), time.monotonic() - idle_began, Counter()
        )
        succeeded = crs.succeeded_count()
    return {
        "reconcile_seconds": last - began,
        "successful_runs_logged": runs,
        "succeeded_crs": succeeded,
        "api_per_reconcile": busy.requests / m,
        "api_watches_net": round(busy.total - busy.requests, 1),
        "api_requests_net": round(busy.requests, 1),
        "api_top_per_reconcile": {k: round(v / m, 2) for k, v in busy.top(40).items()},
        "cpu_per_reconcile": (cpu_after - cpu_before) / m,
        "peak_rss_mib": peak.peak_rss / MIB,
        "rss_mib": s1.rss / MIB,
        "pss_mib": s1.pss / MIB,
        "processes": s1.processes,
        "idle_cpu_seconds": s1.cpu - s0.cpu,
        "idle_api_per_minute": idle.requests / idle.seconds * 60,
        "idle_api_top": idle.top(20),
    }


def _sockets() -> set[str]:
    return {p.name for p in Path("/tmp").glob("ansibleoperator-*")}


def churn(ctx: Context, sockets_before: set[str]) -> dict[str, Any]:
    n = ctx.sizes.churn
    # Primed children (ansible_operator.warm.primed) are long-lived helpers, started
    # by the first run of each configuration: they are not left behind by a run.
    baseline = procs.sample(ctx.operator.pid).non_helpers
    errors: list[str] = []

    def cycle(i: int, crs: CrWatch) -> None:
        name = f"churn-{i}"
        own: Counter[RequestKey] = Counter()
        try:
            ctx.cluster.create_cr(ctx.namespace, "BenchOne", name, "a", own)
            crs.wait_success(name, timeout=ctx.run_timeout(4))
            first = crs.marker(name)
            ctx.cluster.update_cr(ctx.namespace, "BenchOne", name, "b", own)
            if i % 2 == 0:
                crs.wait_success(name, newer_than=first, timeout=ctx.run_timeout(4))
            ctx.cluster.delete_cr(ctx.namespace, "BenchOne", name, own)
            crs.wait_gone(name, timeout=120)
        except Exception as err:
            errors.append(f"{name}: {err}")

    with ctx.cluster.watching(ctx.namespace, "BenchOne") as crs:
        began = time.monotonic()
        with ThreadPoolExecutor(ctx.sizes.concurrency) as pool:
            list(pool.map(lambda i: cycle(i, crs), range(n)))
        took = time.monotonic() - began
    # let the operator finish what deletions started: no child processes for `settle` s
    deadline = time.monotonic() + 120
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if procs.sample(ctx.operator.pid).non_helpers > baseline:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= ctx.sizes.settle:
            break
        time.sleep(0.5)
    after = procs.sample(ctx.operator.pid)
    files = dirs = 0
    for path in ctx.operator.runner_dirs():
        f, d = procs.count_entries(path)
        files, dirs = files + f, dirs + d + (1 if path.is_dir() else 0)
    tmp_files, tmp_dirs = procs.count_entries(ctx.operator.tmpdir)
    objects = _settled_objects(ctx, timeout=60 if ctx.sizes.churn >= 100 else 30)
    return {
        "seconds": took,
        "errors": errors[:10],
        "error_count": len(errors),
        "leaked_runner_entries": files + dirs,
        "leaked_runner_files": files,
        "leaked_runner_dirs": dirs,
        "leaked_tmp_entries": tmp_files + tmp_dirs,
        "tmp_entries_sample": sorted(p.name for p in ctx.operator.tmpdir.iterdir())[:5],
        "leaked_sockets": len(_sockets() - sockets_before),
        "leftover_objects": objects,
        "extra_processes": max(0, after.non_helpers - baseline),
        "helper_processes": after.helpers,
        "rss_mib": after.rss / MIB,
        "pss_mib": after.pss / MIB,
    }


def _settled_objects(ctx: Context, timeout: float) -> int:
    """ConfigMaps/Secrets left once garbage collection stops making progress."""
    deadline = time.monotonic() + timeout
    last, unchanged_since = -1, time.monotonic()
    while True:
        counts = ctx.cluster.count_objects(ctx.namespace)
        total = sum(counts.values())
        if total != last:
            last, unchanged_since = total, time.monotonic()
        if total == 0 or time.monotonic() - unchanged_since >= 10 or time.monotonic() > deadline:
            return total
        time.sleep(1)


#: `fleet` (bench/fleet.py) runs last: it leaves thousands of objects in the cluster.
SCENARIOS = ("latency", "burst", "steady", "churn", "fleet")
