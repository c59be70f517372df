"""Smoke test of the fleet scenario's wiring (bench/fleet.py): options, sizes, names,
the watch's bookkeeping, the report rows and the chart's input. No cluster, no
operator, no fleet: the scenario itself runs in `make bench` only, and no figure is
asserted anywhere.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from bench import fleet, fleet_chart, report, run, scenarios
from bench.cluster import CrWatch


def test_fleet_is_a_scenario_of_make_bench_with_its_sizes() -> None:
    assert scenarios.SCENARIOS[-1] == "fleet"
    full = run.sizes_from(run.parse_args([]))
    assert "fleet" in run.parse_args([]).scenarios.split(",")
    assert (full.fleet, full.fleet_idle, full.fleet_window) == (10_000, 300.0, 600.0)
    assert (full.fleet_cap, full.fleet_change_cap) == (3600.0, 600.0)
    quick = run.sizes_from(run.parse_args(["--quick", "--scenarios", "steady,fleet"]))
    assert (quick.fleet, quick.fleet_idle, quick.fleet_window) == (1_000, 60.0, 120.0)
    assert (quick.fleet_cap, quick.fleet_change_cap) == (1200.0, 60.0)
    mine = run.sizes_from(
        run.parse_args(["--quick", "--fleet", "3000", "--fleet-cap", "0", "--fleet-idle", "30"])
    )
    assert (mine.fleet, mine.fleet_cap, mine.fleet_idle, mine.fleet_window) == (
        3000,
        0.0,
        30.0,
        120.0,
    )
    labels = mine.as_labels()
    assert (labels["fleet"], labels["fleet_idle"], labels["fleet_window"]) == (3000, "30", "120")


def test_fleet_names_sort_in_creation_order() -> None:
    names = fleet.fleet_names(1000)
    assert (names[0], names[-1], len(set(names))) == ("fleet-000", "fleet-999", 1000)
    assert sorted(names) == names
    assert fleet.fleet_names(1) == ["fleet-0"]


def test_a_cap_of_zero_means_no_cap() -> None:
    assert fleet.cap_deadline(100.0, 60.0) == 160.0
    assert math.isinf(fleet.cap_deadline(100.0, 0.0))


def _cr(name: str, completion: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if completion is not None:
        status = {
            "conditions": [
                {"type": "Running", "ansibleResult": {"completion": completion}},
                {"type": "Successful", "status": "True"},
            ]
        }
    return {"metadata": {"name": name}, "status": status}


def test_the_watch_counts_first_successes_and_every_later_run() -> None:
    crs = CrWatch(None, "ns", "BenchOne")  # type: ignore[arg-type]  # no request is made
    began = time.monotonic()
    crs._observe("ADDED", _cr("a", None))
    crs._observe("MODIFIED", _cr("a", "t1"))
    crs._observe("MODIFIED", _cr("a", "t1"))  # the same run seen twice: one run
    crs._observe("MODIFIED", _cr("b", "t1"))
    done, last = crs.wait_converged(["a", "b", "c"], deadline=time.monotonic() + 0.2)
    assert done == 2
    assert began <= last <= time.monotonic()
    crs._observe("MODIFIED", _cr("c", "t2"))
    crs._observe("MODIFIED", _cr("a", "t3"))  # a re-run
    assert crs.wait_converged(["a", "b", "c"], deadline=time.monotonic() + 5)[0] == 3
    assert crs.successes_between(began, time.monotonic() + 1) == 4
    assert crs.successes_between(time.monotonic() + 1, time.monotonic() + 2) == 0


CAPPED_GO = {
    "crs": 1000,
    "capped": True,
    "succeeded": 400,
    "converge_seconds": None,
    "converge_projected_seconds": 3000.0,
    "converge_capped_at": 1200.0,
    "at_cap_pss_mib": 400.0,
    "restart_runs": 120,
    "change_capped": True,
    "change_cap_seconds": 60.0,
    "change_seconds": None,
    "change_capped_at": 60.0,
}
OURS = {
    "crs": 1000,
    "capped": False,
    "succeeded": 1000,
    "converge_seconds": 300.0,
    "converge_projected_seconds": 300.0,
    "rest_pss_mib": 150.0,
    "idle_pss_mib": 140.0,
    "restart_runs": 0,
    "change_capped": False,
    "change_seconds": 1.5,
}
LABELS = {**scenarios.Sizes.quick().as_labels()}


def test_report_rows_of_a_capped_go_fleet() -> None:
    rows = {
        r["key"]: r
        for r in report.collect({"python": {"fleet": OURS}, "go": {"fleet": CAPPED_GO}}, LABELS)
    }
    converge = rows["fleet.converge_seconds"]
    assert converge["label"].startswith("fleet of 1000 CRs created before start")
    assert (converge["python"], converge["go"], converge["ratio"]) == (300.0, None, None)
    assert rows["fleet.converge_projected_seconds"]["ratio"] == 0.1
    assert rows["fleet.converge_capped_at"]["better"] == "context"
    assert "first 120s" in rows["fleet.restart_runs"]["label"]
    assert "after 60s idle" in rows["fleet.idle_pss_mib"]["label"]
    assert "capped" not in rows["fleet.succeeded"]["label"]
    text = report.table(list(rows.values()))
    assert "| fleet: convergence wait capped at | s | - | 1200 | - |" in text
    lines = run.fleet_lines({"python": {"fleet": OURS}, "go": {"fleet": CAPPED_GO}})
    assert lines[0] == (
        "Fleet, python: 1000/1000 Successful; in 300s; 0 runs after restart; "
        "changed CR Successful after 1.50s"
    )
    assert "capped at 1200s" in lines[1]
    assert "changed CR not Successful within 60s" in lines[1]
    assert fleet.summary({"error": "boom"}) == "error: boom"


def _result_file(path: Path, started: str, python: dict[str, Any], go: dict[str, Any]) -> None:
    data = {
        "meta": {"started": started, "ours": {"commit": "abc1234"}},
        "results": {"python": {"fleet": python}, "go": {"fleet": go}},
    }
    path.write_text(json.dumps(data))


def test_the_chart_keeps_the_newest_result_per_operator_and_size(tmp_path: Path) -> None:
    _result_file(tmp_path / "a.json", "2026-01-01T00:00:00", OURS, CAPPED_GO)
    newer = {**OURS, "idle_pss_mib": 99.0}
    _result_file(tmp_path / "b.json", "2026-01-02T00:00:00", newer, {"error": "x"})
    _result_file(tmp_path / "latest.json", "2027-01-01T00:00:00", {**OURS, "crs": 5}, OURS)
    (tmp_path / "c.json").write_text('{"meta": {}, "results": {"python": {"steady": {}}}}')
    (tmp_path / "broken.json").write_text("{")
    found = fleet_chart.points(tmp_path)
    assert sorted(found) == [("go", 1000), ("python", 1000)]
    assert found[("python", 1000)]["idle_pss_mib"] == 99.0
    assert found[("python", 1000)]["file"] == "b.json"
    assert found[("go", 1000)]["capped"] is True
    assert fleet_chart.main([str(tmp_path / "empty")]) == 2
