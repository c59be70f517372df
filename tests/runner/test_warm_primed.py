"""Primed children (ansible_operator.warm.primed): runs forked from a process that had
already imported Ansible's controller for their configuration see what a cold run sees.

Real runs through ansible-runner, the shim and the real servers, as in the operator.
The evidence is the controller's own view (tests/runner/playbooks/lookup_plugins/
controller_settings.py): every setting of `ansible.constants`, the config file Ansible
chose, and which process forked the run's keeper.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import RunOutcome, RunResult
from ansible_operator.warm.pbserver import PRIMED_ENV
from ansible_operator.warm.protocol import KEEPER_COMM, PRIMED_COMM
from ansible_operator.warm.supervisor import WarmServers
from testbed.probes import wait_until
from tests.runner.test_ansible_runs import (  # fixtures: see __all__
    PLAYBOOKS,
    _neutral_environment,
    data_dir,
    make_request,
    root,
)
from tests.runner.test_warm_runs import (  # warm_servers: the same module-wide servers
    children_of,
    process_name,
    warm_servers,
)

__all__ = ["_neutral_environment", "root", "warm_servers"]

PER_RUN = {"DEFAULT_LOCAL_TMP", "CACHE_PLUGIN_CONNECTION"}
SETTINGS_PLAYBOOK = PLAYBOOKS / "controller_settings.yml"


@contextlib.contextmanager
def servers_with_primed_children(
    limit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WarmServers]:
    """Warm servers of their own, started with `AO_WARM_PRIMED_CHILDREN=limit`."""
    monkeypatch.setenv(PRIMED_ENV, limit)
    servers = WarmServers(directory=tmp_path / ".warm")
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()
        monkeypatch.delenv(PRIMED_ENV)


def settings_of(runner: AnsibleRunner, out: Path) -> tuple[RunResult, dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    request = make_request(out, playbook=SETTINGS_PLAYBOOK)
    result = runner.run(request)
    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    seen: dict[str, Any] = json.loads((out / "settings.json").read_text())
    return result, seen


def project_dir(root: Path) -> Path:
    # ansible-runner runs a role in the project dir (a playbook in the data dir).
    project = data_dir(root) / "project"
    project.mkdir(parents=True, exist_ok=True)
    return project


Setup = Callable[[pytest.MonkeyPatch, Path, Path], None]


def _env_var(monkeypatch: pytest.MonkeyPatch, _root: Path, _tmp: Path) -> None:
    monkeypatch.setenv("ANSIBLE_TIMEOUT", "37")


def _config_file(monkeypatch: pytest.MonkeyPatch, _root: Path, tmp: Path) -> None:
    config = tmp / "conf" / "ansible.cfg"
    config.parent.mkdir()
    config.write_text("[defaults]\ntimeout = 41\nroles_path = ./cfg-roles\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(config))


def _project_config(_monkeypatch: pytest.MonkeyPatch, root: Path, _tmp: Path) -> None:
    (project_dir(root) / "ansible.cfg").write_text("[defaults]\ntimeout = 43\n")


def _relative_path(monkeypatch: pytest.MonkeyPatch, _root: Path, _tmp: Path) -> None:
    monkeypatch.setenv("ANSIBLE_LIBRARY", "relative-library")  # resolved against the cwd


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        pytest.param(lambda *_: None, {"DEFAULT_TIMEOUT": "10"}, id="defaults"),
        pytest.param(_env_var, {"DEFAULT_TIMEOUT": "37"}, id="an ANSIBLE_ variable"),
        pytest.param(
            _config_file,
            {"DEFAULT_TIMEOUT": "41", "DEFAULT_ROLES_PATH": "/conf/cfg-roles"},
            id="ANSIBLE_CONFIG with a relative path in it",
        ),
        pytest.param(_project_config, {"DEFAULT_TIMEOUT": "43"}, id="a project ansible.cfg"),
        pytest.param(
            _relative_path,
            {"DEFAULT_MODULE_PATH": "/ns1/mc/relative-library"},
            id="a relative path in a variable",
        ),
    ],
)
def test_a_primed_run_sees_every_setting_a_cold_run_sees(
    setup: Setup,
    expected: dict[str, str],
    warm_servers: WarmServers,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup(monkeypatch, root, tmp_path)
    _result, cold = settings_of(AnsibleRunner(root=root), tmp_path / "cold")
    local_parent = Path(cold["settings"]["DEFAULT_LOCAL_TMP"]).parent
    # Another process that once had the primed child's pid may have left its own dir.
    earlier = set(local_parent.glob("ansible-local-*"))
    warm_runner = AnsibleRunner(root=root, warm=warm_servers)
    _result, first = settings_of(warm_runner, tmp_path / "warm")
    # The second run shares the child the first one primed with its own per-run values.
    _result, warm = settings_of(warm_runner, tmp_path / "warm-again")
    assert warm["keeper_parent_pid"] == first["keeper_parent_pid"]

    for name, value in expected.items():  # the case really changed the configuration
        assert value in cold["settings"][name]
    assert warm["keeper_parent_comm"] == PRIMED_COMM
    assert warm["keeper_comm"] == KEEPER_COMM  # so a keeper is never taken for a helper
    assert warm["config_file"] == cold["config_file"]
    differing = {
        name
        for name in cold["settings"].keys() | warm["settings"].keys()
        if cold["settings"].get(name) != warm["settings"].get(name)
    }
    assert differing <= PER_RUN
    # ... and those two are the run's own: its local temp dir, its fact cache.
    local = Path(warm["settings"]["DEFAULT_LOCAL_TMP"])
    assert local.name.startswith(f"ansible-local-{warm['run_child_pid']}")
    assert warm["settings"]["CACHE_PLUGIN_CONNECTION"] == warm["cache_env"] != first["cache_env"]
    assert not local.exists()  # removed when the run ended
    primed_dirs = local.parent.glob(f"ansible-local-{warm['keeper_parent_pid']}*")
    assert not [d for d in primed_dirs if d not in earlier]  # nor did the primed child's stay


def test_runs_share_a_primed_child_only_while_their_configuration_is_the_same(
    warm_servers: WarmServers, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = AnsibleRunner(root=root, warm=warm_servers)
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\ntimeout = 51\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(config))
    _r, first = settings_of(runner, tmp_path / "1")
    _r, second = settings_of(runner, tmp_path / "2")
    assert second["keeper_parent_pid"] == first["keeper_parent_pid"]
    assert first["settings"]["DEFAULT_TIMEOUT"] == second["settings"]["DEFAULT_TIMEOUT"] == "51"

    config.write_text("[defaults]\ntimeout = 520\n")  # the file changed: a new child
    _r, edited = settings_of(runner, tmp_path / "3")
    assert edited["settings"]["DEFAULT_TIMEOUT"] == "520"
    monkeypatch.setenv("ANSIBLE_TIMEOUT", "53")  # a variable changed: a new child
    _r, changed = settings_of(runner, tmp_path / "4")
    assert changed["settings"]["DEFAULT_TIMEOUT"] == "53"
    pids = {run["keeper_parent_pid"] for run in (first, edited, changed)}
    assert len(pids) == 3


def test_a_configuration_ansible_warns_about_is_never_primed(
    warm_servers: WarmServers, root: Path, tmp_path: Path
) -> None:
    # Ansible warns at start-up, then ignores the file: every run must show the warning.
    project = project_dir(root)
    (project / "ansible.cfg").write_text("[defaults]\ntimeout = 44\n")
    project.chmod(0o777)  # the case under test
    try:
        outputs = []
        for name, runner in (
            ("cold", AnsibleRunner(root=root)),
            ("warm", AnsibleRunner(root=root, warm=warm_servers)),
        ):
            result, seen = settings_of(runner, tmp_path / name)
            assert seen["settings"]["DEFAULT_TIMEOUT"] == "10"  # the file was ignored
            assert result.artifacts_dir is not None
            outputs.append((result.artifacts_dir / "stdout").read_text())
            if name == "warm":
                assert seen["keeper_parent_comm"] != PRIMED_COMM
    finally:
        project.chmod(0o755)
    for output in outputs:
        assert "world writable directory" in output


def test_at_most_the_configured_number_of_primed_children_live(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with servers_with_primed_children("1", tmp_path, monkeypatch) as servers:
        runner = AnsibleRunner(root=root, warm=servers)
        seen: list[int] = []
        for timeout in ("61", "62", "61"):
            monkeypatch.setenv("ANSIBLE_TIMEOUT", timeout)
            _r, run = settings_of(runner, tmp_path / f"run-{len(seen)}")
            assert run["settings"]["DEFAULT_TIMEOUT"] == timeout
            assert run["keeper_parent_comm"] == PRIMED_COMM
            helper = servers.pids()["playbook"]

            def only_this_one(run: dict[str, Any] = run, helper: int = helper) -> bool:
                primed = [p for p in children_of(helper) if process_name(p) == PRIMED_COMM]
                return primed == [run["keeper_parent_pid"]]  # an evicted child exits

            wait_until("one primed child", only_this_one, timeout=10)
            seen.append(run["keeper_parent_pid"])
        assert len(set(seen)) == 3  # the first configuration's child was evicted


def test_zero_primed_children_serves_every_run_from_the_helper(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with servers_with_primed_children("0", tmp_path, monkeypatch) as servers:
        _r, run = settings_of(AnsibleRunner(root=root, warm=servers), tmp_path / "run")
        assert run["keeper_parent_pid"] == servers.pids()["playbook"]


@pytest.mark.parametrize("relative", [False, True], ids=["absolute paths", "a relative path"])
def test_resources_share_a_primed_child_unless_their_dir_changes_a_setting(
    relative: bool,
    warm_servers: WarmServers,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if relative:
        monkeypatch.setenv("ANSIBLE_LIBRARY", "relative-library")
    seen = runs_of_two_resources(
        AnsibleRunner(root=root, warm=warm_servers), tmp_path, playbook=SETTINGS_PLAYBOOK
    )
    for name, run in seen.items():
        library = run["settings"]["DEFAULT_MODULE_PATH"]
        assert (f"/ns1/{name}/relative-library" in library) is relative  # ansible-runner's cwd
    shared = seen["mc"]["keeper_parent_pid"] == seen["other"]["keeper_parent_pid"]
    assert shared is not relative


def test_roles_of_two_resources_share_a_primed_child_and_keep_their_roles_path(
    warm_servers: WarmServers, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In role mode ansible-runner adds <private data dir>/roles: one per resource.
    monkeypatch.setenv("ANSIBLE_LOOKUP_PLUGINS", str(PLAYBOOKS / "lookup_plugins"))
    role = Path(__file__).parent / "roles" / "controller_settings"
    cold = runs_of_two_resources(AnsibleRunner(root=root), tmp_path / "cold", role=role)
    warm = runs_of_two_resources(
        AnsibleRunner(root=root, warm=warm_servers), tmp_path / "warm", role=role
    )
    assert warm["mc"]["keeper_parent_pid"] == warm["other"]["keeper_parent_pid"]
    assert warm["mc"]["keeper_parent_comm"] == PRIMED_COMM
    for name in ("mc", "other"):
        roles = warm[name]["settings"]["DEFAULT_ROLES_PATH"]
        assert f"/ns1/{name}/roles" in roles
        assert roles == cold[name]["settings"]["DEFAULT_ROLES_PATH"]


def runs_of_two_resources(
    runner: AnsibleRunner, tmp: Path, **target: Path
) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for name in ("mc", "other"):  # two resources: two private data dirs
        out = tmp / name
        out.mkdir(parents=True)
        result = runner.run(make_request(out, name=name, **target))
        assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
        seen[name] = json.loads((out / "settings.json").read_text())
    return seen


def test_a_primed_run_colours_its_output_as_a_cold_run_does(
    warm_servers: WarmServers, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ansible decides at import whether stdout is a colour terminal (ansible-runner
    # gives the run a pty); the primed child imported it with no terminal at all.
    monkeypatch.setenv("TERM", "xterm")
    for name in ("ANSIBLE_NOCOLOR", "ANSIBLE_FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    coloured = {}
    warm = AnsibleRunner(root=root, warm=warm_servers)
    for name, runner in (("cold", AnsibleRunner(root=root)), ("warm", warm), ("again", warm)):
        result, seen = settings_of(runner, tmp_path / name)
        assert result.artifacts_dir is not None
        coloured[name] = "\x1b[" in (result.artifacts_dir / "stdout").read_text()
        if name != "cold":
            assert seen["keeper_parent_comm"] == PRIMED_COMM
    assert coloured == {"cold": True, "warm": True, "again": True}
