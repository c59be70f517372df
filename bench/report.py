"""The pure part of the benchmark: statistics, the figure list, the table and the JSON file.

Used by `bench.run` after the scenarios, and by tests/bench without any cluster.
`collect` turns the per-operator scenario results into a flat list of figures
(one per row), each with both operators' values (and our cold path's, when
measured) and the ratio ours / Go's;
`table` renders them as a Markdown table; `write` stores the whole report as
`<dir>/<timestamp>.json` and `<dir>/latest.json`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPERATORS = ("python", "python-cold", "python-compat-off", "go")


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Figure:
    key: str  # "<scenario>.<name>" in the results
    label: str  # may use {latency} {burst} {steady} {idle} {churn} {concurrency} {fleet} ...
    unit: str
    better: str = "lower"  # or "higher", or "context" (no ratio: conditions, not results)


FIGURES: tuple[Figure, ...] = (
    Figure("startup.ready_seconds", "start-up: process start to /readyz OK (median)", "s"),
    Figure("startup.rss_mib", "start-up: RSS of the process tree when ready (median)", "MiB"),
    Figure("startup.stop_seconds", "stop: SIGTERM to exit, idle (median)", "s"),
    Figure("latency.one_median", "latency, 1-task role: create → Successful, median", "s"),
    Figure("latency.one_p90", "latency, 1-task role: p90", "s"),
    Figure("latency.five_median", "latency, 5-task role: create → Successful, median", "s"),
    Figure("latency.five_p90", "latency, 5-task role: p90", "s"),
    Figure("latency.first_one", "latency of the very first CR (cold, 1-task)", "s"),
    Figure(
        "latency.k8s_task_seconds",
        "one kubernetes.core.k8s task: (5-task - 1-task median) / 4",
        "s",
    ),
    Figure("burst.seconds", "burst of {burst} CRs: create → all Successful", "s"),
    Figure("burst.throughput", "burst throughput", "CR/s", "higher"),
    Figure("burst.peak_rss_mib", "burst: peak RSS of the tree", "MiB"),
    Figure("burst.peak_pss_mib", "burst: peak PSS of the tree", "MiB"),
    Figure(
        "burst.peak_pss_unchecked_mib",
        "burst: peak PSS, also sums read while the tree changed (before run 8)",
        "MiB",
    ),
    Figure("burst.cpu_per_reconcile", "burst: CPU per reconcile (tree)", "s"),
    Figure("steady.rss_mib", "steady, {steady} CRs after {idle}s idle: RSS of the tree", "MiB"),
    Figure("steady.pss_mib", "steady: PSS of the tree", "MiB"),
    Figure("steady.idle_cpu_seconds", "steady: CPU used during {idle}s idle", "s"),
    Figure("steady.cpu_per_reconcile", "steady: CPU per reconcile (tree)", "s"),
    Figure("steady.api_per_reconcile", "steady: API requests per reconcile (no watches)", "req"),
    Figure(
        "steady.idle_api_per_minute",
        "steady: API requests per minute while idle (no watches)",
        "req/min",
    ),
    Figure("churn.seconds", "churn, {churn} create/update/delete cycles: duration", "s"),
    Figure("churn.leaked_runner_entries", "churn: files+dirs left in the runner dir", "count"),
    Figure("churn.leaked_tmp_entries", "churn: files left in TMPDIR", "count"),
    Figure("churn.leaked_sockets", "churn: event sockets left in /tmp", "count"),
    Figure("churn.leftover_objects", "churn: ConfigMaps left by deleted CRs", "count"),
    Figure(
        "churn.extra_processes",
        "churn: child processes still alive after settling (not primed children)",
        "count",
    ),
    Figure(
        "churn.helper_processes",
        "churn: primed children alive (long-lived helpers)",
        "count",
        "context",
    ),
    Figure("churn.leftover_processes", "churn: processes left after the operator stopped", "count"),
    Figure("churn.rss_mib", "churn: RSS of the tree afterwards", "MiB"),
    # The fleet (bench/fleet.py): N CRs created before the operator starts.
    Figure(
        "fleet.converge_seconds",
        "fleet of {fleet} CRs created before start: process start → all Successful",
        "s",
    ),
    Figure(
        "fleet.converge_projected_seconds",
        "fleet: the same, projected from the rate reached when capped",
        "s",
    ),
    Figure("fleet.converge_capped_at", "fleet: convergence wait capped at", "s", "context"),
    Figure("fleet.succeeded", "fleet: CRs Successful by then", "count", "context"),
    Figure("fleet.converge_throughput", "fleet: CRs Successful per second", "CR/s", "higher"),
    Figure("fleet.converge_cpu_seconds", "fleet: CPU seconds of the tree until then", "s"),
    Figure("fleet.cpu_per_reconcile", "fleet: CPU per Successful CR (tree)", "s"),
    Figure("fleet.peak_pss_mib", "fleet: peak PSS of the tree until then", "MiB"),
    Figure("fleet.peak_rss_mib", "fleet: peak RSS of the tree until then", "MiB"),
    Figure("fleet.converge_api_requests", "fleet: API requests until then (no watches)", "req"),
    Figure("fleet.api_per_reconcile", "fleet: API requests per Successful CR", "req"),
    Figure("fleet.rest_pss_mib", "fleet at rest, just converged: PSS of the tree", "MiB"),
    Figure("fleet.rest_rss_mib", "fleet at rest, just converged: RSS of the tree", "MiB"),
    Figure(
        "fleet.rest_main_pss_mib", "fleet at rest, just converged: PSS of the operator alone", "MiB"
    ),
    Figure("fleet.idle_pss_mib", "fleet after {fleet_idle}s idle: PSS of the tree", "MiB"),
    Figure("fleet.idle_rss_mib", "fleet after {fleet_idle}s idle: RSS of the tree", "MiB"),
    Figure(
        "fleet.idle_main_pss_mib",
        "fleet after {fleet_idle}s idle: PSS of the operator alone",
        "MiB",
    ),
    Figure(
        "fleet.idle_processes", "fleet after {fleet_idle}s idle: processes in the tree", "count"
    ),
    Figure("fleet.idle_cpu_seconds", "fleet: CPU used during {fleet_idle}s idle", "s"),
    Figure("fleet.idle_api_per_minute", "fleet: API requests per minute while idle", "req/min"),
    Figure(
        "fleet.at_cap_pss_mib",
        "fleet, capped: PSS of the tree at the cap (busy, not at rest)",
        "MiB",
    ),
    Figure(
        "fleet.at_cap_main_pss_mib",
        "fleet, capped: PSS of the operator alone at the cap (busy)",
        "MiB",
    ),
    Figure("fleet.stop_seconds", "fleet: SIGTERM to exit with {fleet} CRs", "s"),
    Figure("fleet.restart_ready_seconds", "fleet restart: process start to /readyz OK", "s"),
    Figure(
        "fleet.restart_runs",
        "fleet restart, nothing changed: runs in the first {fleet_window}s",
        "count",
    ),
    Figure("fleet.restart_cpu_seconds", "fleet restart: CPU seconds in them (tree)", "s"),
    Figure("fleet.restart_api_requests", "fleet restart: API requests in them", "req"),
    Figure("fleet.restart_peak_pss_mib", "fleet restart: peak PSS of the tree in them", "MiB"),
    Figure("fleet.change_seconds", "fleet: one CR changed after them: PATCH → Successful", "s"),
    Figure("fleet.change_capped_at", "fleet: the changed CR's wait capped at", "s", "context"),
    Figure("latency.other_load", "noise: others' CPU during latency", "CPU share", "context"),
    Figure("burst.other_load", "noise: others' CPU during burst", "CPU share", "context"),
    Figure("steady.other_load", "noise: others' CPU during steady", "CPU share", "context"),
    Figure("churn.other_load", "noise: others' CPU during churn", "CPU share", "context"),
    Figure("latency.kernel_load", "kernel threads' CPU during latency", "CPU share", "context"),
    Figure("burst.kernel_load", "kernel threads' CPU during burst", "CPU share", "context"),
    Figure("steady.kernel_load", "kernel threads' CPU during steady", "CPU share", "context"),
    Figure("churn.kernel_load", "kernel threads' CPU during churn", "CPU share", "context"),
    Figure(
        "fleet.other_load", "noise: others' CPU while the fleet converged", "CPU share", "context"
    ),
    Figure(
        "fleet.restart_other_load",
        "noise: others' CPU after the fleet's restart",
        "CPU share",
        "context",
    ),
)


def lookup(results: Mapping[str, Any], key: str) -> float | None:
    scenario, _, name = key.partition(".")
    value = (results.get(scenario) or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return float(value)


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs; None when either is missing or theirs is 0 (unless both are 0: 1.0)."""
    if ours is None or theirs is None:
        return None
    if theirs == 0:
        return 1.0 if ours == 0 else None
    return ours / theirs


def collect(
    results: Mapping[str, Mapping[str, Any]], sizes: Mapping[str, Any]
) -> list[dict[str, Any]]:
    rows = []
    for fig in FIGURES:
        ours = lookup(results.get("python") or {}, fig.key)
        theirs = lookup(results.get("go") or {}, fig.key)
        cold = lookup(results.get("python-cold") or {}, fig.key)
        compat_off = lookup(results.get("python-compat-off") or {}, fig.key)
        if ours is None and theirs is None and cold is None and compat_off is None:
            continue
        rows.append(
            {
                "key": fig.key,
                "label": fig.label.format(**sizes),
                "unit": fig.unit,
                "better": fig.better,
                "python": ours,
                "python_cold": cold,
                "python_compat_off": compat_off,
                "go": theirs,
                "ratio": None if fig.better == "context" else ratio(ours, theirs),
                # What the 2.18 compatibility mode costs: ours with it / without it.
                "compat_ratio": None if fig.better == "context" else ratio(ours, compat_off),
            }
        )
    return rows


def fmt_value(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "count" or abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_ratio(value: float | None, ours: float | None, theirs: float | None) -> str:
    if value is None and ours is not None and theirs is not None and theirs != 0:
        return "-"
    if value is None:
        if ours is not None and theirs == 0:
            return "∞ (Go: 0)"
        return "-"
    return f"{value:.2f}x"


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown table; a column for our cold path when it was measured, and two
    for the 2.18 compatibility mode turned off (its figure, and ours / it)."""
    with_cold = any(row.get("python_cold") is not None for row in rows)
    with_off = any(row.get("python_compat_off") is not None for row in rows)
    cold_head, cold_rule = (" ours, cold path |", " ---: |") if with_cold else ("", "")
    off_head, off_rule = (
        (" ours, compat off | compat on / off |", " ---: | ---: |") if with_off else ("", "")
    )
    lines = [
        f"| figure | unit | ours (Python) |{cold_head}{off_head} Go v1.42.3 | ours / Go |",
        f"| --- | --- | ---: |{cold_rule}{off_rule} ---: | ---: |",
    ]
    for row in rows:
        unit = str(row["unit"])
        # Context rows (noise) describe the machine, not the operators: no ratio.
        shown = (
            "-"
            if row.get("better") == "context"
            else fmt_ratio(row["ratio"], row["python"], row["go"])
        )
        cold = f" {fmt_value(row.get('python_cold'), unit)} |" if with_cold else ""
        off = ""
        if with_off:
            on_off = fmt_ratio(row.get("compat_ratio"), row["python"], row.get("python_compat_off"))
            off = f" {fmt_value(row.get('python_compat_off'), unit)} | {on_off} |"
        lines.append(
            f"| {row['label']} | {unit} | {fmt_value(row['python'], unit)} |{cold}{off} "
            f"{fmt_value(row['go'], unit)} | {shown} |"
        )
    return "\n".join(lines)


def write(report: Mapping[str, Any], out_dir: Path, stamp: str) -> Path:
    """Write `<out_dir>/<stamp>.json` and `<out_dir>/latest.json`; return the first."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"
    path = out_dir / f"{stamp}.json"
    path.write_text(text)
    latest = out_dir / "latest.json"
    tmp = latest.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(latest)
    return path
