"""Where a run's temporary files go: all of them inside the run's scratch directory.

Where this sits: runner/ansible.py calls `run_temp_env(scratch, environ)` once per
run, after inputdir.scratch_dir() made the run's private scratch directory, and
adds the result to the run's environment.

Why: a run's temporary files outlive it when it is killed (cancel, timeout, or
the operator itself killed): modules unpack into `$TMPDIR`, ansible-playbook
keeps `ansible-local-<pid>*` under Ansible's local temp (default
`~/.ansible/tmp`), and module runs over the local connection make
`ansible-tmp-<time>-<pid>-<n>` under the remote temp (the same default). Only a
directory we own and remove as a whole is sure to go: the scratch directory is
removed when the run ends, and by the lifeline's sweep or the next start after
a kill (runner/lifeline.py). So `TMPDIR`, `ANSIBLE_LOCAL_TEMP` and
`ANSIBLE_REMOTE_TEMP` all point into it, except where the operator's
environment or Ansible's configuration file chooses a temp directory itself:
that choice is the user's and is kept (the runner then removes the killed
processes' directories there by name, as before).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["run_temp_env"]

# (environment variables that set it, its key in ansible.cfg's [defaults])
_SETTINGS = {
    "ANSIBLE_LOCAL_TEMP": (("ANSIBLE_LOCAL_TEMP",), "local_tmp"),
    "ANSIBLE_REMOTE_TEMP": (("ANSIBLE_REMOTE_TEMP", "ANSIBLE_REMOTE_TMP"), "remote_tmp"),
}
_SYSTEM_CONFIG = "/etc/ansible/ansible.cfg"


def run_temp_env(scratch: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment that keeps a run's temporary files in `scratch`."""
    env = {"TMPDIR": str(scratch)}
    configured = _configured_keys(environ)
    for variable, (names, key) in _SETTINGS.items():
        if not any(environ.get(name) for name in names) and key not in configured:
            env[variable] = str(scratch)
    return env


def _config_file(environ: Mapping[str, str]) -> Path | None:
    """The file Ansible reads its settings from, when a run's cwd holds none (it is
    the run's private data dir, which has no ansible.cfg)."""
    named = environ.get("ANSIBLE_CONFIG")
    candidates = []
    if named:
        path = Path(os.path.expanduser(named))
        candidates += [path / "ansible.cfg" if path.is_dir() else path]
    home = environ.get("HOME")
    if home:
        candidates.append(Path(home) / ".ansible.cfg")
    candidates.append(Path(_SYSTEM_CONFIG))
    return next((path for path in candidates if path.is_file()), None)


def _configured_keys(environ: Mapping[str, str]) -> set[str]:
    path = _config_file(environ)
    if path is None:
        return set()
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return set()  # Ansible will report the broken file in the run itself
    if not parser.has_section("defaults"):
        return set()
    return {key for key in parser.options("defaults") if parser.get("defaults", key)}
