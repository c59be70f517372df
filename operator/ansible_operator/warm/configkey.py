"""Which warm runs may share an interpreter that has already read Ansible's configuration.

Where this sits: the playbook helper (pbserver.py) loads `Definitions` once at start-up
and, for every request, primed.py asks `key_for()` which primed child may serve it.
Two runs with the same key get the same result from importing `ansible.constants`
and the controller modules that read it at import time; runs with different keys
never share one.

What Ansible's configuration is made of, and how the key covers it:

* the environment: every variable is in the key except `PER_RUN_ENV`, the few that
  differ from one run (or resource) to the next and that no controller module copies
  at import time (the run marker, TMPDIR, the kubeconfig path, ansible-runner's
  artifact dir, fact cache and roles path). The settings they feed (the fact cache,
  the roles path) are read again in each run child, with the local temp directory
  (`refresh_settings()`);
* the configuration file: Ansible takes the first of `$ANSIBLE_CONFIG`,
  `./ansible.cfg`, `~/.ansible.cfg` and `/etc/ansible/ansible.cfg`; the identity of
  each (inode, size, mtime) is in the key, so an edited file gets a new child;
* the working directory: in the key (with its mode: Ansible ignores an `ansible.cfg`
  in a world-writable one) when it can change a setting, that is when it holds an
  `ansible.cfg`, when a path-valued variable (`ANSIBLE_CONFIG` or any setting of a
  path type) is relative or names `{{CWD}}`, or when a config file names `{{CWD}}`.
  Otherwise every resource's project dir shares one child.

tests/runner/test_warm_primed.py proves the settings of a primed run equal a cold
run's for each of these cases.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.warm.protocol import MARKER_ENV, Request

__all__ = [
    "PER_RUN_ENV",
    "Definitions",
    "key_for",
    "load_definitions",
    "per_run_settings",
    "refresh_settings",
]

PER_RUN_ENV = frozenset(
    {
        MARKER_ENV,
        "TMPDIR",  # the run's scratch dir; child.py resets tempfile's cache
        # Also in the scratch dir (runner/tempdirs.py); DEFAULT_LOCAL_TMP is a temp
        # setting, read again per run, and remote_tmp a shell plugin option read per task.
        "ANSIBLE_LOCAL_TEMP",
        "ANSIBLE_REMOTE_TEMP",
        "K8S_AUTH_KUBECONFIG",  # read by kubernetes.core when a task runs
        "KUBECONFIG",
        "AWX_ISOLATED_DATA_DIR",  # ansible-runner's artifact dir, read by its callback
        "ANSIBLE_CACHE_PLUGIN_CONNECTION",  # ansible-runner's per-run fact cache
        # ansible-runner adds <private data dir>/roles in role mode: one per resource.
        # Read through `ansible.constants` only when a role is looked up.
        "ANSIBLE_ROLES_PATH",
    }
)
_PATH_TYPES = frozenset({"path", "pathspec", "pathlist", "tmppath", "temppath", "tmp"})
_TEMP_TYPES = frozenset({"tmppath", "temppath", "tmp"})
_CONFIG_ENV = "ANSIBLE_CONFIG"
_SYSTEM_CONFIG = "/etc/ansible/ansible.cfg"
_CONFIG_READ_LIMIT = 1 << 20


@dataclass(frozen=True)
class Definitions:
    path_env: frozenset[str]
    """Variables that set a path-valued setting (a relative value depends on the cwd)."""


def load_definitions() -> Definitions:
    """Read ansible-core's setting definitions (config/base.yml) without importing
    `ansible.constants`."""
    spec = importlib.util.find_spec("ansible.config")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ansible.config is not installed")
    base = Path(next(iter(spec.submodule_search_locations))) / "base.yml"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with base.open("rb") as handle:
        settings: dict[str, Any] = yaml.load(handle, Loader=loader)  # noqa: S506 - safe loader
    names = {_CONFIG_ENV}
    for setting in settings.values():
        if isinstance(setting, dict) and setting.get("type") in _PATH_TYPES:
            names.update(str(e["name"]) for e in setting.get("env") or () if "name" in e)
    return Definitions(path_env=frozenset(names))


def _relative(value: str) -> bool:
    if "{{CWD}}" in value:
        return True
    pieces = value.replace(",", os.pathsep).split(os.pathsep)
    return any(p and not p.startswith(("/", "~", "$")) for p in (p.strip() for p in pieces))


def _identity(path: str) -> list[int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_ino, found.st_dev, found.st_size, found.st_mtime_ns, found.st_mode]


def _world_writable(directory: str) -> bool | None:
    try:
        return bool(os.stat(directory).st_mode & stat.S_IWOTH)
    except OSError:
        return None


def _names_cwd(path: str) -> bool:
    """Does the config file at `path` use `{{CWD}}` (resolved against the cwd)?"""
    try:
        with open(path, "rb") as handle:
            return b"{{CWD}}" in handle.read(_CONFIG_READ_LIMIT)
    except OSError:
        return False


def _config_paths(env: Mapping[str, str], cwd: str) -> list[str]:
    """Each file Ansible may read its settings from, the cwd's first (the paths follow
    from the environment and, when it is in the key, the cwd)."""
    candidates = [os.path.join(cwd, "ansible.cfg"), _SYSTEM_CONFIG]
    named = env.get(_CONFIG_ENV)
    if named:
        if named.startswith("~") and env.get("HOME"):
            named = env["HOME"] + named[1:]
        named = os.path.join(cwd, named)
        candidates += [named, os.path.join(named, "ansible.cfg")]  # a file, or a dir
    if env.get("HOME"):
        candidates.append(os.path.join(env["HOME"], ".ansible.cfg"))
    return candidates


def key_for(request: Request, definitions: Definitions) -> str:
    """The key of the configuration `request` would read (see the module docstring)."""
    env = {k: v for k, v in request.env.items() if k not in PER_RUN_ENV}
    paths = _config_paths(env, request.cwd)
    files = [_identity(path) for path in paths]
    cwd_matters = (
        files[0] is not None  # ./ansible.cfg (read unless the cwd is world-writable)
        or any(_relative(env[name]) for name in definitions.path_env if name in env)
        or any(_names_cwd(path) for path, found in zip(paths, files, strict=True) if found)
    )
    cwd = [request.cwd, _world_writable(request.cwd)] if cwd_matters else None
    document = [sorted(env.items()), cwd, files]
    return hashlib.sha256(json.dumps(document).encode("utf-8", "surrogateescape")).hexdigest()


@functools.cache
def per_run_settings() -> tuple[str, ...]:
    """The settings of `ansible.constants` that are per run: a temporary directory, or
    fed by a variable of `PER_RUN_ENV`. Found once per primed child, which calls it
    before it forks any run."""
    config = sys.modules["ansible.constants"].config
    names = []
    for name, definition in config.get_configuration_definitions().items():
        env_names = {str(e.get("name")) for e in definition.get("env") or ()}
        if definition.get("type") in _TEMP_TYPES or env_names & PER_RUN_ENV:
            names.append(name)
    return tuple(names)


def refresh_settings() -> list[str]:
    """In a run child forked from a primed child: read again the settings that are
    per run (`per_run_settings()`) from this run's environment. Returns their names.

    The local temp directory is created anew (`ansible-local-<this pid>...`, removed at
    exit by the handler Ansible registers), as a cold `ansible-playbook` creates its own.
    """
    constants: Any = sys.modules["ansible.constants"]
    names = per_run_settings()
    for name in names:
        constants.set_constant(
            name, constants.config.get_config_value(name, variables=vars(constants))
        )
    return list(names)
