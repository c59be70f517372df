"""End to end through the real ansible-runner and ansible-playbook: Jinja in a custom
resource is data when it is marked unsafe (our default) and code when it is not (the Go
operator's default).

Each test builds the extra vars with `build_extravars`, writes `render(...)` to
`env/extravars` of a fresh ansible-runner directory (as the operator's runner does) and
runs a small playbook whose debug tasks read the variables. The custom resource carries
`{{ lookup('pipe', 'touch <file>') }}` in several places; a created file means Ansible
evaluated that value. No cluster is needed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest

from ansible_operator.launch.extravars import build_extravars
from ansible_operator.runner.extravarsfile import render

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent
GROUP = "example.com"
KIND = "Widget"

# One debug task per place a role may read a custom-resource value from.
# name -> the Jinja expression the task prints.
READS = {
    "top": "top_level",
    "nested_map": "nested.deep_value",
    "in_list": "entries[0]",
    "map_in_list": "entries[1].item_value",
    "raw_spec": "_example_com_widget_spec.topLevel",
    "object": "_example_com_widget.spec.nested.deepValue",
}


def payload(marker: Path) -> str:
    return "{{ lookup('pipe', 'touch " + str(marker) + "') }}"


def widget(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Path]]:
    """A custom resource with a payload in each place, and the file each payload creates."""
    markers = {name: tmp_path / f"pwned-{name}" for name in ("top", "nested", "list", "map")}
    cr = {
        "apiVersion": "example.com/v1",
        "kind": KIND,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "topLevel": payload(markers["top"]),
            "nested": {"deepValue": payload(markers["nested"])},
            "entries": [payload(markers["list"]), {"itemValue": payload(markers["map"])}],
        },
    }
    return cr, markers


def debug_tasks(reads: dict[str, str]) -> str:
    """Playbook tasks printing each expression, named by its key in `reads`."""
    return "".join(
        f'    - name: {name}\n      debug:\n        msg: "{{{{ {expression} }}}}"\n'
        for name, expression in reads.items()
    )


def private_data_dir(tmp_path: Path, tasks: str) -> Path:
    """A fresh ansible-runner directory with a playbook of `tasks`, and no extravars yet."""
    root = tmp_path / "runner"
    (root / "project").mkdir(parents=True)
    (root / "inventory").mkdir()
    (root / "env").mkdir()
    (root / "project" / "playbook.yml").write_text(
        f"- hosts: localhost\n  gather_facts: false\n  tasks:\n{tasks}"
    )
    (root / "inventory" / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    return root


def run_playbook(root: Path, tmp_path: Path, **options: Any) -> tuple[Any, dict[str, Any]]:
    """Run the playbook; return the runner and each debug task's printed message by name."""
    runner = ansible_runner.run(
        private_data_dir=str(root),
        playbook="playbook.yml",
        quiet=True,
        # Without a cancel_callback runner installs its own SIGINT/SIGTERM handlers.
        cancel_callback=lambda: False,
        envvars={
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
            "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
            "ANSIBLE_NOCOLOR": "1",
        },
        **options,
    )
    printed = {
        event["event_data"]["task"]: event["event_data"]["res"].get("msg")
        for event in runner.events
        if event.get("event") == "runner_on_ok"
    }
    return runner, printed


def write_extravars(root: Path, extravars: dict[str, Any]) -> None:
    # UTF-8 explicitly: render() keeps non-ASCII characters as they are.
    (root / "env" / "extravars").write_text(render(extravars), encoding="utf-8")


@pytest.mark.parametrize("snake_case", [True, False], ids=["snake-case", "keys-as-written"])
def test_marked_values_are_printed_not_evaluated(tmp_path: Path, snake_case: bool) -> None:
    cr, markers = widget(tmp_path)
    extravars = build_extravars(cr, group=GROUP, kind=KIND, snake_case=snake_case, mark_unsafe=True)
    reads = READS if snake_case else {"top": "topLevel", "object": READS["object"]}
    root = private_data_dir(tmp_path, debug_tasks(reads))
    write_extravars(root, extravars)

    runner, printed = run_playbook(root, tmp_path)

    assert runner.status == "successful", runner.stdout.read()
    assert [name for name, path in markers.items() if path.exists()] == []
    spec = cr["spec"]
    expected = {
        "top": spec["topLevel"],
        "nested_map": spec["nested"]["deepValue"],
        "in_list": spec["entries"][0],
        "map_in_list": spec["entries"][1]["itemValue"],
        "raw_spec": spec["topLevel"],
        "object": spec["nested"]["deepValue"],
    }
    assert printed == {name: expected[name] for name in reads}


def test_unmarked_values_are_evaluated_like_the_go_default(tmp_path: Path) -> None:
    cr, markers = widget(tmp_path)
    extravars = build_extravars(cr, group=GROUP, kind=KIND, snake_case=True, mark_unsafe=False)
    root = private_data_dir(tmp_path, debug_tasks(READS))
    write_extravars(root, extravars)

    runner, printed = run_playbook(root, tmp_path)

    assert runner.status == "successful", runner.stdout.read()
    assert [name for name, path in markers.items() if not path.exists()] == []
    # `touch` prints nothing, so every evaluated payload renders as an empty string.
    assert printed == dict.fromkeys(READS, "")


def test_operator_vars_stay_templates(tmp_path: Path) -> None:
    """Watch vars come from the operator author and are not marked: Jinja in them works."""
    cr, _ = widget(tmp_path)
    extravars = build_extravars(
        cr,
        group=GROUP,
        kind=KIND,
        snake_case=True,
        mark_unsafe=True,
        watch_vars={"greeting": "hello {{ ansible_operator_meta.name }}"},
    )
    root = private_data_dir(tmp_path, debug_tasks({"greeting": "greeting"}))
    write_extravars(root, extravars)

    runner, printed = run_playbook(root, tmp_path)

    assert runner.status == "successful", runner.stdout.read()
    assert printed == {"greeting": "hello w"}


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_map_keys_are_never_rendered(tmp_path: Path, marked: bool) -> None:
    """Keys cannot carry the unsafe marker; ansible-core must not render them either."""
    marker = tmp_path / "pwned-key"
    cr = {"metadata": {"name": "w"}, "spec": {"labels": {payload(marker): "value"}}}
    # Keys as written, so the payload reaches Ansible unchanged (snake_case would mangle it).
    extravars = build_extravars(cr, group=GROUP, kind=KIND, snake_case=False, mark_unsafe=marked)
    tasks = debug_tasks(
        {"whole": "labels", "items": "labels | dict2items", "keys": "labels.keys() | list"}
    )
    tasks += '    - name: loop\n      debug:\n        msg: "{{ item.key }}"\n'
    tasks += '      loop: "{{ labels | dict2items }}"\n'
    root = private_data_dir(tmp_path, tasks)
    write_extravars(root, extravars)

    runner, printed = run_playbook(root, tmp_path)

    assert runner.status == "successful", runner.stdout.read()
    assert not marker.exists()
    assert printed["keys"] == [payload(marker)]


def test_rewritten_extravars_file_wins_over_runner_kwarg(tmp_path: Path) -> None:
    """Pins ansible-runner 2.4.3's handling of env/extravars in a reused directory.

    Runner writes its `extravars=` argument to env/extravars only when that file does
    not exist yet; otherwise it leaves the file alone and adds the argument inline
    (`-e '{...}'`, after `-e @env/extravars`). A key dropped from the argument would
    then survive from the old file, so the operator rewrites the file before every run
    and never passes `extravars=`. This test shows the rewrite is what Ansible reads.
    """
    reads = {"a": "a | default('unset')", "b": "b | default('unset')"}
    root = private_data_dir(tmp_path, debug_tasks(reads))

    _, first = run_playbook(root, tmp_path, extravars={"a": "one", "b": "old"})
    assert first == {"a": "one", "b": "old"}
    assert (root / "env" / "extravars").exists()

    # The argument no longer has `b`, yet the old file still provides it.
    _, stale = run_playbook(root, tmp_path, extravars={"a": "two"})
    assert stale == {"a": "two", "b": "old"}

    write_extravars(root, {"a": "three"})
    _, fresh = run_playbook(root, tmp_path)
    assert fresh == {"a": "three", "b": "unset"}
