"""Warm module runs of collections that are not installed next to the operator.

A project's `collections/` (or `~/.ansible/collections`, where a project image's
`requirements.yml` installs) is not on the module server's import path: only the
AnsiballZ payload carries those collections, as it does for a cold interpreter. Real
WarmServers, ansible-runner and module server; the module reports where it ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_operator.runner.ansible import AnsibleRunner
from ansible_operator.runner.base import RunOutcome
from tests.runner.test_ansible_runs import make_request
from tests.runner.test_warm_runs import root, runner, warm_servers

__all__ = ["root", "runner", "warm_servers"]

WHERE_MODULE = """\
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aotest.elsewhere.plugins.module_utils.place import PLACE


def main():
    module = AnsibleModule(argument_spec={"dest": {"type": "str", "required": True}})
    with open("/proc/%d/cmdline" % os.getppid(), "rb") as handle:
        parent = handle.read().replace(b"\\0", b" ").decode()
    with open(module.params["dest"], "w") as handle:
        json.dump({"place": PLACE, "parent": parent}, handle)
    module.exit_json(changed=False, place=PLACE)


if __name__ == "__main__":
    main()
"""
PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - aotest.elsewhere.where:
        dest: "{{ out_dir }}/where.json"
      register: where
    - ansible.builtin.assert:
        that: where.place == "project collections"
"""


@pytest.mark.parametrize("layout", ["project collections", "ANSIBLE_COLLECTIONS_PATH"])
def test_a_module_of_a_collection_outside_site_packages_runs_warm(
    runner: AnsibleRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    project = tmp_path / "project"
    top = project / "collections" if layout == "project collections" else tmp_path / "extra"
    collection = top / "ansible_collections" / "aotest" / "elsewhere" / "plugins"
    (collection / "modules").mkdir(parents=True)
    (collection / "module_utils").mkdir()
    (collection / "modules" / "where.py").write_text(WHERE_MODULE)
    (collection / "module_utils" / "place.py").write_text('PLACE = "project collections"\n')
    if layout == "ANSIBLE_COLLECTIONS_PATH":
        monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(top))
    project.mkdir(exist_ok=True)
    playbook = project / "where.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "out"
    out.mkdir()

    result = runner.run(make_request(out, playbook=playbook))

    assert result.outcome is RunOutcome.SUCCESSFUL, result.stdout_tail
    seen = json.loads((out / "where.json").read_text())
    assert seen["place"] == "project collections"
    assert "ansible_operator.warm.modserver" in seen["parent"]  # forked, not exec'ed
