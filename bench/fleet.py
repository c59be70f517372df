"""The fleet scenario (issue 28): N custom resources that exist before the operator starts.

Run by `bench.run` (`--scenarios fleet`, part of `make bench`; `make bench-fleet` runs
it with the steady scenario, whose idle figures belong in the same report), once per
operator, each in its own namespace. It starts and restarts the operator itself,
through the callable `bench.run` hands it, and assumes nothing about an operator
beyond its process tree, its log and the API server's view of its CRs, so it
measures whatever code is checked out.

Phases, each figure named as in `bench.report.FIGURES` (`fleet.*`):

1. *Create.* N `BenchOne` CRs (the role with one `kubernetes.core.k8s` task) are
   POSTed by 8 client threads, bodies serialised once, responses not decoded
   (`create_fleet`): a few hundred CRs a second on 2 cores. Nothing watches the
   namespace yet.
2. *Converge.* The operator starts; one watch (`cluster.CrWatch`) records when each CR
   first shows `Successful=True`. Time from the process start until every CR did;
   CPU seconds of the tree (reaped children included); peak PSS and RSS (sampled every
   second); API requests, net of the background and of the benchmark's own watch.
   The wait is capped by wall time (`--fleet-cap`, 3600 s; `--quick` 1200 s): the Go
   operator needs about 2 CPU-s a reconcile, hours for 10,000 CRs on 2 cores. A capped
   operator is reported with how many CRs were Successful at the cap and its rate;
   it is not at rest, so phase 3 is skipped for it (its PSS at the cap is reported,
   marked as such).
3. *At rest.* PSS and RSS of the tree (and of the operator process alone) `settle`
   seconds after the last CR converged, and again after `--fleet-idle` seconds
   (300; `--quick` 60), with the CPU and API requests of that idle period.
4. *Restart, nothing changed.* SIGTERM (time to exit with N CRs), start again with
   the same arguments and work dir: time to ready; successful runs seen in the first
   `--fleet-window` seconds (600; `--quick` 120) after the process start (new
   `ansibleResult.completion` markers on the watch; the operator's own "exited
   successfully" log lines are counted too), CPU seconds and API requests in that
   window, peak PSS.
5. *One CR changed.* Right after the window, the last CR of the fleet (also last in
   list order) gets a new `spec.value`; time from the PATCH until the watch sees a
   new successful run of it, capped at `--fleet-change-cap` (600; `--quick` 60 s).
   An operator that re-runs the whole fleet after a restart in list order is still
   busy with it here, so its figure is the cap. `change_applied` says whether the
   ConfigMap the role writes carries the new value (a run of the old spec that
   ended after the PATCH would also show as a new successful run).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from bench import procs
from bench.cluster import GROUP, KINDS, VERSION, ApiCounter, BenchCluster, CrWatch, RequestKey
from bench.operators import OperatorRun
from bench.scenarios import MIB, Sizes

KIND = "BenchOne"
CREATE_THREADS = 8
SAMPLE_INTERVAL = 1.0  # seconds between PSS samples: phases last many minutes


def fleet_names(count: int) -> list[str]:
    """`fleet-00000` ...: zero-padded, so creation order is also the API's list order."""
    width = len(str(max(0, count - 1)))
    return [f"fleet-{i:0{width}d}" for i in range(count)]


def cap_deadline(start: float, cap: float) -> float:
    """The monotonic deadline of a wait capped at `cap` seconds (0 or less: no cap)."""
    return start + cap if cap > 0 else float("inf")


def create_fleet(
    api: client.ApiClient, namespace: str, names: list[str], threads: int = CREATE_THREADS
) -> float:
    """POST a `BenchOne` CR for each of `names`; return the seconds it took.

    Plain POSTs over the API client's connection pool, without its model layer: the
    response bodies are read but not decoded. A 409 counts as created (a retried POST
    that had reached the server); 429 and 5xx answers are retried with a back-off.
    """
    plural = KINDS[KIND]
    url = f"{api.configuration.host}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    def post(name: str) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name},
            "spec": {"value": "v1"},
        }
        delay = 0.2
        for _ in range(8):
            resp = api.call_api("POST", url, header_params=dict(headers), body=body)
            data = resp.response.data  # the body, read in full (RESTResponse.read is untyped)
            if resp.status in (200, 201, 409):
                return
            if resp.status != 429 and resp.status < 500:
                raise RuntimeError(f"POST {plural}/{name}: HTTP {resp.status} {data[:200]!r}")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise RuntimeError(f"POST {plural}/{name}: still HTTP {resp.status} after 8 tries")

    began = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(post, names))
    return time.monotonic() - began


@dataclass
class FleetContext:
    cluster: BenchCluster
    api: ApiCounter
    sizes: Sizes
    operator: str  # "python" or "go", for messages
    start: Callable[[str], OperatorRun]  # starts the operator on a namespace; ready on return
    say: Callable[[str], None]


def _main_only(pid: int) -> tuple[float, float]:
    """(PSS, RSS) in MiB of the operator process alone, without its children."""
    return procs.pss_bytes([pid]) / MIB, procs.rss_bytes([pid]) / MIB


def _resting(op: OperatorRun, prefix: str) -> dict[str, Any]:
    tree = procs.sample(op.pid)
    main_pss, main_rss = _main_only(op.pid)
    return {
        f"{prefix}_pss_mib": tree.pss / MIB,
        f"{prefix}_rss_mib": tree.rss / MIB,
        f"{prefix}_main_pss_mib": main_pss,
        f"{prefix}_main_rss_mib": main_rss,
        f"{prefix}_processes": tree.processes,
    }


def _role_output(cluster: BenchCluster, namespace: str, name: str) -> str | None:
    """The `value` the one_task role wrote for CR `name`: did its run see the change?"""
    try:
        cm = client.CoreV1Api(cluster.client).read_namespaced_config_map(f"{name}-one", namespace)
    except client.ApiException:
        return None
    return (cm.data or {}).get("value")


def fleet(ctx: FleetContext) -> dict[str, Any]:
    sizes, cluster = ctx.sizes, ctx.cluster
    n = sizes.fleet
    names = fleet_names(n)
    namespace = cluster.new_namespace(f"fleet-{ctx.operator}")
    out: dict[str, Any] = {"namespace": namespace, "crs": n}
    ctx.say(f"fleet/{ctx.operator}: creating {n} {KIND} CRs in {namespace}")
    created = create_fleet(cluster.client, namespace, names)
    out["create_seconds"] = created
    out["create_per_second"] = n / created if created > 0 else None
    ctx.say(f"fleet/{ctx.operator}: {n} CRs created in {created:.1f}s; starting the operator")

    with cluster.watching(namespace, KIND) as crs:
        out.update(_converge_and_rest(ctx, crs, namespace, names))
    return out


def _converge_and_rest(
    ctx: FleetContext, crs: CrWatch, namespace: str, names: list[str]
) -> dict[str, Any]:
    sizes, api, n = ctx.sizes, ctx.api, len(names)
    out: dict[str, Any] = {}
    stops: list[dict[str, object]] = []

    # -- 2. converge --------------------------------------------------------------
    watch_before = Counter(crs.requests)
    api_before = api.read()
    op = ctx.start(namespace)
    began = op.started
    out["ready_seconds"] = op.ready_after
    other = procs.OtherLoad(op.pid, ctx.cluster.pids())

    def progress(done: int) -> None:
        ctx.say(
            f"fleet/{ctx.operator}: {done}/{n} Successful after {time.monotonic() - began:.0f}s"
        )

    with procs.PeakSampler(op.pid, interval=SAMPLE_INTERVAL) as peak:
        done, last = crs.wait_converged(
            names, cap_deadline(began, sizes.fleet_cap), progress=progress
        )
    ended = time.monotonic()
    cpu = procs.sample(op.pid).cpu
    window = api.window(api_before, api.read(), ended - began, crs.requests - watch_before)
    capped = done < n
    took = (last - began) if not capped else ended - began
    out.update(
        {
            "capped": capped,
            "converge_cap_seconds": sizes.fleet_cap,
            "succeeded": done,
            "converge_seconds": None if capped else took,
            "converge_throughput": done / took if took > 0 else None,
            # as measured when not capped; else N at the rate reached by the cap
            "converge_projected_seconds": took * n / done if done else None,
            "converge_cpu_seconds": cpu,
            "cpu_per_reconcile": cpu / done if done else None,
            "peak_pss_mib": peak.peak_pss / MIB,
            "peak_pss_unchecked_mib": peak.peak_pss_unchecked / MIB,
            "peak_rss_mib": peak.peak_rss / MIB,
            "peak_processes": peak.peak_processes,
            "pss_samples": peak.samples,
            "pss_samples_inconsistent": peak.inconsistent,
            "converge_api_requests": round(window.requests, 1),
            "api_per_reconcile": window.requests / done if done else None,
            "converge_api_top": window.top(30),
            "converge_runs_logged": op.successful_runs(),
        }
    )
    others, kernel = other.shares()
    out["other_load"], out["kernel_load"] = round(others, 3), round(kernel, 3)
    if capped:
        out["converge_capped_at"] = sizes.fleet_cap
        ctx.say(
            f"fleet/{ctx.operator}: capped at {sizes.fleet_cap:g}s with {done}/{n} Successful "
            f"({done / took:.2f} CR/s); not at rest, idle phase skipped"
        )
        out.update(_resting(op, "at_cap"))
    else:
        ctx.say(f"fleet/{ctx.operator}: all {n} Successful after {took:.1f}s")
        # -- 3. at rest ------------------------------------------------------------
        time.sleep(sizes.settle)
        out.update(_resting(op, "rest"))
        idle_watch = Counter(crs.requests)
        idle_api = api.read()
        idle_cpu = procs.sample(op.pid).cpu
        idle_began = time.monotonic()
        idle_other = procs.OtherLoad(op.pid, ctx.cluster.pids())
        ctx.say(f"fleet/{ctx.operator}: at rest; {sizes.fleet_idle:g}s idle")
        time.sleep(sizes.fleet_idle)
        idle_window = api.window(
            idle_api, api.read(), time.monotonic() - idle_began, crs.requests - idle_watch
        )
        out.update(_resting(op, "idle"))
        out["idle_cpu_seconds"] = procs.sample(op.pid).cpu - idle_cpu
        out["idle_api_per_minute"] = idle_window.requests / idle_window.seconds * 60
        out["idle_api_top"] = idle_window.top(20)
        out["idle_runs"] = crs.successes_between(idle_began, time.monotonic())
        out["idle_other_load"] = round(idle_other.shares()[0], 3)

    # -- 4. restart, nothing changed -----------------------------------------------
    logged_before = op.successful_runs()
    stopped = op.stop()
    stops.append(stopped)
    out["stop_seconds"] = stopped["stop_seconds"]
    watch_before = Counter(crs.requests)
    api_before = api.read()
    op = ctx.start(namespace)
    restarted = op.started
    out["restart_ready_seconds"] = op.ready_after
    ctx.say(
        f"fleet/{ctx.operator}: restarted, ready after {op.ready_after:.2f}s; "
        f"counting runs for {sizes.fleet_window:g}s"
    )
    restart_other = procs.OtherLoad(op.pid, ctx.cluster.pids())
    window_end = restarted + sizes.fleet_window
    with procs.PeakSampler(op.pid, interval=SAMPLE_INTERVAL) as peak:
        time.sleep(max(0.0, window_end - time.monotonic()))
    cpu = procs.sample(op.pid).cpu
    window = api.window(
        api_before, api.read(), time.monotonic() - restarted, crs.requests - watch_before
    )
    runs = crs.successes_between(restarted, window_end)
    out.update(
        {
            "restart_runs": runs,
            "restart_runs_logged": op.successful_runs() - logged_before,
            "restart_cpu_seconds": cpu,
            "restart_api_requests": round(window.requests, 1),
            "restart_api_top": window.top(30),
            "restart_peak_pss_mib": peak.peak_pss / MIB,
            "restart_other_load": round(restart_other.shares()[0], 3),
        }
    )
    ctx.say(f"fleet/{ctx.operator}: {runs} runs in the first {sizes.fleet_window:g}s")

    # -- 5. one CR changed --------------------------------------------------------
    target = names[-1]
    before = crs.marker(target)
    own: Counter[RequestKey] = Counter()
    changed = time.monotonic()
    ctx.cluster.update_cr(namespace, KIND, target, "changed", own)
    out["change_cr"] = target
    out["change_cap_seconds"] = sizes.fleet_change_cap
    cap = sizes.fleet_change_cap if sizes.fleet_change_cap > 0 else 86400.0
    try:
        out["change_seconds"] = crs.wait_success(target, newer_than=before, timeout=cap) - changed
        out["change_capped"] = False
        out["change_applied"] = _role_output(ctx.cluster, namespace, target) == "changed"
    except TimeoutError:
        out["change_seconds"] = None
        out["change_capped"] = True
        out["change_capped_at"] = cap
        ctx.say(f"fleet/{ctx.operator}: changed CR not Successful within {cap:g}s (cap)")
    stops.append(op.stop())
    out["restart_stop_seconds"] = stops[-1]["stop_seconds"]
    # processes alive after the operator exited (then killed), with their command lines
    left: list[str] = []
    for stop in stops:
        found = stop.get("leftover_processes")
        left.extend(str(cmd) for cmd in (found if isinstance(found, list) else []))
    out["leftover_processes"] = len(left)
    out["leftover_commands"] = left[:10]
    out["watch_errors"] = crs.errors[:5]
    return out


def summary(result: dict[str, Any]) -> str:
    """One line for the log: what converged, what was capped."""
    if "error" in result:
        return f"error: {result['error']}"
    parts = [f"{result.get('succeeded')}/{result.get('crs')} Successful"]
    if result.get("capped"):
        parts.append(f"capped at {result.get('converge_capped_at', 0):g}s")
    else:
        parts.append(f"in {result.get('converge_seconds') or 0:.0f}s")
    parts.append(f"{result.get('restart_runs')} runs after restart")
    if result.get("change_capped"):
        parts.append(f"changed CR not Successful within {result.get('change_capped_at', 0):g}s")
    elif result.get("change_seconds") is not None:
        parts.append(f"changed CR Successful after {result['change_seconds']:.2f}s")
    return "; ".join(parts)
