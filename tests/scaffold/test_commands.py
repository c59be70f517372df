"""`init` and `create api` on disk: what they write, what they refuse, what they keep.

No cluster: these run the real command line in-process in a temporary
directory. The end-to-end behaviour on a cluster is test_project_e2e.py's.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_operator.config import defaults
from ansible_operator.config.watches import load_watches
from ansible_operator.scaffold import writer
from tests.scaffold.conftest import BACKUP, INIT, MEMCACHED, Cli, files, kubectl_binary, snapshot


def only_insertions(before: str, after: str) -> bool:
    """True when `after` is `before` with lines added and none changed or removed."""
    ops = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines()).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in ops)


def test_init_writes_a_project_and_says_what_it_wrote(project: Path) -> None:
    written = files(project)
    assert {
        "PROJECT",
        "Makefile",
        "Dockerfile",
        "watches.yaml",
        "molecule/default/molecule.yml",
    } <= written
    assert (project / "Dockerfile").read_text().startswith(f"FROM {defaults.BASE_IMAGE}\n")
    project_file = yaml.safe_load((project / "PROJECT").read_text())
    assert project_file == {
        "domain": "example.com",
        "layout": ["ansible.sdk.operatorframework.io/v1"],
        "projectName": "memcached-operator",
        "version": "3",
    }


def test_init_reports_every_file(tmp_path: Path, run_cli: Cli) -> None:
    result = run_cli(tmp_path, *INIT)
    reported = {
        line.split(" ", 1)[1] for line in result.out.splitlines() if line.startswith("created ")
    }
    assert reported == files(tmp_path)
    assert "Next: define a resource with:" in result.out


def test_init_refuses_an_existing_project(project: Path, run_cli: Cli) -> None:
    before = snapshot(project)
    result = run_cli(project, *INIT)
    assert result.code == 1
    assert result.err.startswith("ansible-operator init: PROJECT: already exists")
    assert snapshot(project) == before


def test_init_never_overwrites_a_file(tmp_path: Path, run_cli: Cli) -> None:
    (tmp_path / "Makefile").write_text("mine\n")
    result = run_cli(tmp_path, *INIT)
    assert result.code == 1
    assert (
        result.err == "ansible-operator init: Makefile: already exists; refusing to overwrite it\n"
    )
    assert files(tmp_path) == {"Makefile"}
    assert (tmp_path / "Makefile").read_text() == "mine\n"


def test_init_with_an_api_is_init_then_create_api(tmp_path: Path, run_cli: Cli) -> None:
    chained, separate = tmp_path / "a", tmp_path / "b"
    chained.mkdir()
    separate.mkdir()
    assert run_cli(chained, *INIT, *MEMCACHED[2:], "--generate-role").code == 0
    assert run_cli(separate, *INIT).code == 0
    assert run_cli(separate, *MEMCACHED, "--generate-role").code == 0
    assert snapshot(chained) == snapshot(separate)


def test_create_api_needs_a_project(tmp_path: Path, run_cli: Cli) -> None:
    result = run_cli(tmp_path, *MEMCACHED)
    assert result.code == 1
    assert result.err.startswith("ansible-operator create api: PROJECT: not found in")
    assert list(tmp_path.iterdir()) == []


def test_create_api_adds_the_kind_everywhere(project: Path, run_cli: Cli) -> None:
    result = run_cli(project, *MEMCACHED, "--generate-role")
    assert result.code == 0, result.err
    assert {
        "config/crd/bases/cache.example.com_memcacheds.yaml",
        "config/samples/cache_v1alpha1_memcached.yaml",
        "molecule/default/tasks/memcached_test.yml",
        "roles/memcached/tasks/main.yml",
    } <= files(project)
    for updated in (
        "watches.yaml",
        "PROJECT",
        "config/rbac/role.yaml",
        "config/crd/kustomization.yaml",
        "config/samples/kustomization.yaml",
        "config/rbac/kustomization.yaml",
    ):
        assert f"updated {updated}\n" in result.out
    assert yaml.safe_load((project / "watches.yaml").read_text()) == [
        {
            "version": "v1alpha1",
            "group": "cache.example.com",
            "kind": "Memcached",
            "role": "memcached",
        }
    ]
    rules = yaml.safe_load((project / "config/rbac/role.yaml").read_text())["rules"]
    mine = [r for r in rules if r["apiGroups"] == ["cache.example.com"]]
    assert [r["resources"] for r in mine] == [
        ["memcacheds"],
        ["memcacheds/status"],
        ["memcacheds/finalizers"],
    ]
    assert yaml.safe_load((project / "config/crd/kustomization.yaml").read_text())["resources"] == [
        "bases/cache.example.com_memcacheds.yaml"
    ]
    crd = yaml.safe_load(
        (project / "config/crd/bases/cache.example.com_memcacheds.yaml").read_text()
    )
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "conditions"
    ]
    assert set(conditions["items"]["properties"]) >= {
        "type",
        "status",
        "reason",
        "message",
        "ansibleResult",
    }


def test_the_generated_watches_file_loads(
    project: Path, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    assert run_cli(project, *BACKUP, "--generate-playbook").code == 0
    monkeypatch.chdir(project)
    watches = load_watches(
        "watches.yaml", max_concurrent_reconciles_default=1, ansible_verbosity_default=2
    )
    assert [w.gvk.kind for w in watches] == ["Memcached", "Backup"]


@pytest.mark.parametrize(
    ("flags", "key", "value"),
    [
        (("--generate-role",), "role", "memcached"),
        (("--generate-playbook",), "playbook", "playbooks/memcached.yml"),
        (("--generate-role", "--generate-playbook"), "playbook", "playbooks/memcached.yml"),
    ],
)
def test_role_and_playbook_flags(
    project: Path, run_cli: Cli, flags: tuple[str, ...], key: str, value: str
) -> None:
    assert run_cli(project, *MEMCACHED, *flags).code == 0
    assert yaml.safe_load((project / "watches.yaml").read_text())[0][key] == value
    assert (project / "roles/memcached").exists() == ("--generate-role" in flags)
    if "--generate-playbook" in flags:
        play = yaml.safe_load((project / "playbooks/memcached.yml").read_text())[0]
        if "--generate-role" in flags:
            assert play["tasks"] == [{"import_role": {"name": "memcached"}}]
        else:
            assert play["tasks"] == []


def test_without_role_or_playbook_the_watch_says_fixme(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED).code == 0
    assert (
        "  # FIXME: Specify the role or playbook for this resource.\n"
        in (project / "watches.yaml").read_text()
    )
    assert not (project / "roles/memcached").exists()
    assert not (project / "playbooks/memcached.yml").exists()


def test_a_duplicate_kind_is_refused(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    before = snapshot(project)
    result = run_cli(project, *MEMCACHED, "--generate-playbook")
    assert result.code == 1
    assert result.err == (
        "ansible-operator create api: --kind: the API resource already exists: "
        "cache.example.com/v1alpha1, Kind=Memcached (PROJECT)\n"
    )
    assert snapshot(project) == before


def test_another_version_of_a_kind_is_refused(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    before = snapshot(project)
    result = run_cli(
        project, "create", "api", "--group", "cache", "--version", "v1", "--kind", "Memcached"
    )
    assert result.code == 1
    assert result.err.startswith("ansible-operator create api: --version: Memcached already exists")
    assert snapshot(project) == before


def test_a_kind_watched_by_hand_is_refused(project: Path, run_cli: Cli) -> None:
    watches = project / "watches.yaml"
    watches.write_text(
        watches.read_text()
        + "- {version: v1alpha1, group: cache.example.com, kind: Memcached, role: mine}\n"
    )
    before = snapshot(project)
    result = run_cli(project, *MEMCACHED, "--generate-role")
    assert result.code == 1
    assert result.err == (
        "ansible-operator create api: --kind: watches.yaml already has a watch for "
        "cache.example.com/v1alpha1, Kind=Memcached\n"
    )
    assert snapshot(project) == before


def test_a_second_group_needs_multigroup(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    other = (
        "create",
        "api",
        "--group",
        "web",
        "--version",
        "v1",
        "--kind",
        "Site",
        "--generate-role",
    )
    before = snapshot(project)
    result = run_cli(project, *other)
    assert result.code == 1
    assert "--group: 'web': multiple groups are not allowed by default" in result.err
    assert snapshot(project) == before
    (project / "PROJECT").write_text((project / "PROJECT").read_text() + "multigroup: true\n")
    assert run_cli(project, *other).code == 0
    assert (project / "config/crd/bases/web.example.com_sites.yaml").exists()


def test_a_missing_marker_is_refused(project: Path, run_cli: Cli) -> None:
    role = project / "config/rbac/role.yaml"
    role.write_text(role.read_text().replace("  #+kubebuilder:scaffold:rules\n", ""))
    before = snapshot(project)
    result = run_cli(project, *MEMCACHED, "--generate-role")
    assert result.code == 1
    assert result.err.startswith(
        "ansible-operator create api: config/rbac/role.yaml: the marker line '#+kubebuilder:scaffold:rules' is missing"
    )
    assert snapshot(project) == before


def test_create_api_twice_keeps_the_users_edits(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    edits = {
        "watches.yaml": (
            "  role: memcached\n",
            "  role: memcached\n  reconcilePeriod: 1m  # mine\n",
        ),
        "config/rbac/role.yaml": (
            "  #+kubebuilder:scaffold:rules\n",
            "  # mine: my role writes Deployments\n  - apiGroups: [apps]\n    resources: [deployments]\n"
            "    verbs: [get, list, watch, create, patch]\n  #+kubebuilder:scaffold:rules\n",
        ),
        "config/crd/kustomization.yaml": ("resources:\n", "resources:  # mine\n"),
        "roles/memcached/tasks/main.yml": (
            "# tasks file for Memcached\n",
            "- name: mine\n  ansible.builtin.debug:\n",
        ),
        "PROJECT": ("projectName:", "# mine\nprojectName:"),
    }
    for path, (old, new) in edits.items():
        target = project / path
        assert old in target.read_text(), path
        target.write_text(target.read_text().replace(old, new, 1))
    before = snapshot(project)
    result = run_cli(project, *BACKUP, "--generate-playbook")
    assert result.code == 0, result.err
    after = snapshot(project)
    for path, content in before.items():
        if path == "PROJECT":  # rewritten as a whole, as the SDK does
            continue
        assert only_insertions(content.decode(), after[path].decode()), path
    for path in ("watches.yaml", "config/rbac/role.yaml", "config/crd/kustomization.yaml"):
        assert after[path] != before[path], path
    assert after["roles/memcached/tasks/main.yml"] == before["roles/memcached/tasks/main.yml"]
    kinds = [w["kind"] for w in yaml.safe_load(after["watches.yaml"])]
    assert kinds == ["Memcached", "Backup"]
    assert [r["kind"] for r in yaml.safe_load(after["PROJECT"])["resources"]] == [
        "Memcached",
        "Backup",
    ]


def test_a_failed_write_is_rolled_back(
    project: Path, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(project)
    real = writer._write_atomically
    calls = []

    def failing(target: Path, content: str) -> None:
        calls.append(target)
        if len(calls) == 8:
            raise OSError(28, "No space left on device", str(target))
        real(target, content)

    monkeypatch.setattr(writer, "_write_atomically", failing)
    result = run_cli(project, *MEMCACHED, "--generate-role")
    assert result.code == 1
    assert "cannot write: No space left on device" in result.err
    assert len(calls) > 8  # the files written before the failure were restored
    assert snapshot(project) == before


def test_every_generated_yaml_file_parses(project: Path, run_cli: Cli) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    assert run_cli(project, *BACKUP, "--generate-playbook").code == 0
    for path in sorted(files(project)):
        if path.endswith((".yaml", ".yml")) or path == "PROJECT":
            list(yaml.safe_load_all((project / path).read_text()))
        assert "@@" not in (project / path).read_text(), path


@pytest.mark.parametrize(
    "overlay", ["config/default", "config/testing", "config/crd", "config/samples"]
)
def test_kustomize_builds(project: Path, run_cli: Cli, overlay: str) -> None:
    assert run_cli(project, *MEMCACHED, "--generate-role").code == 0
    assert run_cli(project, *BACKUP, "--generate-playbook").code == 0
    done = subprocess.run(
        [kubectl_binary(), "kustomize", overlay],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all(done.stdout) if o]
    kinds = {o["kind"] for o in objects}
    if overlay == "config/default":
        assert kinds >= {
            "CustomResourceDefinition",
            "Deployment",
            "ClusterRole",
            "Namespace",
            "Service",
        }
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        assert deployment["metadata"]["namespace"] == "memcached-operator-system"
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["args"][0] == "--metrics-bind-address=:8443"
        assert "--leader-election-id=memcached-operator" in container["args"]
    if overlay == "config/testing":
        container = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"][
            "spec"
        ]["containers"][0]
        assert (container["image"], container["imagePullPolicy"]) == ("testing-operator", "Never")
    if overlay == "config/samples":
        assert {o["kind"] for o in objects} == {"Memcached", "Backup"}


def test_every_generated_playbook_passes_ansibles_syntax_check(
    tmp_path: Path, run_cli: Cli
) -> None:
    assert (
        run_cli(tmp_path, *INIT, *MEMCACHED[2:], "--generate-role", "--generate-playbook").code == 0
    )
    playbooks = sorted(
        str(p.relative_to(tmp_path))
        for p in [*tmp_path.glob("molecule/*/*.yml"), *tmp_path.glob("playbooks/*.yml")]
        if p.name != "molecule.yml" and p.name != "vars.yml"
    )
    assert "molecule/kind/converge.yml" in playbooks
    assert "playbooks/memcached.yml" in playbooks
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", *playbooks],
        cwd=tmp_path,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(tmp_path / "roles")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
