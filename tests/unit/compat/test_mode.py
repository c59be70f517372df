"""How the 2.18 compatibility mode is chosen, and what it puts into the runs' environment."""

from __future__ import annotations

import argparse

import pytest

from ansible_operator.compat import mode
from ansible_operator.config.options import RunOptions, add_run_arguments, options_from_args
from ansible_operator.errors import ConfigError

ENV = "ANSIBLE_OPERATOR_ANSIBLE_COMPAT"


def parse(argv: list[str], env: dict[str, str]) -> RunOptions:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_run_arguments(parser)
    return options_from_args(parser.parse_args(argv), argv, env)


@pytest.mark.parametrize(
    ("argv", "env", "on"),
    [
        # A project that changes only its FROM line (or runs `make run`): on.
        ([], {}, True),
        ([], {ENV: ""}, True),
        ([], {ENV: "off"}, False),
        ([], {ENV: "2.18"}, True),
        (["--ansible-compat=off"], {ENV: "2.18"}, False),
        (["--ansible-compat", "2.18"], {ENV: "off"}, True),
        (["--ansible-compat=OFF"], {}, False),
    ],
)
def test_flag_then_environment_then_default(argv: list[str], env: dict[str, str], on: bool) -> None:
    assert parse(argv, env).ansible_compat is on


BAD = {
    "flag": (["--ansible-compat=2.19"], {}, "--ansible-compat: invalid value '2.19'"),
    "environment": ([], {ENV: "yes"}, f"environment variable {ENV}: invalid value 'yes'"),
}


@pytest.mark.parametrize(("argv", "env", "message"), BAD.values(), ids=BAD)
def test_a_bad_value_names_where_it_came_from(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse(argv, env)


TAGGED = (2, 21)
LOOKUPS = str(mode.LOOKUP_PLUGINS_DIR)
APPLY = {
    "on, 2.21, nothing set": (
        True,
        TAGGED,
        {},
        {
            "ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "true",
            "ANSIBLE_LOOKUP_PLUGINS": f"{LOOKUPS}:~/.ansible/plugins/lookup:/usr/share/ansible/plugins/lookup",
        },
    ),
    "on, 2.21, the user's settings kept": (
        True,
        TAGGED,
        {"ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "false", "ANSIBLE_LOOKUP_PLUGINS": "/mine"},
        {
            "ANSIBLE_ALLOW_BROKEN_CONDITIONALS": "false",
            "ANSIBLE_LOOKUP_PLUGINS": f"{LOOKUPS}:/mine",
        },
    ),
    "on, 2.18: nothing to restore": (True, (2, 18), {}, {}),
    "off, 2.21": (
        False,
        TAGGED,
        {"ANSIBLE_LOOKUP_PLUGINS": "/mine"},
        {"ANSIBLE_LOOKUP_PLUGINS": "/mine"},
    ),
}


@pytest.mark.parametrize(("enabled", "line", "environ", "expected"), APPLY.values(), ids=APPLY)
def test_apply_sets_ansible_switches_only_where_they_restore(
    enabled: bool, line: tuple[int, int], environ: dict[str, str], expected: dict[str, str]
) -> None:
    compat = mode.CompatMode(enabled=enabled, line=line)
    mode.apply(compat, environ)
    assert environ == expected
    assert compat.restores is (enabled and line >= (2, 19))


def test_applying_twice_adds_the_lookup_directory_once() -> None:
    environ: dict[str, str] = {}
    compat = mode.CompatMode(enabled=True, line=TAGGED)
    mode.apply(compat, environ)
    mode.apply(compat, environ)
    assert environ["ANSIBLE_LOOKUP_PLUGINS"].count(LOOKUPS) == 1
