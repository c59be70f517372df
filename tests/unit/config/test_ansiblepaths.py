"""Where roles and playbooks are found: the Go operator's search order, step by step."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.config.ansiblepaths import find_target, role_candidates
from tests.unit.config import load_text, make_project


def _role(root: Path, relative: str) -> Path:
    path = root / relative
    path.mkdir(parents=True)
    return path


def test_plain_name_is_looked_for_in_cwd_roles(tmp_path: Path) -> None:
    assert role_candidates("basket", cwd=tmp_path, environ={}) == [tmp_path / "roles/basket"]


def test_absolute_role_is_the_only_candidate(tmp_path: Path) -> None:
    environ = {"ANSIBLE_ROLES_PATH": "/elsewhere"}
    assert role_candidates("/opt/r", cwd=tmp_path, environ=environ) == [Path("/opt/r")]


def test_roles_path_entries_come_before_cwd_with_and_without_roles_level(tmp_path: Path) -> None:
    environ = {"ANSIBLE_ROLES_PATH": "/a:rel"}
    assert role_candidates("basket", cwd=tmp_path, environ=environ) == [
        Path("/a/basket"),
        Path("/a/roles/basket"),
        tmp_path / "rel/basket",  # relative entries are taken from the working directory
        tmp_path / "rel/roles/basket",
        tmp_path / "roles/basket",
    ]


def test_empty_roles_path_is_ignored(tmp_path: Path) -> None:
    candidates = role_candidates("basket", cwd=tmp_path, environ={"ANSIBLE_ROLES_PATH": ""})
    assert candidates == [tmp_path / "roles/basket"]


def test_fqcn_uses_collections_path_then_roles_path_then_cwd(tmp_path: Path) -> None:
    environ = {"ANSIBLE_COLLECTIONS_PATH": "/c1:/c2/", "ANSIBLE_ROLES_PATH": "/r", "HOME": "/h"}
    assert role_candidates("ns.coll.role", cwd=tmp_path, environ=environ) == [
        Path("/c1/ansible_collections/ns/coll/roles/role"),
        Path("/c2/ansible_collections/ns/coll/roles/role"),
        Path("/r/ns.coll.role"),
        Path("/r/roles/ns.coll.role"),
        tmp_path / "roles/ns.coll.role",
    ]


def test_fqcn_without_collections_path_uses_system_then_home(tmp_path: Path) -> None:
    environ = {"HOME": "/home/op"}
    assert role_candidates("ns.coll.role", cwd=tmp_path, environ=environ) == [
        Path("/usr/share/ansible/collections/ansible_collections/ns/coll/roles/role"),
        Path("/home/op/.ansible/collections/ansible_collections/ns/coll/roles/role"),
        tmp_path / "roles/ns.coll.role",
    ]


def test_fqcn_without_home_skips_home(tmp_path: Path) -> None:
    candidates = role_candidates("ns.coll.role", cwd=tmp_path, environ={"HOME": ""})
    assert candidates[0].parts[:4] == ("/", "usr", "share", "ansible")
    assert len(candidates) == 2


@pytest.mark.parametrize("name", ["a.b", "a.b.c.d"])
def test_only_three_part_names_are_collection_roles(tmp_path: Path, name: str) -> None:
    environ = {"ANSIBLE_COLLECTIONS_PATH": "/c"}
    assert role_candidates(name, cwd=tmp_path, environ=environ) == [tmp_path / "roles" / name]


def test_first_existing_candidate_wins(tmp_path: Path) -> None:
    later = _role(tmp_path, "roles/basket")
    earlier = _role(tmp_path, "shared/roles/basket")
    environ = {"ANSIBLE_ROLES_PATH": str(tmp_path / "shared")}
    target = find_target(
        {"role": "basket"}, prefix="", label="entry", cwd=tmp_path, environ=environ
    )
    assert target is not None
    assert target.found == earlier
    assert later in target.searched


def test_collection_role_beats_same_named_local_role(tmp_path: Path) -> None:
    _role(tmp_path, "roles/ns.coll.role")
    collection = _role(tmp_path, "cols/ansible_collections/ns/coll/roles/role")
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "cols")}
    target = find_target(
        {"role": "ns.coll.role"}, prefix="", label="entry", cwd=tmp_path, environ=environ
    )
    assert target is not None
    assert target.found == collection


def test_written_value_is_the_last_resort_relative_to_cwd(tmp_path: Path) -> None:
    # No candidate exists, but the value itself names a directory from the
    # working directory: the Go operator accepts it, and so do we.
    found = _role(tmp_path, "ansible/roles/basket")
    target = find_target(
        {"role": "ansible/roles/basket"}, prefix="", label="entry", cwd=tmp_path, environ={}
    )
    assert target is not None
    assert target.found == found
    assert target.searched[-1] == found


def test_playbook_wins_over_role_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    project = make_project(tmp_path)
    text = (
        "- version: v1\n  group: g.io\n  kind: K\n"
        "  playbook: playbooks/order.yml\n  role: does-not-exist\n"
    )
    (watch,) = load_text(text, project)
    assert watch.playbook == project / "playbooks/order.yml"
    assert watch.role is None
    assert "both playbook and role are set; the playbook is used" in caplog.text


def test_playbook_paths_are_cleaned_and_absolute_kept(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    text = "- version: v1\n  group: g.io\n  kind: K\n  playbook: x/../playbooks//order.yml\n"
    (watch,) = load_text(text, project)
    assert watch.playbook == project / "playbooks/order.yml"
    absolute = project / "playbooks/cleanup.yml"
    (watch,) = load_text(text.replace("x/../playbooks//order.yml", str(absolute)), project)
    assert watch.playbook == absolute


def test_directory_is_accepted_as_playbook_like_go(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (watch,) = load_text("- version: v1\n  kind: K\n  playbook: playbooks\n", project)
    assert watch.playbook == project / "playbooks"


def test_environment_roles_path_from_argument_not_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _role(tmp_path, "shared/basket")
    monkeypatch.setenv("ANSIBLE_ROLES_PATH", "/process/env/must/not/be/read")
    (watch,) = load_text(
        "- version: v1\n  kind: K\n  role: basket\n",
        tmp_path,
        environ={"ANSIBLE_ROLES_PATH": str(tmp_path / "shared")},
    )
    assert watch.role == shared
