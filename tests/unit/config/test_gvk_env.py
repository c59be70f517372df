"""Per-kind environment overrides: names, precedence, parsing and bounds."""

from __future__ import annotations

import logging

import pytest

from ansible_operator.config.envexpand import (
    gvk_ansible_verbosity,
    gvk_env_var,
    gvk_max_concurrent_reconciles,
)
from ansible_operator.config.watches import GVK

BASKET = GVK("shop.example.org", "v1", "Basket")
MAX = "MAX_CONCURRENT_RECONCILES_BASKET_SHOP_EXAMPLE_ORG"
WORKER = "WORKER_BASKET_SHOP_EXAMPLE_ORG"
VERBOSITY = "ANSIBLE_VERBOSITY_BASKET_SHOP_EXAMPLE_ORG"


@pytest.mark.parametrize(
    ("prefix", "gvk", "name"),
    [
        ("MAX_CONCURRENT_RECONCILES", BASKET, MAX),
        ("WORKER", BASKET, WORKER),
        ("ANSIBLE_VERBOSITY", BASKET, VERBOSITY),
        # the core group leaves a trailing underscore
        ("ANSIBLE_VERBOSITY", GVK("", "v1", "Secret"), "ANSIBLE_VERBOSITY_SECRET_"),
        # only dots are replaced: a dash stays
        ("WORKER", GVK("my-shop.io", "v1", "Cart"), "WORKER_CART_MY-SHOP_IO"),
        # upper-casing is per character: a letter without a single capital stays
        ("WORKER", GVK("straße.de", "v1", "Weg"), "WORKER_WEG_STRAßE_DE"),
    ],
)
def test_variable_names(prefix: str, gvk: GVK, name: str) -> None:
    assert gvk_env_var(prefix, gvk) == name


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, 6),
        ({MAX: "3"}, 3),
        ({WORKER: "5"}, 5),
        ({MAX: "3", WORKER: "5"}, 3),  # the new name wins
        ({MAX: "+7"}, 7),
        ({MAX: "x", WORKER: "5"}, 6),  # unparsable falls back to the flag, not to WORKER
        ({MAX: " 4"}, 6),
        ({MAX: "4.0"}, 6),
        ({MAX: "0x4"}, 6),
        ({MAX: "1_0"}, 6),
        ({MAX: "99999999999999999999"}, 6),  # beyond int64
        ({MAX: "0"}, 6),
        ({MAX: "-2"}, 6),
        ({WORKER: "0"}, 6),
    ],
)
def test_max_concurrent_reconciles(environ: dict[str, str], expected: int) -> None:
    assert gvk_max_concurrent_reconciles(BASKET, default=6, environ=environ) == expected


def test_worker_variable_logs_a_deprecation(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ansible_operator.config"):
        gvk_max_concurrent_reconciles(BASKET, default=6, environ={WORKER: "2"})
    assert f"environment variable {WORKER} is deprecated, use {MAX} instead" in caplog.text


def test_unparsable_value_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ansible_operator.config"):
        gvk_max_concurrent_reconciles(BASKET, default=6, environ={MAX: "many"})
    assert f"environment variable {MAX}='many' is not an integer; using the default 6" in (
        caplog.text
    )


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, 2),
        ({VERBOSITY: "0"}, 0),
        ({VERBOSITY: "4"}, 4),
        ({VERBOSITY: "7"}, 7),
        ({VERBOSITY: "8"}, 2),
        ({VERBOSITY: "-1"}, 2),
        ({VERBOSITY: "loud"}, 2),
        ({VERBOSITY: ""}, 2),
    ],
)
def test_ansible_verbosity(environ: dict[str, str], expected: int) -> None:
    assert gvk_ansible_verbosity(BASKET, default=2, environ=environ) == expected


def test_out_of_range_verbosity_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ansible_operator.config"):
        gvk_ansible_verbosity(BASKET, default=2, environ={VERBOSITY: "9"})
    assert f"{VERBOSITY}=9 is outside 0..7; using the default 2" in caplog.text
