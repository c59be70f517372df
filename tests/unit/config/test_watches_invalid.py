"""Every invalid watches.yaml situation is refused, naming file, entry, key and problem.

The Go operator's own wording is part of each message: §1.5 failures use it
as the problem text itself, decoding failures (§1.3) append it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.config.watches import WatchesError, load_watches
from ansible_operator.errors import ConfigError
from tests.unit.config import load_fixture, make_project

BASKET = "shop.example.org/v1, Kind=Basket"
JSON = "error unmarshaling JSON: while decoding JSON: json: "

# fixture, entry, entry's GVK, key, problem ("@" = the project directory), Go's wording
CASES: list[tuple[str, int | None, str | None, str | None, str, str | None]] = [
    # §1.5: validation
    (
        "invalid_missing_version.yaml",
        0,
        "shop.example.org/, Kind=Basket",
        "version",
        "invalid GVK: shop.example.org/, Kind=Basket: version must not be empty",
        None,
    ),
    (
        "invalid_missing_kind.yaml",
        0,
        "shop.example.org/v1, Kind=",
        "kind",
        "invalid GVK: shop.example.org/v1, Kind=: kind must not be empty",
        None,
    ),
    (
        "invalid_duplicate_gvk.yaml",
        1,
        BASKET,
        None,
        f"duplicate GVK: {BASKET} (entry 0 watches it already)",
        None,
    ),
    (
        "invalid_playbook_missing.yaml",
        0,
        "shop.example.org/v1, Kind=Order",
        "playbook",
        "@/playbooks/missing.yml was not found",
        None,
    ),
    (
        "invalid_role_missing.yaml",
        0,
        BASKET,
        "role",
        "nowhere was not found (looked in @/roles/nowhere, @/nowhere)",
        None,
    ),
    (
        "invalid_collection_missing.yaml",
        0,
        "shop.example.org/v1, Kind=Parcel",
        "role",
        "shop.tools.absent was not found (looked in "
        "/usr/share/ansible/collections/ansible_collections/shop/tools/roles/absent, "
        "@/roles/shop.tools.absent, @/shop.tools.absent)",
        None,
    ),
    (
        "invalid_no_role_or_playbook.yaml",
        0,
        BASKET,
        "role",
        "must specify Role or Playbook: the entry has neither a role nor a playbook key",
        None,
    ),
    (
        "invalid_finalizer_without_name.yaml",
        0,
        BASKET,
        "finalizer.name",
        "finalizer must have name",
        None,
    ),
    (
        "invalid_finalizer_empty.yaml",
        0,
        BASKET,
        "finalizer",
        "must specify Role or Playbook: a finalizer needs a role, a playbook or vars",
        None,
    ),
    (
        "invalid_finalizer_role_missing.yaml",
        0,
        BASKET,
        "finalizer.role",
        "vanished was not found (looked in @/roles/vanished, @/vanished)",
        None,
    ),
    # Accepted by the Go operator (vars present); refused here.
    (
        "invalid_finalizer_playbook_missing_with_vars.yaml",
        0,
        BASKET,
        "finalizer.playbook",
        "@/playbooks/vanished.yml was not found",
        None,
    ),
    # Accepted by the Go operator's load, fatal at its start-up; refused here.
    (
        "invalid_selector_operator.yaml",
        0,
        BASKET,
        "selector.matchExpressions[0].operator",
        '"Equals" is not a valid label selector operator (use one of In, NotIn, Exists, '
        "DoesNotExist)",
        None,
    ),
    (
        "invalid_selector_values.yaml",
        0,
        BASKET,
        "selector.matchExpressions[0].values",
        "operator NotIn needs at least one value",
        None,
    ),
    (
        "invalid_selector_label.yaml",
        0,
        BASKET,
        "selector.matchLabels.tier",
        "label value 'front end' must be empty or at most 63 characters of letters, digits, "
        "'-', '_' or '.', starting and ending with a letter or digit",
        None,
    ),
    # §1.3: decoding
    (
        "invalid_quoted_bool.yaml",
        0,
        BASKET,
        "manageStatus",
        "expected true or false, got the string 'true' (quoted, so YAML reads a string: "
        "write the boolean without quotes)",
        f"{JSON}cannot unmarshal string into Go struct field alias.ManageStatus of type bool",
    ),
    (
        "invalid_period_number.yaml",
        0,
        BASKET,
        "reconcilePeriod",
        'expected a duration string such as "30s" or "1h30m", got the number 30',
        f"{JSON}cannot unmarshal number into Go value of type string",
    ),
    (
        "invalid_period_text.yaml",
        0,
        BASKET,
        "reconcilePeriod",
        'time: invalid duration "soon": write a number with a unit (ns, us, ms, s, m, h), '
        "e.g. 30s or 1h30m",
        'error unmarshaling JSON: while decoding JSON: time: invalid duration "soon"',
    ),
    (
        "invalid_artifacts_fraction.yaml",
        0,
        BASKET,
        "maxRunnerArtifacts",
        "expected an integer, got the number 2.5",
        f"{JSON}cannot unmarshal number 2.5 into Go struct field alias.MaxRunnerArtifacts "
        "of type int",
    ),
    (
        "invalid_vars_list.yaml",
        0,
        BASKET,
        "vars",
        "expected a mapping, got a list",
        f"{JSON}cannot unmarshal array into Go struct field alias.Vars of type "
        "map[string]interface {}",
    ),
    (
        "invalid_vars_nan.yaml",
        0,
        BASKET,
        "vars.ratio",
        ".nan cannot be represented in JSON",
        "error converting YAML to JSON: json: unsupported value: NaN",
    ),
    (
        "invalid_entry_scalar.yaml",
        0,
        None,
        None,
        "expected a mapping, got the string 'basket'",
        f"{JSON}cannot unmarshal string into Go value of type watches.alias",
    ),
    (
        "invalid_top_mapping.yaml",
        None,
        None,
        None,
        "the top level must be a list of watches, got a mapping",
        f"{JSON}cannot unmarshal object into Go value of type []watches.alias",
    ),
    (
        "invalid_top_scalar.yaml",
        None,
        None,
        None,
        "the top level must be a list of watches, got the string 'just some words'",
        f"{JSON}cannot unmarshal string into Go value of type []watches.alias",
    ),
    (
        "invalid_yaml_syntax.yaml",
        None,
        None,
        None,
        "invalid YAML: line 3: mapping values are not allowed in this context",
        "error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this "
        "context",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "entry", "gvk", "key", "problem", "reference"),
    CASES,
    ids=[case[0].removesuffix(".yaml") for case in CASES],
)
def test_invalid_file_is_refused(
    tmp_path: Path,
    fixture: str,
    entry: int | None,
    gvk: str | None,
    key: str | None,
    problem: str,
    reference: str | None,
) -> None:
    project = make_project(tmp_path)
    with pytest.raises(WatchesError) as caught:
        load_fixture(fixture, project)
    error = caught.value
    expected_problem = problem.replace("@", str(project))
    assert error.file == "watches.yaml"
    assert error.entry == entry
    assert (None if error.gvk is None else str(error.gvk)) == gvk
    assert error.key == key
    assert error.problem == expected_problem
    assert error.reference == reference
    label = "watches.yaml" if entry is None else f"watches.yaml: entry {entry}"
    if gvk is not None:
        label += f" ({gvk})"
    message = str(error)
    assert message.startswith(f"{label}: {key}: " if key else f"{label}: ")
    assert expected_problem in message
    if reference is not None:
        assert message.endswith(f" [Go ansible-operator: {reference}]")


def test_go_wording_of_path_failures_is_in_the_message(tmp_path: Path) -> None:
    # The Go operator says "role: <role> was not found"; ours adds where we looked.
    project = make_project(tmp_path)
    with pytest.raises(WatchesError, match=r": role: nowhere was not found \(looked in "):
        load_fixture("invalid_role_missing.yaml", project)
    with pytest.raises(WatchesError, match=r": finalizer\.role: vanished was not found"):
        load_fixture("invalid_finalizer_role_missing.yaml", project)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^nowhere\.yaml: cannot be read: No such file"):
        load_watches(
            "nowhere.yaml",
            cwd=tmp_path,
            environ={},
            max_concurrent_reconciles_default=1,
            ansible_verbosity_default=2,
        )


def test_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "watches.yaml").write_bytes(b"- version: v1\xff\n")
    with pytest.raises(WatchesError, match=r"^watches\.yaml: is not UTF-8 text \(byte 13\)$"):
        load_watches(
            "watches.yaml",
            cwd=tmp_path,
            environ={},
            max_concurrent_reconciles_default=1,
            ansible_verbosity_default=2,
        )


def test_first_error_in_file_order_wins(tmp_path: Path) -> None:
    # Decoding covers the whole file before any entry is checked, as in Go:
    # a type error in entry 1 is reported before a missing version in entry 0.
    project = make_project(tmp_path)
    (project / "watches.yaml").write_text(
        "- kind: A\n  role: basket\n- version: v1\n  kind: B\n  role: basket\n"
        "  manageStatus: 'no'\n"
    )
    with pytest.raises(WatchesError) as caught:
        load_watches(
            "watches.yaml",
            cwd=project,
            environ={},
            max_concurrent_reconciles_default=1,
            ansible_verbosity_default=2,
        )
    assert (caught.value.entry, caught.value.key) == (1, "manageStatus")
