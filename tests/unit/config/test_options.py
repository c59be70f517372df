"""`ansible-operator run` flags: Go syntax, defaults, aliases and bad input."""

from __future__ import annotations

import argparse

import pytest

from ansible_operator.config import defaults
from ansible_operator.config.options import RunOptions, add_run_arguments, options_from_args
from ansible_operator.errors import ConfigError


def parse(argv: list[str], env: dict[str, str] | None = None) -> RunOptions:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(argv), argv, env or {})


def test_defaults_are_the_go_operators() -> None:
    opts = parse([])
    assert opts.watches_file == "./watches.yaml"
    assert opts.reconcile_period == 36000.0
    assert opts.ansible_verbosity == 2
    assert opts.metrics_bind_address == ":8443"
    assert opts.health_probe_bind_address == ":6789"
    assert opts.inject_owner_ref is True
    assert opts.leader_elect is False
    assert opts.max_concurrent_reconciles == defaults.MAX_CONCURRENT_RECONCILES
    assert opts.namespaces == ()


@pytest.mark.parametrize(
    ("argv", "field", "expected"),
    [
        (["--leader-elect"], "leader_elect", True),
        (["--leader-elect=true"], "leader_elect", True),
        (["--leader-elect=false"], "leader_elect", False),
        (["--enable-leader-election"], "leader_elect", True),
        (["--inject-owner-ref=false"], "inject_owner_ref", False),
        ([], "warm_ansible", True),
        (["--warm-ansible=false"], "warm_ansible", False),
        (["--warm-ansible"], "warm_ansible", True),
        (["--inject-owner-ref=False"], "inject_owner_ref", False),
        (["--reconcile-period=30s"], "reconcile_period", 30.0),
        (["--reconcile-period", "1h30m"], "reconcile_period", 5400.0),
        (["--graceful-shutdown-timeout=2s"], "graceful_shutdown_timeout", 2.0),
        (["--metrics-addr=:9090"], "metrics_bind_address", ":9090"),
        (["--metrics-bind-address=0"], "metrics_bind_address", "0"),
        (["--ansible-log-events=Everything"], "ansible_log_events", "everything"),
        (["--ansible-log-events=bogus"], "ansible_log_events", "tasks"),
        (["--max-concurrent-reconciles-total=0"], "max_concurrent_reconciles_total", 1),
        (["--zap-devel"], "zap_encoder", "console"),
        (["--zap-devel"], "zap_log_level", "debug"),
    ],
)
def test_flag_values(argv: list[str], field: str, expected: object) -> None:
    assert getattr(parse(argv), field) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--leader-elect", "--enable-leader-election"],
            "only one of --leader-elect and --enable-leader-election",
        ),
        (
            ["--metrics-addr=:1", "--metrics-bind-address=:2"],
            "only one of --metrics-addr and --metrics-bind-address",
        ),
        (
            ["--metrics-require-rbac"],
            "--metrics-secure flag is required when --metrics-require-rbac",
        ),
    ],
)
def test_conflicting_flags_are_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(argv)


@pytest.mark.parametrize(
    "argv",
    [["--reconcile-period=10"], ["--reconcile-period=soon"], ["--leader-elect=maybe"]],
)
def test_bad_values_are_rejected_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(argparse.ArgumentError):
        parse(argv)


def test_watch_namespace_and_operator_name() -> None:
    opts = parse([], {"WATCH_NAMESPACE": " a, b ,,", "OPERATOR_NAME": "legacy"})
    assert opts.namespaces == ("a", "b")
    assert opts.leader_election_id == "legacy"
    assert (
        parse(["--leader-election-id=new"], {"OPERATOR_NAME": "legacy"}).leader_election_id == "new"
    )


def test_ignored_flags_are_accepted_and_reported() -> None:
    opts = parse(["--metrics-secure", "--enable-http2=true", "--leader-elect-resource-lock=leases"])
    assert opts.ignored == ("--metrics-secure", "--enable-http2", "--leader-elect-resource-lock")
