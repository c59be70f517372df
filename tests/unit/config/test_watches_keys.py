"""Key handling: case-insensitive matching, two spellings of one key, unknown keys, nulls."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ansible_operator.config.watches import WatchesError
from tests.unit.config import load_fixture, load_text, make_project

HEAD = "- version: v1\n  group: shop.example.org\n  kind: Basket\n  role: basket\n"
LABEL = "watches.yaml: entry 0 (shop.example.org/v1, Kind=Basket)"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="ansible_operator.config")
    return caplog


@pytest.mark.parametrize(
    "spelling",
    ["manageStatus", "ManageStatus", "managestatus", "MANAGESTATUS", "mAnAgEsTaTuS"],
)
def test_keys_match_in_any_case(project: Path, spelling: str) -> None:
    (watch,) = load_text(HEAD + f"  {spelling}: false\n", project)
    assert watch.manage_status is False


def test_nested_keys_match_in_any_case(project: Path) -> None:
    (watch,) = load_fixture("valid_case_insensitive.yaml", project)
    assert watch.finalizer is not None
    assert watch.finalizer.name == "shop.example.org/finalizer"


def test_long_s_folds_like_go(project: Path) -> None:
    # encoding/json folds U+017F onto "s", so this still sets manageStatus.
    (watch,) = load_text(HEAD + "  manageStatu\u017f: false\n", project)
    assert watch.manage_status is False


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        # byte-wise order: "MANAGESTATUS" < "ManageStatus" < "manageStatus" < "managestatus"
        ("ManageStatus: false", "manageStatus: true", True),
        ("manageStatus: false", "ManageStatus: true", False),
        ("MANAGESTATUS: true", "managestatus: false", False),
        ("managestatus: true", "manageStatus: false", True),
    ],
)
def test_last_spelling_in_byte_order_wins(
    project: Path,
    warnings: pytest.LogCaptureFixture,
    first: str,
    second: str,
    expected: bool,
) -> None:
    (watch,) = load_text(HEAD + f"  {first}\n  {second}\n", project)
    assert watch.manage_status is expected
    assert "both set" in warnings.text
    assert LABEL in warnings.text


def test_two_spellings_of_a_struct_merge(project: Path) -> None:
    text = HEAD + (
        "  Finalizer:\n    name: shop.example.org/finalizer\n    vars: {a: 1}\n"
        "  finalizer:\n    vars: {b: 2}\n"
    )
    (watch,) = load_text(text, project)
    assert watch.finalizer is not None
    assert watch.finalizer.name == "shop.example.org/finalizer"
    assert watch.finalizer.vars == {"a": 1, "b": 2}


def test_null_resets_pointer_keys_but_not_plain_ones(project: Path) -> None:
    # In the Go struct manageStatus is a pointer (null = default) while
    # maxRunnerArtifacts is a plain int (null = leave the earlier value).
    text = HEAD + (
        "  ManageStatus: false\n  manageStatus: ~\n"
        "  MaxRunnerArtifacts: 7\n  maxRunnerArtifacts: ~\n"
    )
    (watch,) = load_text(text, project)
    assert watch.manage_status is True
    assert watch.max_runner_artifacts == 7


def test_null_and_zero_give_defaults(project: Path) -> None:
    text = HEAD + "  maxRunnerArtifacts: 0\n  watchDependentResources: ~\n  vars: ~\n"
    (watch,) = load_text(text, project)
    assert watch.max_runner_artifacts == 20
    assert watch.watch_dependent_resources is True
    assert watch.vars == {}


def test_negative_artifacts_pass_through(project: Path) -> None:
    (watch,) = load_text(HEAD + "  maxRunnerArtifacts: -1\n", project)
    assert watch.max_runner_artifacts == -1


def test_negative_period_is_kept(project: Path) -> None:
    (watch,) = load_text(HEAD + "  reconcilePeriod: -1m\n", project)
    assert watch.reconcile_period == -60.0


@pytest.mark.parametrize(
    ("line", "key", "hint"),
    [
        ("watches: []", "watches", ""),
        ("playbookk: site.yml", "playbookk", ""),
        (
            "maxConcurrentReconciles: 3",
            "maxConcurrentReconciles",
            " (set MAX_CONCURRENT_RECONCILES_BASKET_SHOP_EXAMPLE_ORG or "
            "--max-concurrent-reconciles instead)",
        ),
        (
            "maxWorkers: 3",
            "maxWorkers",
            " (set MAX_CONCURRENT_RECONCILES_BASKET_SHOP_EXAMPLE_ORG or "
            "--max-concurrent-reconciles instead)",
        ),
        (
            "ansibleVerbosity: 5",
            "ansibleVerbosity",
            " (set ANSIBLE_VERBOSITY_BASKET_SHOP_EXAMPLE_ORG or --ansible-verbosity instead)",
        ),
        ("finalizer: {name: f, vars: {a: 1}, rolee: x}", "finalizer.rolee", ""),
        ("selector: {matchLabel: {a: b}}", "selector.matchLabel", ""),
        ("blacklist: [{group: a, version: v1, kind: K, extra: 1}]", "blacklist[0].extra", ""),
    ],
)
def test_unknown_keys_are_ignored_with_a_warning(
    project: Path, warnings: pytest.LogCaptureFixture, line: str, key: str, hint: str
) -> None:
    (watch,) = load_text(HEAD + f"  {line}\n", project)
    assert watch.max_concurrent_reconciles == 4  # nothing in the file changes it
    assert watch.ansible_verbosity == 2
    messages = [record.getMessage() for record in warnings.records]
    assert f"{LABEL}: unknown key {key!r} is ignored{hint}" in messages


def test_known_keys_raise_no_warning(project: Path, warnings: pytest.LogCaptureFixture) -> None:
    load_fixture("valid_selector.yaml", project)
    assert warnings.records == []


def test_warning_names_the_entry_index(project: Path, warnings: pytest.LogCaptureFixture) -> None:
    text = HEAD + "- version: v2\n  group: g.io\n  kind: Other\n  role: basket\n  foo: 1\n"
    load_text(text, project)
    assert "watches.yaml: entry 1 (g.io/v2, Kind=Other): unknown key 'foo' is ignored" in (
        warnings.text
    )


def test_environment_is_not_modified(project: Path) -> None:
    environ = {"ANSIBLE_ROLES_PATH": str(project / "roles")}
    before = dict(environ)
    load_text(HEAD, project, environ=environ)
    assert environ == before


def test_error_in_nested_key_names_the_path(project: Path) -> None:
    with pytest.raises(WatchesError) as caught:
        load_text(HEAD + "  finalizer: {name: [a]}\n", project)
    assert caught.value.key == "finalizer.name"
    assert caught.value.reference is not None
    assert "Go struct field Finalizer.Finalizer.Name of type string" in caught.value.reference
