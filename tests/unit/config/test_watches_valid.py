"""Valid watches.yaml files load to the Watch values the Go operator builds (ours where noted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ansible_operator.config import defaults
from ansible_operator.config.selectors import LabelSelector, Requirement
from ansible_operator.config.watches import GVK, Finalizer, Watch, summarize
from tests.unit.config import load_fixture, make_project

SHOP = "shop.example.org"

# Each case: fixture, environment, flag defaults, then per watch the attributes
# to check. A string starting with "@/" is a path inside the project.
CASES: list[tuple[str, dict[str, str], dict[str, int], list[dict[str, Any]]]] = [
    (
        "valid_defaults.yaml",
        {},
        {},
        [
            {
                "gvk": GVK(SHOP, "v1beta2", "Basket"),
                "role": "@/roles/basket",
                "playbook": None,
                "reconcile_period": 45.0,
                "max_runner_artifacts": 20,
                "manage_status": True,
                "watch_dependent_resources": True,
                "watch_cluster_scoped_resources": False,
                "snake_case_parameters": True,
                "watch_annotations_changes": False,
                "mark_unsafe": True,  # ours: secure by default
                "vars": {},
                "selector": None,
                "blacklist": (),
                "finalizer": None,
                "max_concurrent_reconciles": 4,
                "ansible_verbosity": 2,
            }
        ],
    ),
    (
        "valid_mark_unsafe.yaml",
        {},
        {},
        [{"mark_unsafe": True}, {"mark_unsafe": False}, {"mark_unsafe": True}],
    ),
    (
        "valid_playbook_finalizer_role.yaml",
        {},
        {},
        [
            {
                "playbook": "@/playbooks/order.yml",
                "role": None,
                "finalizer": Finalizer(
                    name=f"{SHOP}/finalizer",
                    role="@/roles/cleanup",
                    vars={"sentinel": "gone"},
                ),
            }
        ],
    ),
    (
        "valid_role_finalizer_playbook.yaml",
        {},
        {},
        [
            {
                "role": "@/roles/basket",
                "finalizer": Finalizer(
                    name=f"{SHOP}/finalizer",
                    playbook="@/playbooks/cleanup.yml",
                ),
            }
        ],
    ),
    (
        "valid_finalizer_vars_only.yaml",
        {},
        {},
        [{"finalizer": Finalizer(name=f"{SHOP}/finalizer", vars={"state": "absent"})}],
    ),
    (
        "valid_cluster_scoped.yaml",
        {},
        {},
        [
            {
                "watch_cluster_scoped_resources": True,
                "watch_dependent_resources": False,
                "snake_case_parameters": False,
                "watch_annotations_changes": True,
            }
        ],
    ),
    ("valid_zero_period.yaml", {}, {}, [{"reconcile_period": 0.0}]),
    (
        "valid_manage_status.yaml",
        {},
        {},
        [{"manage_status": True}, {"manage_status": False}, {"manage_status": True}],
    ),
    (
        "valid_concurrency.yaml",
        {},
        {"max_concurrent_reconciles": 1, "ansible_verbosity": 5},
        [{"max_concurrent_reconciles": 1, "ansible_verbosity": 5}],
    ),
    (
        "valid_concurrency.yaml",
        {"WORKER_BASKET_SHOP_EXAMPLE_ORG": "4", "ANSIBLE_VERBOSITY_BASKET_SHOP_EXAMPLE_ORG": "4"},
        {"max_concurrent_reconciles": 1},
        [{"max_concurrent_reconciles": 4, "ansible_verbosity": 4}],
    ),
    (
        "valid_ignored_keys.yaml",
        {},
        {"max_concurrent_reconciles": 3, "ansible_verbosity": 1},
        [{"max_concurrent_reconciles": 3, "ansible_verbosity": 1}],
    ),
    (
        "valid_vars.yaml",
        {},
        {},
        [
            {
                "vars": {
                    "greeting": "hello",
                    "replicas": 3,
                    "ratio": 1,
                    "half": 2.5,
                    "enabled": True,
                    "quoted": "yes",
                    "nothing": None,
                    "since": "2024-02-29",
                    "nested": {"true": False, "list": [1, "two", 3.5]},
                    "templated": "{{ ansible_operator_meta.name }}",
                }
            }
        ],
    ),
    (
        "valid_collection_role.yaml",
        {"ANSIBLE_COLLECTIONS_PATH": "collections"},
        {},
        [{"role": "@/collections/ansible_collections/shop/tools/roles/packer"}],
    ),
    (
        "valid_blacklist.yaml",
        {},
        {},
        [
            {
                "blacklist": (
                    GVK("", "v1", "Secret"),
                    GVK("apps", "v1", "Deployment"),
                    GVK(f"{SHOP}/2", "v9", "Odd"),
                )
            }
        ],
    ),
    (
        "valid_selector.yaml",
        {},
        {},
        [
            {
                "selector": LabelSelector(
                    {"tier": "frontend", "generation": "2"},
                    (
                        Requirement(f"{SHOP}/zone", "In", ("eu", "us")),
                        Requirement("legacy", "DoesNotExist"),
                    ),
                )
            }
        ],
    ),
    (
        "valid_same_kind_version.yaml",
        {},
        {},
        [{"gvk": GVK(SHOP, "v1", "Item")}, {"gvk": GVK("stock.example.org", "v1", "Item")}],
    ),
    (
        "valid_env_vars.yaml",
        {
            "SHOP_VERSION": "v123",
            "SHOP_PLAYBOOK": "playbooks/order.yml",
            "SHOP_LABEL_KEY": "shop.example.org/team",
        },
        {},
        [
            {
                "gvk": GVK(SHOP, "v123", "Basket"),
                "playbook": "@/playbooks/order.yml",
                "selector": LabelSelector({"shop.example.org/team": "yes"}),
                "vars": {"kept": "${SHOP_NOT_DEFINED}", "password": "pa${$}word"},
            }
        ],
    ),
    ("valid_empty.yaml", {}, {}, []),
    (
        "valid_case_insensitive.yaml",
        {},
        {},
        [
            {
                "gvk": GVK(SHOP, "v1", "Basket"),
                "role": "@/roles/basket",
                "manage_status": False,
                "reconcile_period": 60.0,
                "finalizer": Finalizer(name=f"{SHOP}/finalizer", vars={"a": 1}),
                "selector": LabelSelector({"tier": "web"}),
                "blacklist": (GVK("apps", "v1", "Deployment"),),
            }
        ],
    ),
]


def _project_paths(value: Any, project: Path) -> Any:
    if isinstance(value, str) and value.startswith("@/"):
        return project / value[2:]
    if isinstance(value, Finalizer):
        return Finalizer(
            name=value.name,
            playbook=_project_paths(value.playbook, project),
            role=_project_paths(value.role, project),
            vars=value.vars,
        )
    return value


@pytest.mark.parametrize(
    ("fixture", "environ", "flags", "expected"),
    CASES,
    ids=[f"{case[0]}-{index}" for index, case in enumerate(CASES)],
)
def test_valid_file_loads(
    tmp_path: Path,
    fixture: str,
    environ: dict[str, str],
    flags: dict[str, int],
    expected: list[dict[str, Any]],
) -> None:
    project = make_project(tmp_path)
    watches = load_fixture(fixture, project, environ=environ, **flags)
    assert len(watches) == len(expected)
    for watch, attributes in zip(watches, expected, strict=True):
        for name, value in attributes.items():
            assert getattr(watch, name) == _project_paths(value, project), name


def test_paths_are_absolute_and_exist(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (watch,) = load_fixture("valid_playbook_finalizer_role.yaml", project)
    assert watch.playbook is not None
    assert watch.playbook.is_absolute()
    assert watch.finalizer is not None
    assert watch.finalizer.role == project / "roles" / "cleanup"


def test_watch_dataclass_defaults_come_from_defaults_module() -> None:
    watch = Watch(gvk=GVK("g", "v1", "K"))
    assert watch.max_runner_artifacts == defaults.MAX_RUNNER_ARTIFACTS == 20
    assert watch.mark_unsafe is defaults.MARK_UNSAFE is True
    assert watch.reconcile_period == 0.0
    assert (watch.group, watch.version, watch.kind) == ("g", "v1", "K")


def test_gvk_renders_like_go() -> None:
    assert str(GVK("cache.example.com", "v1alpha1", "Memcached")) == (
        "cache.example.com/v1alpha1, Kind=Memcached"
    )
    assert str(GVK("", "v1", "Secret")) == "/v1, Kind=Secret"


def test_summary_is_one_line_naming_the_settings(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (watch,) = load_fixture("valid_selector.yaml", project)
    line = summarize(watch)
    assert "\n" not in line
    assert line.startswith(f"shop.example.org/v1, Kind=Basket: role {project}/roles/basket, ")
    assert "reconcilePeriod=flag" in line
    assert "markUnsafe=true" in line
    assert "selector='generation=2,!legacy,shop.example.org/zone in (eu,us),tier=frontend'" in line


def test_summary_shows_period_and_finalizer(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (watch,) = load_fixture("valid_defaults.yaml", project)
    assert "reconcilePeriod=45s" in summarize(watch)
    (watch,) = load_fixture("valid_finalizer_vars_only.yaml", project)
    assert "finalizer=shop.example.org/finalizer (own playbook/role)" in summarize(watch)
