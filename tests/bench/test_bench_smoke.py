"""Smoke test of the benchmark's pure parts: statistics, ratios, the table, the JSON file.

No cluster and no operator: bench.run's scenarios are exercised by `make bench`
only, and no performance figure is asserted anywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import report, scenarios
from bench.cluster import is_probe, key_label, parse_request_totals, success_marker
from bench.scenarios import merge_latency

SIZES = {"latency": 5, "burst": 20, "steady": 50, "idle": "15", "churn": 20, "concurrency": 4}

RESULTS = {
    "python": {
        "latency": {"one_median": 2.5, "one_p90": 3.0, "five_samples": [1, 2]},
        "burst": {"throughput": 1.5},
        "churn": {"leaked_runner_entries": 0, "leftover_objects": 4},
    },
    "go": {
        "latency": {"one_median": 2.0, "one_p90": float("nan")},
        "burst": {"throughput": 1.0},
        "churn": {"leaked_runner_entries": 150, "leftover_objects": 0},
    },
}


def test_percentiles_interpolate_like_numpy() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert report.median(values) == 2.5
    assert report.percentile(values, 90) == pytest.approx(3.7)
    assert report.percentile([7.0], 90) == 7.0
    assert math.isnan(report.percentile([], 50))


def test_ratio_is_ours_over_go() -> None:
    assert report.ratio(3.0, 2.0) == 1.5
    assert report.ratio(0.0, 0.0) == 1.0
    assert report.ratio(4.0, 0.0) is None
    assert report.ratio(None, 1.0) is None


def test_collect_keeps_figures_either_side_has() -> None:
    rows = {r["key"]: r for r in report.collect(RESULTS, SIZES)}
    assert rows["latency.one_median"]["ratio"] == pytest.approx(1.25)
    assert rows["latency.one_p90"]["go"] is None  # NaN counts as missing
    assert rows["burst.throughput"]["better"] == "higher"
    assert "burst.seconds" not in rows
    assert "latency.five_samples" not in rows  # lists are details, not figures
    assert (
        "20 create/update/delete"
        in report.collect({"python": {"churn": {"seconds": 1.0}}}, SIZES)[0]["label"]
    )


def test_table_formats_values_and_ratios() -> None:
    text = report.table(report.collect(RESULTS, SIZES))
    lines = text.splitlines()
    assert lines[0].startswith("| figure | unit | ours (Python) | Go v1.42.3 | ours / Go |")
    assert "| 2.50 | 2.00 | 1.25x |" in text
    assert "| 3.00 | - | - |" in text
    assert "| count | 0 | 150 | 0.00x |" in text
    assert "| count | 4 | 0 | ∞ (Go: 0) |" in text
    assert report.fmt_value(123.456, "MiB") == "123"
    assert report.fmt_value(12.345, "s") == "12.3"
    assert report.fmt_value(7.0, "count") == "7"


def test_write_creates_timestamped_and_latest_json(tmp_path: Path) -> None:
    data = {"meta": {"quick": True}, "figures": report.collect(RESULTS, SIZES)}
    path = report.write(data, tmp_path / "results", "20260101T000000")
    assert path == tmp_path / "results" / "20260101T000000.json"
    assert json.loads(path.read_text()) == json.loads((path.parent / "latest.json").read_text())
    assert json.loads(path.read_text())["meta"] == {"quick": True}


def test_request_totals_are_summed_over_codes() -> None:
    page = "\n".join(
        [
            "# HELP apiserver_request_total Counter of apiserver requests",
            'apiserver_request_total{code="200",component="apiserver",dry_run="",group="bench.example.com",'
            'resource="benchones",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 3',
            'apiserver_request_total{code="409",component="apiserver",dry_run="",group="bench.example.com",'
            'resource="benchones",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 1',
            'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",'
            'subresource="/readyz",verb="GET",version=""} 9',
            'apiserver_request_duration_seconds_count{verb="GET"} 5',
        ]
    )
    totals = parse_request_totals(page)
    key = ("PUT", "bench.example.com", "benchones", "status")
    assert totals[key] == 4
    assert is_probe(("GET", "", "", "/readyz"))
    assert not is_probe(key)
    assert key_label(key) == "PUT benchones.bench.example.com/status"
    assert key_label(("GET", "", "", "api")) == "GET /api"


def test_success_marker_changes_with_each_successful_run() -> None:
    def cr(successful: str, completion: str) -> dict[str, object]:
        return {
            "status": {
                "conditions": [
                    {"type": "Running", "ansibleResult": {"completion": completion}},
                    {"type": "Successful", "status": successful},
                ]
            }
        }

    assert success_marker({}) is None
    assert success_marker(cr("False", "t1")) is None
    assert success_marker(cr("True", "t1")) == "t1"
    assert success_marker(cr("True", "t2")) != success_marker(cr("True", "t1"))


def test_latency_rounds_are_pooled() -> None:
    def part(first: float, samples: list[float]) -> dict[str, object]:
        return {
            "first_one": first,
            "one_samples": samples,
            "first_five": first * 2,
            "five_samples": [s * 2 for s in samples],
        }

    merged = merge_latency([part(3.0, [1.0, 2.0]), part(5.0, [3.0, 4.0]), {"error": "boom"}])
    assert merged["one_samples"] == [1.0, 2.0, 3.0, 4.0]
    assert merged["one_median"] == 2.5
    assert merged["first_one"] == 4.0
    assert merged["five_median"] == 5.0
    assert merged["round_errors"] == ["boom"]
    assert merge_latency([{"error": "x"}]) == {"error": "x"}


def test_noise_rows_get_no_ratio() -> None:
    rows = report.collect(
        {"python": {"steady": {"other_load": 0.5}}, "go": {"steady": {"other_load": 0.1}}}, SIZES
    )
    assert rows[0]["better"] == "context"
    assert rows[0]["ratio"] is None
    assert report.table(rows).splitlines()[-1].endswith("| 0.50 | 0.10 | - |")


def test_a_noise_row_with_a_zero_on_the_go_side_still_gets_no_ratio() -> None:
    # Seen in a full run: 0.004 vs 0.0 printed as "∞ (Go: 0)".
    rows = report.collect(
        {"python": {"latency": {"other_load": 0.004}}, "go": {"latency": {"other_load": 0.0}}},
        SIZES,
    )
    assert report.table(rows).splitlines()[-1].endswith("| 0.00 | 0.00 | - |")


def test_the_cold_path_gets_a_column_and_the_per_task_cost_a_row() -> None:
    results = {
        "python": {"latency": {"one_median": 0.5, "five_median": 0.9, "k8s_task_seconds": 0.1}},
        "python-cold": {"latency": {"one_median": 1.5, "k8s_task_seconds": 0.7}},
        "go": {"latency": {"one_median": 2.0, "k8s_task_seconds": 0.8}},
    }
    rows = {row["key"]: row for row in report.collect(results, SIZES)}
    task = rows["latency.k8s_task_seconds"]
    assert (task["python"], task["python_cold"], task["go"]) == (0.1, 0.7, 0.8)
    assert task["ratio"] == 0.125  # ours / Go: the cold path never enters the ratio
    text = report.table(list(rows.values()))
    assert "| ours, cold path |" in text
    assert "| 0.50 | 1.50 | 2.00 | 0.25x |" in text
    assert "ours, cold path" not in report.table(report.collect({"go": results["go"]}, SIZES))


def test_the_compat_mode_off_gets_a_column_and_a_ratio_of_its_own() -> None:
    results = {
        "python": {"latency": {"one_median": 0.42}},
        "python-compat-off": {"latency": {"one_median": 0.40}},
        "go": {"latency": {"one_median": 2.0}},
    }
    rows = {row["key"]: row for row in report.collect(results, SIZES)}
    one = rows["latency.one_median"]
    assert one["compat_ratio"] == 0.42 / 0.40
    assert one["ratio"] == 0.21  # ours (mode on, the default) / Go
    text = report.table(list(rows.values()))
    assert "| ours, compat off | compat on / off |" in text
    assert "| 0.42 | 0.40 | 1.05x | 2.00 | 0.21x |" in text
    assert "compat off" not in report.table(report.collect({"go": results["go"]}, SIZES))


def test_per_task_cost_is_the_difference_over_four_tasks() -> None:
    assert scenarios.per_task(0.5, 0.9) == pytest.approx(0.1)
