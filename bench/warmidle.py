"""The first run after the warm servers' idle stop, next to a warm and a cold run.

Issue 28: "The first run after an idle period must stay well under the cold path's
time". Not part of `bench.run` (ours alone, no Go side). Run by hand:

    .venv/bin/python -m bench.warmidle --rounds 5

Without `--kubeconfig` it starts a control plane of its own, like `bench.startup`
(stopped at the end, also on errors). Each round, in one invocation:

1. `ansible-operator run` on bench/project (as `bench.startup` starts it) with
   `--warm-idle-timeout=<idle>` (3s): one BenchOne CR, create to `Successful=True`
   ("after start-up": the warm servers start with this run);
2. wait until the servers have stopped (no process running
   `ansible_operator.warm.pbserver` / `modserver` carries this operator's bench
   token any more), then another CR ("after an idle stop": they start again);
3. another CR right after it ("warm, servers up");
4. SIGTERM; then the operator with `--warm-ansible=false` in a fresh namespace and
   two CRs one after the other ("cold path", and its second run, which no longer
   pays the operator's own first-run costs, as the run after an idle stop does not).

Every time is from just before the create call to the watch event that shows the
CR `Successful=True` (bench.cluster.CrWatch), so the watch's latency is in all of
them alike. Each operator watches a namespace of its own, so no CR of an earlier
start is reconciled again. Prints a Markdown table (median [min-max] per case) with
the load average at start and end, and writes `<out>/warmidle-<timestamp>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import procs
from bench.cluster import BenchCluster, CrWatch, RequestKey
from bench.operators import OperatorRun, python_operator
from bench.startup import AttachedCluster

KIND = "BenchOne"
SERVER_MODULES = ("ansible_operator.warm.pbserver", "ansible_operator.warm.modserver")
CASES = {
    "after_start": "first run after start-up (servers start)",
    "after_idle": "first run after an idle stop (servers start again)",
    "warm": "warm, servers up",
    "cold": "cold path (`--warm-ansible=false`), first run",
    "cold_second": "cold path, second run",
}
STARTED_LOG = "Warm Ansible servers started in"
_STARTED = re.compile(re.escape(STARTED_LOG) + r" ([0-9.]+)s")
IDLE_STOP_LOG = "Warm Ansible servers idle for"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def warm_servers(token: str) -> list[int]:
    """Live warm server processes of the operator started with `token`: the servers
    and anything they forked (which keeps their command line)."""
    return sorted(
        pid
        for pid in procs.processes_with_token(token)
        if any(module in procs.command_line(pid) for module in SERVER_MODULES)
    )


def poll_until(check: Callable[[], bool], timeout: float, every: float = 0.05) -> float:
    """Seconds until `check()` held; TimeoutError after `timeout`."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"condition not met after {timeout:.0f}s")
        time.sleep(every)
    return time.monotonic() - began


def _time_cr(cluster: BenchCluster, crs: CrWatch, name: str) -> tuple[dict[str, Any], float]:
    """The run's figures, and the monotonic time its success was seen."""
    own: Counter[RequestKey] = Counter()  # create_cr counts; no API figures here
    load = _load()
    began = time.monotonic()
    cluster.create_cr(crs.namespace, KIND, name, name, own)
    done = crs.wait_success(name, timeout=180)
    return {"seconds": round(done - began, 3), "load": load}, done


def _log_text(operator: OperatorRun) -> str:
    try:
        return operator.log.read_text(errors="replace")
    except OSError:
        return ""


def server_start_seconds(log_text: str) -> list[float]:
    """How long each start of the servers took, as the operator logged it."""
    return [float(found) for found in _STARTED.findall(log_text)]


def _warm_round(cluster: BenchCluster, workdir: Path, idle: float, number: int) -> dict[str, Any]:
    namespace = cluster.new_namespace("warmidle")
    operator = python_operator(
        kubeconfig=cluster.kubeconfig, namespace=namespace, workdir=workdir, concurrency=4
    )
    operator.argv.append(f"--warm-idle-timeout={idle:g}s")
    result: dict[str, Any] = {"namespace": namespace}
    try:
        with cluster.watching(namespace, KIND) as crs:
            result["ready_s"] = round(operator.start(), 3)
            result["servers_before_first_run"] = len(warm_servers(operator.token))
            first, first_done = _time_cr(cluster, crs, f"start-{number}")
            first_pids = warm_servers(operator.token)
            # The idle clock runs from the last run's end; the watcher looks every idle/4.
            gone = poll_until(lambda: not warm_servers(operator.token), timeout=idle + 60)
            stopped_after = time.monotonic() - first_done
            result["idle_stops_logged"] = _log_text(operator).count(IDLE_STOP_LOG)
            after_idle = _time_cr(cluster, crs, f"idle-{number}")[0]
            up_pids = warm_servers(operator.token)
            warm = _time_cr(cluster, crs, f"warm-{number}")[0]
            result.update(
                after_start=first,
                after_idle=after_idle,
                warm=warm,
                servers_after_first_run=first_pids,
                servers_gone_poll_s=round(gone, 3),
                servers_gone_after_success_s=round(stopped_after, 3),
                servers_before_warm_run=up_pids,
                servers_after_warm_run=warm_servers(operator.token),
                starts_logged=_log_text(operator).count(STARTED_LOG),
                server_start_s=server_start_seconds(_log_text(operator)),
            )
    except BaseException:
        print(f"warm round {number} failed; operator log tail:\n{_log_text(operator)[-3000:]}")
        raise
    finally:
        if operator.proc is not None:
            result["stop"] = operator.stop()
        client.CoreV1Api(cluster.client).delete_namespace(namespace)
    return result


def _cold_round(cluster: BenchCluster, workdir: Path, number: int) -> dict[str, Any]:
    namespace = cluster.new_namespace("warmidle-cold")
    operator = python_operator(
        kubeconfig=cluster.kubeconfig,
        namespace=namespace,
        workdir=workdir,
        concurrency=4,
        warm=False,
    )
    result: dict[str, Any] = {"namespace": namespace}
    try:
        with cluster.watching(namespace, KIND) as crs:
            result["ready_s"] = round(operator.start(), 3)
            result["cold"] = _time_cr(cluster, crs, f"cold-{number}")[0]
            result["cold_second"] = _time_cr(cluster, crs, f"cold2-{number}")[0]
            result["warm_servers_seen"] = len(warm_servers(operator.token))
    except BaseException:
        print(f"cold round {number} failed; operator log tail:\n{_log_text(operator)[-3000:]}")
        raise
    finally:
        if operator.proc is not None:
            result["stop"] = operator.stop()
        client.CoreV1Api(cluster.client).delete_namespace(namespace)
    return result


def measure(cluster: BenchCluster, rounds: int, idle: float) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="ao-warmidle-") as scratch:
        for number in range(rounds):
            base = Path(scratch) / f"round{number}"
            (base / "warm").mkdir(parents=True)
            (base / "cold").mkdir()
            warm = _warm_round(cluster, base / "warm", idle, number)
            cold = _cold_round(cluster, base / "cold", number)
            results.append({"warm_operator": warm, "cold_operator": cold})
            print(
                f"round {number + 1}/{rounds}: "
                + ", ".join(f"{case} {_sample(results[-1], case)}s" for case in CASES),
                flush=True,
            )
    return results


def _sample(round_: dict[str, Any], case: str) -> float:
    side = "cold_operator" if case.startswith("cold") else "warm_operator"
    return float(round_[side][case]["seconds"])


def summarize(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for case in CASES:
        samples = [_sample(r, case) for r in rounds]
        summary[case] = {
            "median": round(statistics.median(samples), 3),
            "min": min(samples),
            "max": max(samples),
            "samples": samples,
        }
    return summary


def table(summary: dict[str, Any], load_start: float, load_end: float) -> str:
    lines = [
        f"load average (1 min): {load_start} at start, {load_end} at end",
        "",
        "| case | create to Successful, median [min-max] | samples |",
        "| --- | ---: | --- |",
    ]
    for case, label in CASES.items():
        row = summary[case]
        samples = ", ".join(f"{s:.2f}" for s in row["samples"])
        lines.append(
            f"| {label} | {row['median']:.2f} s [{row['min']:.2f}-{row['max']:.2f}] | {samples} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.warmidle", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, help="an existing cluster (default: own one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--idle", type=float, default=3.0, help="--warm-idle-timeout of the operator, seconds"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    load_start, began = _load(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cluster = AttachedCluster(args.kubeconfig) if args.kubeconfig else BenchCluster()
    with cluster:
        rounds = measure(cluster, args.rounds, args.idle)
    load_end = _load()
    summary = summarize(rounds)
    print(table(summary, load_start, load_end))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        "commit": commit,
        "began": began,
        "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "idle_timeout_s": args.idle,
        "load_start": load_start,
        "load_end": load_end,
        "summary": summary,
        "rounds": rounds,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"warmidle-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
