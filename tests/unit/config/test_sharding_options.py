"""`--sharding` and ANSIBLE_OPERATOR_SHARDING, and the settings sharded mode refuses."""

from __future__ import annotations

import argparse
import re

import pytest

from ansible_operator.config.options import RunOptions, add_run_arguments, options_from_args
from ansible_operator.controller.sharding.shardoptions import ShardOptions, check_options
from ansible_operator.errors import ConfigError


def parse(argv: list[str], env: dict[str, str] | None = None) -> RunOptions:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(argv), argv, env or {})


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, False),
        (["--sharding"], {}, True),
        (["--sharding=true"], {}, True),
        (["--sharding=false"], {"ANSIBLE_OPERATOR_SHARDING": "true"}, False),
        ([], {"ANSIBLE_OPERATOR_SHARDING": "true"}, True),
        ([], {"ANSIBLE_OPERATOR_SHARDING": "0"}, False),
        ([], {"ANSIBLE_OPERATOR_SHARDING": ""}, False),
    ],
)
def test_sharding_from_flag_or_environment(
    argv: list[str], env: dict[str, str], expected: bool
) -> None:
    assert parse(argv, env).sharding is expected


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="ANSIBLE_OPERATOR_SHARDING: invalid boolean value"):
        parse([], {"ANSIBLE_OPERATOR_SHARDING": "maybe"})


def good(**changes: object) -> ShardOptions:
    base: dict[str, object] = {
        "namespace": "ns",
        "group": "memcached-operator",
        "lease_duration": 15.0,
        "renew_deadline": 10.0,
        "retry_period": 2.0,
        "load_factor": 1.1,
    }
    base.update(changes)
    return ShardOptions(**base)  # type: ignore[arg-type]


def test_good_settings_pass() -> None:
    check_options(good())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"group": ""}, "--sharding needs --leader-election-id"),
        ({"group": "x" * 64}, "must be a valid label value"),
        ({"group": "a/b"}, "must be a valid label value"),
        ({"renew_deadline": 15.0}, "< --leader-elect-lease-duration"),
        ({"retry_period": 10.0}, "--leader-elect-retry-period < --leader-elect-renew-deadline"),
        ({"retry_period": 0.0}, "--leader-elect-retry-period < --leader-elect-renew-deadline"),
    ],
)
def test_bad_settings_name_the_flag(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_options(good(**changes))
