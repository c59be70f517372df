"""configkey.key_for: which runs may share a primed child (warm/primed.py).

Real files in a temp dir and ansible-core's real setting definitions; the end-to-end
proof that shared runs see a cold run's settings is tests/runner/test_warm_primed.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ansible_operator.warm import configkey
from ansible_operator.warm.protocol import Request

DEFINITIONS = configkey.load_definitions()


def request(tmp: Path, *, cwd: str = "a", **env: str) -> Request:
    directory = tmp / cwd
    directory.mkdir(exist_ok=True)
    base = {"HOME": str(tmp / "home"), "PATH": "/usr/bin", "ANSIBLE_TIMEOUT": "10"}
    return Request(argv0="ansible-playbook", argv=[], env=base | env, cwd=str(directory))


def key(req: Request) -> str:
    return configkey.key_for(req, DEFINITIONS)


def test_the_definitions_name_the_path_valued_variables() -> None:
    assert {"ANSIBLE_ROLES_PATH", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_CONFIG"} <= DEFINITIONS.path_env
    assert "ANSIBLE_TIMEOUT" not in DEFINITIONS.path_env


def test_per_run_variables_and_another_project_dir_share_a_key(tmp_path: Path) -> None:
    first = request(tmp_path, cwd="a", TMPDIR="/tmp/1", AO_RUN_MARKER="x", KUBECONFIG="/k/1")
    second = request(
        tmp_path,
        cwd="b",
        TMPDIR="/tmp/2",
        AO_RUN_MARKER="y",
        KUBECONFIG="/k/2",
        K8S_AUTH_KUBECONFIG="/k/2",
        AWX_ISOLATED_DATA_DIR="/art/2",
        ANSIBLE_CACHE_PLUGIN_CONNECTION="/art/2/fact_cache",
        ANSIBLE_ROLES_PATH="/roles:/data/b/roles",  # ansible-runner's, per resource
    )
    assert key(first) == key(second)


Change = Callable[[Path], tuple[str, str]]
"""Builds two runs' configurations in a temp dir: the keys of the first and the second."""


def _pair(first: Request, second: Request) -> tuple[str, str]:
    return key(first), key(second)


def _with_file(req: Request, name: str, text: str) -> Request:
    (Path(req.cwd) / name).write_text(text)
    return req


def _cwd_config(tmp: Path) -> Path:
    path = tmp / "cwd.cfg"
    path.write_text("[defaults]\nroles_path = {{CWD}}/roles\n")
    return path


def _chmodded(tmp: Path) -> tuple[str, str]:
    req = _with_file(request(tmp, cwd="a"), "ansible.cfg", "[defaults]\n")
    before = key(req)
    Path(req.cwd).chmod(0o777)  # Ansible then ignores its ansible.cfg
    return before, key(req)


def _edited(tmp: Path, path: Path, **env: str) -> tuple[str, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[defaults]\ntimeout = 1\n")
    before = key(request(tmp, **env))
    path.write_text("[defaults]\ntimeout = 22\n")
    return before, key(request(tmp, **env))


CHANGES: dict[str, Change] = {
    "another value of a variable": lambda t: _pair(request(t), request(t, ANSIBLE_TIMEOUT="11")),
    "a variable more": lambda t: _pair(request(t), request(t, ANSIBLE_FORKS="3")),
    "a relative path in a variable, another cwd": lambda t: _pair(
        request(t, cwd="a", ANSIBLE_LIBRARY="library"),
        request(t, cwd="b", ANSIBLE_LIBRARY="library"),
    ),
    "a relative path in a path list, another cwd": lambda t: _pair(
        request(t, cwd="a", ANSIBLE_LIBRARY="/abs:library"),
        request(t, cwd="b", ANSIBLE_LIBRARY="/abs:library"),
    ),
    "{{CWD}} in a variable, another cwd": lambda t: _pair(
        request(t, cwd="a", ANSIBLE_LIBRARY="{{CWD}}/library"),
        request(t, cwd="b", ANSIBLE_LIBRARY="{{CWD}}/library"),
    ),
    "a relative ANSIBLE_CONFIG, another cwd": lambda t: _pair(
        request(t, cwd="a", ANSIBLE_CONFIG="x.cfg"),
        request(t, cwd="b", ANSIBLE_CONFIG="x.cfg"),
    ),
    "an ansible.cfg in one of the cwds": lambda t: _pair(
        request(t, cwd="a"),
        _with_file(request(t, cwd="b"), "ansible.cfg", "[defaults]\n"),
    ),
    "{{CWD}} in a config file, another cwd": lambda t: _pair(
        request(t, cwd="a", ANSIBLE_CONFIG=str(_cwd_config(t))),
        request(t, cwd="b", ANSIBLE_CONFIG=str(_cwd_config(t))),
    ),
    "the cwd with an ansible.cfg became world-writable": _chmodded,
    "an edited ANSIBLE_CONFIG": lambda t: _edited(
        t, t / "conf.cfg", ANSIBLE_CONFIG=str(t / "conf.cfg")
    ),
    "an edited ansible.cfg in an ANSIBLE_CONFIG dir": lambda t: _edited(
        t, t / "confdir" / "ansible.cfg", ANSIBLE_CONFIG=str(t / "confdir")
    ),
    "an edited ~/.ansible.cfg": lambda t: _edited(t, t / "home" / ".ansible.cfg"),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_what_can_change_a_setting_changes_the_key(change: Change, tmp_path: Path) -> None:
    first, second = change(tmp_path)
    assert first != second
