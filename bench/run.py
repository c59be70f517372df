"""`make bench`: our operator and the Go ansible-operator v1.42.3, side by side.

Usage: python -m bench.run [--quick] [--scenarios latency,burst,steady,churn,fleet]
       [--operators python,go] [--concurrency 4] [--latency N] [--burst N]
       [--steady M] [--idle S] [--churn C] [--fleet N] [--fleet-idle S]
       [--fleet-window S] [--fleet-cap S] [--fleet-change-cap S]
       [--out bench/results] [--no-chart]

Flow: build or reuse the reference (`bench.reference`); start a dedicated
control plane in a fresh state dir under /tmp (`bench.cluster`, never the
shared .testbed/); measure its own background API traffic; then for each
scenario and each operator (the order alternates per scenario) start that
operator alone against a fresh namespace, run the scenario (`bench.scenarios`),
stop the operator and record what it left behind. Finally print the table,
write bench/results/<timestamp>.json and latest.json, and draw latest.png with
the reference venv's matplotlib (`bench/chart.py`); after a fleet run also
fleet-memory.png, PSS at rest against the fleet's size over every result file in
the output dir (`bench/fleet_chart.py`). The fleet scenario (`bench.fleet`) starts
and restarts its operators itself. Everything it started is stopped on exit,
also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import fleet, procs, reference, report, scenarios
from bench.cluster import ApiCounter, BenchCluster
from bench.operators import OperatorExited, OperatorRun, go_operator, python_operator
from bench.scenarios import MIB, Context, Sizes

HERE = Path(__file__).resolve().parent


def say(message: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--scenarios", default=",".join(scenarios.SCENARIOS))
    parser.add_argument(
        "--operators",
        default="python,python-cold,go",
        help="python-cold (ours with --warm-ansible=false) runs the latency scenario only; "
        "python-compat-off (ours with the 2.18 compatibility mode off) runs every scenario",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="max concurrent reconciles")
    for name in ("latency", "burst", "steady", "churn"):
        parser.add_argument(f"--{name}", type=int, default=None, help=f"{name} size")
    parser.add_argument("--idle", type=float, default=None, help="idle seconds (steady)")
    parser.add_argument("--fleet", type=int, default=None, help="fleet size (CRs)")
    parser.add_argument(
        "--fleet-idle", type=float, default=None, help="fleet: seconds at rest after converging"
    )
    parser.add_argument(
        "--fleet-window", type=float, default=None, help="fleet: seconds after the restart"
    )
    parser.add_argument(
        "--fleet-cap",
        type=float,
        default=None,
        help="fleet: wall-time cap of the convergence wait, per operator (0: none)",
    )
    parser.add_argument(
        "--fleet-change-cap",
        type=float,
        default=None,
        help="fleet: wall-time cap of the changed CR's wait (0: none)",
    )
    parser.add_argument(
        "--latency-rounds", type=int, default=None, help="split latency into rounds (ABBA order)"
    )
    line = reference.line_requirements()[0]
    parser.add_argument(
        "--out",
        type=Path,
        # Another Ansible line's figures (make bench ANSIBLE_LINE=2.18) go next to,
        # never over, the default line's.
        default=HERE / "results" / (f"ansible-{line}" if line else ""),
    )
    parser.add_argument("--no-chart", action="store_true")
    parser.add_argument("--keep-workdir", action="store_true", help="keep logs and runner dirs")
    args = parser.parse_args(argv)
    unknown = set(args.scenarios.split(",")) - set(scenarios.SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    if set(args.operators.split(",")) - set(report.OPERATORS):
        parser.error(f"--operators takes some of {', '.join(report.OPERATORS)}")
    return args


FLEET_SIZES = ("fleet", "fleet_idle", "fleet_window", "fleet_cap", "fleet_change_cap")


def sizes_from(args: argparse.Namespace) -> Sizes:
    base = Sizes.quick(args.concurrency) if args.quick else Sizes(concurrency=args.concurrency)
    overrides = {
        k: getattr(args, k)
        for k in (
            "latency",
            "burst",
            "steady",
            "churn",
            "idle",
            "latency_rounds",
            *FLEET_SIZES,
        )
        if getattr(args, k) is not None
    }
    return Sizes(**{**base.__dict__, **overrides})


def ours() -> dict[str, Any]:
    """Which code of ours was measured: the commit, and whether operator/ had local changes."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=HERE.parent, check=True, capture_output=True, text=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    version = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-operator"), "version"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    import importlib.metadata  # noqa: PLC0415

    return {
        "ansible_core": importlib.metadata.version("ansible-core"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "operator_tree_dirty": bool(git("status", "--porcelain", "--", "operator")),
        "version": version,
    }


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = sizes_from(args)
        self.operators = args.operators.split(",")
        self.workdir = Path(tempfile.mkdtemp(prefix="ao-bench-work-"))
        self.results: dict[str, dict[str, Any]] = {op: {} for op in self.operators}
        self.runs: list[dict[str, Any]] = []
        self.ref: reference.Reference | None = None

    def make_operator(self, name: str, cluster: BenchCluster, namespace: str) -> OperatorRun:
        workdir = self.workdir / f"{namespace}"
        workdir.mkdir(parents=True, exist_ok=True)
        if name in {"python", "python-cold", "python-compat-off"}:
            return python_operator(
                kubeconfig=cluster.kubeconfig,
                namespace=namespace,
                workdir=workdir,
                concurrency=self.sizes.concurrency,
                warm=name != "python-cold",
                compat=name != "python-compat-off",
            )
        assert self.ref is not None
        return go_operator(
            kubeconfig=cluster.kubeconfig,
            namespace=namespace,
            workdir=workdir,
            concurrency=self.sizes.concurrency,
            reference=self.ref,
        )

    def start_operator(
        self, name: str, cluster: BenchCluster, namespace: str, record: dict[str, Any]
    ) -> OperatorRun:
        """Start `name`; retry twice when it exits at once (a port taken by someone else)."""
        for attempt in range(3):
            op = self.make_operator(name, cluster, namespace)
            try:
                record["ready_seconds"] = op.start()
                return op
            except OperatorExited as err:
                op.stop()
                tail = op.log.read_text(errors="replace")[-300:] if op.log.exists() else ""
                say(f"{err} (attempt {attempt + 1}/3): ...{tail.strip()}")
                if attempt == 2:
                    raise
                time.sleep(5)
        raise AssertionError("unreachable")

    def run_one(
        self,
        cluster: BenchCluster,
        api: ApiCounter,
        scenario: str,
        name: str,
        sizes: Sizes | None = None,
    ) -> dict[str, Any]:
        namespace = cluster.new_namespace(f"{scenario}-{name}")
        sockets_before = scenarios._sockets()
        record: dict[str, Any] = {"scenario": scenario, "operator": name, "namespace": namespace}
        result: dict[str, Any] = {}
        op: OperatorRun | None = None
        say(f"{scenario}: starting the {name} operator in namespace {namespace}")
        try:
            op = self.start_operator(name, cluster, namespace, record)
            time.sleep(1.0)  # let the first list/watch settle before measuring
            record["rss_mib_ready"] = procs.sample(op.pid).rss / MIB
            ctx = Context(cluster=cluster, operator=op, sizes=sizes or self.sizes, api=api)
            other = procs.OtherLoad(op.pid, cluster.pids())
            began = time.monotonic()
            if scenario == "churn":
                result = scenarios.churn(ctx, sockets_before)
            else:
                result = getattr(scenarios, scenario)(ctx)
            record["seconds"] = time.monotonic() - began
            others, kernel = other.shares()
            record["other_load"] = result["other_load"] = round(others, 3)
            record["kernel_load"] = result["kernel_load"] = round(kernel, 3)
        except Exception as err:
            say(f"{scenario}/{name} failed: {err}")
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"}
        finally:
            if op is not None and op.proc is not None:
                record.update(op.stop())
            if op is not None and not self.args.keep_workdir:
                op.cleanup()
        if scenario == "churn" and "error" not in result:
            result["leftover_processes"] = len(record.get("leftover_processes") or [])
        record["result"] = result
        self.runs.append(record)
        summary = {k: v for k, v in result.items() if isinstance(v, int | float)}
        summary["other_load"] = record.get("other_load", float("nan"))
        say(f"{scenario}/{name}: " + ", ".join(f"{k}={v:.3g}" for k, v in summary.items()))
        return result

    def run_fleet(self, cluster: BenchCluster, api: ApiCounter, name: str) -> dict[str, Any]:
        """The fleet scenario: it starts (and restarts) the operator itself."""
        record: dict[str, Any] = {"scenario": "fleet", "operator": name}
        started: list[OperatorRun] = []

        def start(namespace: str) -> OperatorRun:
            record["namespace"] = namespace
            op = self.start_operator(name, cluster, namespace, {})
            started.append(op)
            return op

        began = time.monotonic()
        try:
            result = fleet.fleet(
                fleet.FleetContext(
                    cluster=cluster,
                    api=api,
                    sizes=self.sizes,
                    operator=name,
                    start=start,
                    say=say,
                )
            )
        except Exception as err:
            say(f"fleet/{name} failed: {err}")
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"}
        finally:
            for op in started:
                if op.proc is not None and op.proc.poll() is None:
                    record.update(op.stop())
            if started and not self.args.keep_workdir:
                started[-1].cleanup()
        record["seconds"] = time.monotonic() - began
        record["result"] = result
        self.runs.append(record)
        say(f"fleet/{name}: {fleet.summary(result)}")
        return result

    def run_scenario(
        self, cluster: BenchCluster, api: ApiCounter, scenario: str, order: list[str]
    ) -> None:
        if scenario == "fleet":
            for name in order:
                self.results[name][scenario] = self.run_fleet(cluster, api, name)
            return
        rounds = self.sizes.latency_rounds if scenario == "latency" else 1
        if rounds <= 1:
            for name in order:
                self.results[name][scenario] = self.run_one(cluster, api, scenario, name)
            return
        # Latency in rounds, operators in ABBA order, so that a burst of other work
        # on the shared machine does not land on one operator only.
        per_round = dataclasses.replace(
            self.sizes, latency=max(1, math.ceil(self.sizes.latency / rounds))
        )
        parts: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
        for index in range(rounds):
            for name in order if index % 2 == 0 else list(reversed(order)):
                parts[name].append(self.run_one(cluster, api, scenario, name, per_round))
        for name, results in parts.items():
            self.results[name][scenario] = scenarios.merge_latency(results)

    def startup_figures(self) -> None:
        for name in self.operators:
            mine = [r for r in self.runs if r["operator"] == name and "ready_seconds" in r]
            ready = [r["ready_seconds"] for r in mine]
            rss = [r["rss_mib_ready"] for r in mine if "rss_mib_ready" in r]
            stops = [float(r["stop_seconds"]) for r in mine if "stop_seconds" in r]
            if ready:
                self.results[name]["startup"] = {
                    "ready_seconds": report.median(ready),
                    "rss_mib": report.median(rss),
                    "stop_seconds": report.median(stops),
                    "samples": len(ready),
                }

    def run(self) -> dict[str, Any]:
        if "go" in self.operators:
            say("building or reusing the reference (Go ansible-operator and its Python)")
            self.ref = reference.ensure()
        meta: dict[str, Any] = {
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "sizes": self.sizes.__dict__,
            "quick": self.args.quick,
            "machine": machine(),
            "ours": ours(),
            "reference": {"module": reference.MODULE, "version": reference.VERSION},
        }
        cluster = BenchCluster()
        try:
            say(f"starting the bench control plane in {cluster.state_dir}")
            say(cluster.up().replace("\n", "; "))
            api = ApiCounter(cluster.client)
            say(f"measuring the cluster's own API traffic for {self.sizes.background:g}s")
            api.measure_background(self.sizes.background)
            meta["background_requests_per_second"] = round(sum(api.background.values()), 2)
            for index, scenario in enumerate(self.args.scenarios.split(",")):
                # Our cold path is measured for the per-task cost only (latency).
                taking = [
                    op for op in self.operators if op != "python-cold" or scenario == "latency"
                ]
                order = taking if index % 2 == 0 else list(reversed(taking))
                self.run_scenario(cluster, api, scenario, order)
        finally:
            say("stopping the bench control plane")
            cluster.down()
            if not self.args.keep_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                say(f"logs and runner dirs kept in {self.workdir}")
        self.startup_figures()
        meta["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        meta["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        rows = report.collect(self.results, self.sizes.as_labels())
        return {"meta": meta, "figures": rows, "results": self.results, "runs": self.runs}


def draw_chart(json_path: Path, png: Path) -> None:
    python = reference.default_cache() / "venv" / "bin" / "python"
    if not python.exists():
        say("no reference venv: chart skipped")
        return
    result = subprocess.run(
        [str(python), str(HERE / "chart.py"), str(json_path), str(png)],
        check=False,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        say(f"chart failed: {result.stderr.strip()[-500:]}")
    else:
        say(f"chart: {png}")


def fleet_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """What the table cannot say: which operator's fleet was capped, and where."""
    return [
        f"Fleet, {name}: {fleet.summary(res['fleet'])}"
        for name, res in results.items()
        if "fleet" in res
    ]


def draw_fleet_chart(out: Path) -> None:
    """PSS at rest against the fleet's size, from every result file in `out`."""
    python = reference.default_cache() / "venv" / "bin" / "python"
    if not python.exists():
        say("no reference venv: fleet chart skipped")
        return
    png = out / "fleet-memory.png"
    result = subprocess.run(
        [str(python), str(HERE / "fleet_chart.py"), str(out), str(png)],
        check=False,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        say(f"fleet chart failed: {result.stderr.strip()[-500:]}")
    else:
        say(f"fleet chart: {png} ({result.stdout.strip()})")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        data = bench.run()
    except reference.ReferenceError as err:
        say(f"error: {err}")
        return 1
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    path = report.write(data, args.out, stamp)
    sizes = bench.sizes
    print()
    fleet_sizes = (
        f", fleet {sizes.fleet} (+ {sizes.fleet_idle:g}s idle, {sizes.fleet_window:g}s after "
        f"the restart; caps {sizes.fleet_cap:g}s and {sizes.fleet_change_cap:g}s)"
        if "fleet" in args.scenarios.split(",")
        else ""
    )
    print(
        f"Sizes: latency {sizes.latency} CRs per role, burst {sizes.burst}, steady {sizes.steady} "
        f"+ {sizes.idle:g}s idle, churn {sizes.churn}{fleet_sizes}; "
        f"concurrency {sizes.concurrency}; "
        f"{os.cpu_count()} CPUs, load {data['meta']['machine']['loadavg_start']} → "
        f"{data['meta']['machine']['loadavg_end']}"
    )
    loads = [r["other_load"] for r in bench.runs if "other_load" in r]
    if loads:
        print(
            f"Other people's processes used {min(loads):.0%} to {max(loads):.0%} of all CPUs "
            "during the runs (shared machine: read the ratios next to the noise rows)."
        )
    print()
    print(report.table(data["figures"]))
    print()
    print(f"JSON: {path} (and {args.out / 'latest.json'})")
    for line in fleet_lines(data["results"]):
        print(line)
    if not args.no_chart:
        draw_chart(path, args.out / "latest.png")
        if "fleet" in args.scenarios.split(","):
            draw_fleet_chart(args.out)
    failed = [r for r in bench.runs if "error" in r["result"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
