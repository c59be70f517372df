"""Start-up and resting size of our operator: imports, start-up to ready, RSS/PSS, stop.

Not part of `bench.run` (no Go side: these are figures of ours alone, issue 28's
"light operator process"). Run by hand:

    .venv/bin/python -m bench.startup --kubeconfig .testbed/kubeconfig --label after

Without `--kubeconfig` it starts a dedicated control plane like `bench.run`
does (a minute or more); with one it uses that cluster and only adds the bench
CRDs and a namespace of its own (removed at the end). Figures, each with the
load average read next to it (the machine is shared, so a figure means little
without it):

* imports: how many modules `import ansible_operator.cli` leaves in
  `sys.modules`, which of the heavy ones among them, and the wall time of
  `python -c 'import ansible_operator.cli'` (median and minimum of `--rounds`,
  next to `python -c pass`, the interpreter alone), plus the import's own
  cumulative time from `-X importtime`;
* the operator (`--rounds` starts of `ansible-operator run` on bench/project,
  leader election and metrics off, like `bench.run`): seconds from spawning
  it to the first 200 from `/readyz` (probed every 10 ms); after `--settle`
  seconds at rest, RSS (`VmRSS`) and PSS (`smaps_rollup`) of the operator
  process and of its whole tree (the lifeline's watchdog); then SIGTERM to exit.

Prints a table and writes `<out>/startup-<label>-<timestamp>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

from bench import procs
from bench.cluster import BenchCluster
from bench.operators import python_operator

HEAVY = (
    "ansible_runner",
    "pexpect",
    "pydantic",
    "multiprocessing",
    "requests",
    "oauthlib",
    "requests_oauthlib",
    "websocket",
    "kubernetes",
    "kopf",
    "aiohttp",
    "prometheus_client",
    "yaml",
    "difflib",
    "importlib.metadata",
    "ansible_operator.plan.engine",
    "ansible_operator.runner.ansible",
    "ansible_operator.scaffold.commands",
)
_IMPORTTIME = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| ansible_operator\.cli$")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wall(code: str, *flags: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of `python -c code`, and its stderr."""
    began, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, *flags, "-c", code], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - began, _children_cpu() - cpu, done.stderr


def _stats(samples: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(samples), 3),
        "min": round(min(samples), 3),
        "samples": [round(s, 3) for s in samples],
    }


def measure_imports(rounds: int) -> dict[str, Any]:
    listing = subprocess.run(
        [sys.executable, "-c", "import sys, ansible_operator.cli; print(*sorted(sys.modules))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    loaded = set(listing)
    bare, cli, cli_cpu, cumulative, loads = [], [], [], [], []
    for _ in range(rounds):
        loads.append(_load())
        bare.append(_wall("pass")[0])
        wall, cpu, _ = _wall("import ansible_operator.cli")
        cli.append(wall)
        cli_cpu.append(cpu)
        stderr = _wall("import ansible_operator.cli", "-X", "importtime")[2]
        found = _IMPORTTIME.search(stderr.splitlines()[-1] if stderr else "")
        if found:
            cumulative.append(int(found.group(1)) / 1e6)
    return {
        "modules": len(loaded),
        "heavy_loaded": [name for name in HEAVY if name in loaded],
        "python_pass_s": _stats(bare),
        "import_cli_s": _stats(cli),
        "import_cli_cpu_s": _stats(cli_cpu),
        "importtime_cli_s": _stats(cumulative) if cumulative else None,
        "load": loads,
    }


class AttachedCluster(BenchCluster):
    """An already running cluster (`--kubeconfig`): only CRDs and namespaces are ours."""

    def __init__(self, kubeconfig: Path) -> None:  # no control plane of our own
        self.kubeconfig = kubeconfig.resolve()  # the operator runs in bench/project
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.server = ""

    def up(self) -> str:
        self.install_crds()
        return f"attached to {self.kubeconfig}"

    def down(self) -> None:
        if self.api is not None:
            self.api.close()
            self.api = None


def _one_start(
    cluster: BenchCluster, namespace: str, workdir: Path, settle: float
) -> dict[str, Any]:
    operator = python_operator(
        kubeconfig=cluster.kubeconfig, namespace=namespace, workdir=workdir, concurrency=4
    )
    load_at_start = _load()
    ready = operator.start(poll=0.01)
    cpu_to_ready = procs.cpu_seconds([operator.pid])
    time.sleep(settle)
    pids = procs.tree(operator.pid)
    resting = {
        "load": _load(),
        "operator_rss_mib": round(procs.rss_bytes([operator.pid]) / 2**20, 1),
        "operator_pss_mib": round(procs.pss_bytes([operator.pid]) / 2**20, 1),
        "tree_processes": len(pids),
        "tree_rss_mib": round(procs.rss_bytes(pids) / 2**20, 1),
        "tree_pss_mib": round(procs.pss_bytes(pids) / 2**20, 1),
        "threads": len(os.listdir(f"/proc/{operator.pid}/task")),
    }
    load_at_stop = _load()
    stopped = operator.stop()
    return {
        "ready_s": round(ready, 3),
        "cpu_to_ready_s": round(cpu_to_ready, 3),
        "load_at_start": load_at_start,
        "resting": resting,
        "stop_s": stopped["stop_seconds"],
        "exit_code": stopped["exit_code"],
        "leftover_processes": stopped["leftover_processes"],
        "load_at_stop": load_at_stop,
    }


def measure_operator(cluster: BenchCluster, rounds: int, settle: float) -> list[dict[str, Any]]:
    namespace = cluster.new_namespace("startup")
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="ao-startup-") as scratch:
            for number in range(rounds):
                workdir = Path(scratch) / f"round{number}"
                workdir.mkdir()
                results.append(_one_start(cluster, namespace, workdir, settle))
    finally:
        client.CoreV1Api(cluster.client).delete_namespace(namespace)
    return results


def summarize(imports: dict[str, Any], starts: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3) if values else 0.0

    return {
        "modules": imports["modules"],
        "import_cli_median_s": imports["import_cli_s"]["median"],
        "python_pass_median_s": imports["python_pass_s"]["median"],
        "importtime_cli_median_s": (imports["importtime_cli_s"] or {}).get("median"),
        "import_cli_cpu_median_s": imports["import_cli_cpu_s"]["median"],
        "ready_median_s": median([s["ready_s"] for s in starts]),
        "cpu_to_ready_median_s": median([s["cpu_to_ready_s"] for s in starts]),
        "stop_median_s": median([float(s["stop_s"]) for s in starts]),
        "operator_rss_median_mib": median([s["resting"]["operator_rss_mib"] for s in starts]),
        "operator_pss_median_mib": median([s["resting"]["operator_pss_mib"] for s in starts]),
        "tree_pss_median_mib": median([s["resting"]["tree_pss_mib"] for s in starts]),
        "load_range": [
            min([*imports["load"], *(s["load_at_start"] for s in starts)]),
            max([*imports["load"], *(s["load_at_start"] for s in starts)]),
        ],
    }


def _print(summary: dict[str, Any], imports: dict[str, Any], starts: list[dict[str, Any]]) -> None:
    print(f"modules after `import ansible_operator.cli`: {summary['modules']}")
    print(f"heavy ones among them: {', '.join(imports['heavy_loaded']) or 'none'}")
    print("| figure | median | samples | load (1 min) |")
    print("| --- | --- | --- | --- |")
    for label, key in (
        ("python -c pass", "python_pass_s"),
        ("import cli, wall", "import_cli_s"),
        ("import cli, CPU", "import_cli_cpu_s"),
    ):
        row = imports[key]
        print(f"| {label} (s) | {row['median']} | {row['samples']} | {imports['load']} |")
    if imports["importtime_cli_s"]:
        row = imports["importtime_cli_s"]
        print(f"| -X importtime, cli (s) | {row['median']} | {row['samples']} | |")
    rows = (
        ("start-up to ready (s)", lambda s: s["ready_s"], "load_at_start"),
        ("CPU until ready (s)", lambda s: s["cpu_to_ready_s"], "load_at_start"),
        ("stop, SIGTERM to exit (s)", lambda s: s["stop_s"], "load_at_stop"),
        ("operator RSS (MiB)", lambda s: s["resting"]["operator_rss_mib"], None),
        ("operator PSS (MiB)", lambda s: s["resting"]["operator_pss_mib"], None),
        ("tree PSS (MiB)", lambda s: s["resting"]["tree_pss_mib"], None),
    )
    for label, pick, load_key in rows if starts else ():
        values = [pick(s) for s in starts]
        loads = [s[load_key] if load_key else s["resting"]["load"] for s in starts]
        print(f"| {label} | {statistics.median(values)} | {values} | {loads} |")


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench.startup", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, help="an existing cluster (default: own one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds at rest before RSS/PSS")
    parser.add_argument("--label", default="run")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--imports-only", action="store_true")
    args = parser.parse_args()
    imports = measure_imports(args.rounds)
    starts: list[dict[str, Any]] = []
    if not args.imports_only:
        cluster = AttachedCluster(args.kubeconfig) if args.kubeconfig else BenchCluster()
        with cluster:
            starts = measure_operator(cluster, args.rounds, args.settle)
    summary = summarize(imports, starts)
    _print(summary, imports, starts)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        "label": args.label,
        "commit": commit,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "summary": summary,
        "imports": imports,
        "starts": starts,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"startup-{args.label}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
