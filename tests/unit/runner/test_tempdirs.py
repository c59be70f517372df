"""`runner.tempdirs`: a run's temporary files go into its scratch directory, unless the
user chose a place for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_operator.runner import tempdirs
from ansible_operator.runner.tempdirs import run_temp_env

SCRATCH = Path("/runs/g/v1/K/ns/n/tmp-1")
ALL = {"TMPDIR", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP"}


@pytest.fixture(autouse=True)
def no_system_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's /etc/ansible/ansible.cfg is not this test's."""
    monkeypatch.setattr(tempdirs, "_SYSTEM_CONFIG", str(tmp_path / "absent.cfg"))


@pytest.mark.parametrize(
    ("environ", "config", "in_scratch"),
    [
        ({}, None, ALL),
        ({"ANSIBLE_LOCAL_TEMP": "/mine"}, None, ALL - {"ANSIBLE_LOCAL_TEMP"}),
        ({"ANSIBLE_REMOTE_TMP": "/mine"}, None, ALL - {"ANSIBLE_REMOTE_TEMP"}),
        ({"ANSIBLE_REMOTE_TEMP": "/mine"}, None, ALL - {"ANSIBLE_REMOTE_TEMP"}),
        ({}, "[defaults]\nlocal_tmp = /mine\n", ALL - {"ANSIBLE_LOCAL_TEMP"}),
        ({}, "[defaults]\nremote_tmp = /mine\n", ALL - {"ANSIBLE_REMOTE_TEMP"}),
        ({}, "[ssh_connection]\nremote_tmp = /x\n", ALL),  # not where Ansible reads it
        ({}, "not an ini file [", ALL),  # Ansible reports a broken file in the run
        ({"ANSIBLE_LOCAL_TEMP": ""}, None, ALL),  # empty: Ansible's default
    ],
    ids=[
        "nothing-set",
        "local-env",
        "remote-tmp-env",
        "remote-temp-env",
        "local-config",
        "remote-config",
        "other-section",
        "broken-config",
        "empty-env",
    ],
)
def test_what_goes_into_the_scratch_directory(
    tmp_path: Path, environ: dict[str, str], config: str | None, in_scratch: set[str]
) -> None:
    env = {"HOME": str(tmp_path / "home"), **environ}
    if config is not None:
        (tmp_path / "ansible.cfg").write_text(config)
        env["ANSIBLE_CONFIG"] = str(tmp_path / "ansible.cfg")
    got = run_temp_env(SCRATCH, env)
    assert got == {name: str(SCRATCH) for name in in_scratch}


def test_the_config_in_home_counts_and_a_directory_in_ansible_config_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".ansible.cfg").write_text("[defaults]\nlocal_tmp = /mine\n")
    assert "ANSIBLE_LOCAL_TEMP" not in run_temp_env(SCRATCH, {"HOME": str(home)})
    project = tmp_path / "project"
    project.mkdir()
    (project / "ansible.cfg").write_text("[defaults]\nremote_tmp = /mine\n")
    env = {"HOME": str(home), "ANSIBLE_CONFIG": str(project)}
    got = run_temp_env(SCRATCH, env)  # ANSIBLE_CONFIG's file wins over ~/.ansible.cfg
    assert "ANSIBLE_REMOTE_TEMP" not in got
    assert got["ANSIBLE_LOCAL_TEMP"] == str(SCRATCH)
