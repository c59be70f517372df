"""Smoke test of bench/warmidle.py's pure parts: options, the summary, the table and
the log reading. No cluster and no operator; no figure is asserted."""

from __future__ import annotations

from typing import Any

from bench import warmidle


def _round(seconds: float) -> dict[str, Any]:
    warm = {case: {"seconds": seconds} for case in ("after_start", "after_idle", "warm")}
    cold = {case: {"seconds": seconds * 2} for case in ("cold", "cold_second")}
    return {"warm_operator": warm, "cold_operator": cold}


def test_options_default_to_five_rounds_and_a_three_second_idle_timeout() -> None:
    args = warmidle.parse_args([])
    assert (args.rounds, args.idle, args.kubeconfig) == (5, 3.0, None)
    assert warmidle.parse_args(["--rounds", "2", "--idle", "1.5"]).idle == 1.5


def test_summary_and_table_give_median_and_range_per_case() -> None:
    summary = warmidle.summarize([_round(1.0), _round(3.0), _round(2.0)])
    assert summary["after_idle"] == {"median": 2.0, "min": 1.0, "max": 3.0, "samples": [1, 3, 2]}
    assert summary["cold"]["median"] == 4.0
    text = warmidle.table(summary, 1.5, 2.5)
    assert text.startswith("load average (1 min): 1.5 at start, 2.5 at end")
    assert "| first run after an idle stop (servers start again) | 2.00 s [1.00-3.00] |" in text
    assert len([line for line in text.splitlines() if line.startswith("| ")]) == 2 + 5


def test_server_starts_are_read_from_the_operator_log() -> None:
    log = (
        "INFO Warm Ansible servers started in 0.84s: {'playbook': 1, 'module': 2}\n"
        "INFO Warm Ansible servers idle for 3s: stopping them\n"
        "INFO Warm Ansible servers started in 1.20s: {'playbook': 3, 'module': 4}\n"
    )
    assert warmidle.server_start_seconds(log) == [0.84, 1.2]
