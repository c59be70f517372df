"""The per-resource ansible-runner private data directory.

Where this sits: runner/ansible.py calls `prepare()` before every run and
`finish_run()` after it; the controller calls `remove_cr_dir()` once a custom
resource is gone (the Go operator never does, AOP issue #47). The run's scratch
directory is runner/scratch.py's. Layout, kept compatible with the Go operator so
existing debugging habits still work:

    <root>/<group>/<version>/<Kind>/<namespace>/<name>/     (empty segments dropped)
        env/extravars      the run's extra vars, as Go's json.Marshal writes them (every run)
        env/envvars        K8S_AUTH_KUBECONFIG and KUBECONFIG: the kubeconfig PATH only
        env/settings       ansible-runner settings (pexpect poll interval ...)
        env/cmdline        the `--ansible-args` text; absent when there is none
        inventory/         localhost, or a copy of $ANSIBLE_INVENTORY
        artifacts/<ident>/ written by ansible-runner; the newest `max_artifacts` are kept;
                           in its `command` file we redact the environment's values
        artifacts/latest   symlink to the newest run's directory
        tmp-<ident>/       the run's scratch directory, its TMPDIR (runner/scratch.py)
    <root>/.discovery/     kubernetes.core's API discovery cache, shared by all runs

Every file is rewritten on every run because ansible-runner itself only writes its
env files when they do not exist yet, which would pin the first run's values forever.
Directories are 0700 and files 0600: extra vars can carry a watched Secret's data.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_operator.errors import RunSetupError
from ansible_operator.runner import extravarsfile, scratch
from ansible_operator.runner.base import RunRequest

__all__ = [
    "LATEST",
    "cmdline_from_ansible_args",
    "cr_dir",
    "default_inventory",
    "finish_run",
    "prepare",
    "redact_command_file",
    "redact_env",
    "refresh_latest",
    "remove_cr_dir",
    "rotate_artifacts",
    "write_private",
]

log = logging.getLogger(__name__)

LATEST = "latest"
_DIR_MODE = 0o700
_FILE_MODE = 0o600
REDACTED = "<redacted>"
# Values shown in artifacts/<ident>/command: harmless, useful when debugging a run.
_SHOWN_ENV = frozenset(
    {
        *("PATH", "HOME", "USER", "LANG", "LANGUAGE", "TZ", "PWD", "SHELL", "TERM", "TMPDIR"),
        *("HOSTNAME", "PYTHONPATH", "VIRTUAL_ENV", "KUBECONFIG", "K8S_AUTH_KUBECONFIG"),
        *("AWX_ISOLATED_DATA_DIR", "RUNNER_OMIT_EVENTS", "RUNNER_ONLY_FAILED_EVENTS"),
        *("WATCH_NAMESPACE", "POD_NAME", "OPERATOR_NAME"),
    }
)
_SECRET_WORDS = frozenset(
    {"PASS", "PASSWD", "PASSWORD", "TOKEN", "SECRET", "CREDENTIAL", "CREDENTIALS", "KEY"}
)


def _segment(value: str, *, what: str, optional: bool = False) -> str:
    if not value and optional:
        return value
    if not value or value in {".", ".."} or "/" in value or "\0" in value:
        raise RunSetupError(f"cannot build the runner directory: invalid {what} {value!r}")
    return value


def cr_dir(*, root: Path, group: str, version: str, kind: str, namespace: str, name: str) -> Path:
    """`<root>/<group>/<version>/<Kind>/<namespace>/<name>`; the core group and an empty
    (cluster-scoped) namespace drop out of the path, as Go's filepath.Join does."""
    parts = [
        _segment(group, what="group", optional=True),
        _segment(version, what="version"),
        _segment(kind, what="kind"),
        _segment(namespace, what="namespace", optional=True),
        _segment(name, what="name"),
    ]
    return root.joinpath(*(part for part in parts if part))


def cmdline_from_ansible_args(text: str) -> str:
    """The `--ansible-args` text as ansible-runner's env/cmdline: one pair of wrapping
    single quotes is dropped (people write `--ansible-args "'--tags x'"`)."""
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        return text[1:-1]
    return text


def default_inventory(python: str) -> str:
    """localhost over the local connection, run by the operator's own interpreter, which
    has the kubernetes client that kubernetes.core's modules import."""
    return f"localhost ansible_connection=local ansible_python_interpreter={python}\n"


def write_private(path: Path, content: str) -> None:
    """Write `content` to `path` (mode 0600) via a temporary file and an atomic rename,
    so a crash never leaves a half-written file for the next run."""
    path.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _write_extravars(env_dir: Path, extravars: Mapping[str, Any]) -> None:
    try:
        text = extravarsfile.render(extravars)  # what the Go operator writes, byte for byte
    except (TypeError, ValueError) as error:
        raise RunSetupError(f"extra vars are not JSON-serialisable: {error}") from error
    write_private(env_dir / "extravars", text)


def _write_envvars(env_dir: Path, kubeconfig: Path | None) -> None:
    # Only paths: ansible-runner copies env vars into artifacts/<ident>/command.
    if kubeconfig is None:
        _remove(env_dir / "envvars")
        return
    path = str(kubeconfig)
    write_private(
        env_dir / "envvars", json.dumps({"K8S_AUTH_KUBECONFIG": path, "KUBECONFIG": path})
    )


def _write_cmdline(env_dir: Path, ansible_args: str) -> None:
    cmdline = cmdline_from_ansible_args(ansible_args)
    if not cmdline.strip():
        _remove(env_dir / "cmdline")
        return
    try:
        shlex.split(cmdline)  # ansible-runner splits it the same way, mid-run
    except ValueError as error:
        # Not the text itself: it can hold credentials (--extra-vars), and this
        # message reaches the CR's status and Events.
        raise RunSetupError(
            f"--ansible-args cannot be split into arguments as a shell would: {error}"
        ) from None
    write_private(env_dir / "cmdline", cmdline)


def _write_inventory(inventory: Path, *, environ: Mapping[str, str], python: str) -> None:
    # Rebuilt from scratch each run so hosts removed from $ANSIBLE_INVENTORY disappear.
    shutil.rmtree(inventory, ignore_errors=True)
    inventory.mkdir(mode=_DIR_MODE, parents=True)
    source = environ.get("ANSIBLE_INVENTORY", "")
    if not source:
        write_private(inventory / "hosts", default_inventory(python))
        return
    try:
        if Path(source).is_dir():
            shutil.copytree(source, inventory, dirs_exist_ok=True)
        else:
            Path(source).stat()  # a clear error for a missing path, before copying
            shutil.copyfile(source, inventory / "hosts")
    except OSError as error:
        raise RunSetupError(f"cannot use ANSIBLE_INVENTORY={source!r}: {error}") from error


def prepare(
    request: RunRequest,
    *,
    root: Path,
    environ: Mapping[str, str],
    python: str,
    settings: Mapping[str, Any],
) -> Path:
    """Create or refresh the private data dir of `request`'s resource; returns its path.

    Raises RunSetupError when the directory or one of its files cannot be written.
    """
    data_dir = cr_dir(
        root=root,
        group=request.group,
        version=request.version,
        kind=request.kind,
        namespace=request.namespace,
        name=request.name,
    )
    env_dir = data_dir / "env"
    try:
        # A concurrent remove_cr_dir() may prune an empty parent mid-way: retry once.
        for attempt in (1, 2):
            try:
                env_dir.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        _write_extravars(env_dir, request.extravars)
        _write_envvars(env_dir, request.kubeconfig)
        write_private(env_dir / "settings", json.dumps(dict(settings), sort_keys=True))
        _write_cmdline(env_dir, request.ansible_args)
        _write_inventory(data_dir / "inventory", environ=environ, python=python)
        (data_dir / "artifacts").mkdir(mode=_DIR_MODE, exist_ok=True)
    except OSError as error:
        raise RunSetupError(f"cannot prepare {data_dir}: {error}") from error
    return data_dir


def redact_env(env: Mapping[str, Any], *, keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`env` with every value hidden except those of well-known, credential-free names
    (and `keep`); a name with a segment such as TOKEN or PASSWORD is always hidden."""

    def shown(name: str) -> bool:
        listed = name in _SHOWN_ENV or name in keep or name.startswith(("ANSIBLE_", "LC_"))
        return listed and not (_SECRET_WORDS & set(name.upper().split("_")))

    return {name: value if shown(name) else REDACTED for name, value in env.items()}


def redact_command_file(path: Path, *, keep: frozenset[str] = frozenset()) -> None:
    """Rewrite ansible-runner's `artifacts/<ident>/command` with `redact_env` applied:
    ansible-runner records the operator's whole environment there."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(document, dict) and isinstance(document.get("env"), dict):
            document["env"] = redact_env(document["env"], keep=keep)
            write_private(path, json.dumps(document, ensure_ascii=False))
    except (OSError, ValueError) as error:
        log.warning("cannot redact %s: %s", path, error)


def rotate_artifacts(artifacts: Path, *, keep: int, current: str) -> list[Path]:
    """Delete the oldest run directories so that at most `keep` remain (0 keeps all).

    Done here rather than by ansible-runner's `rotate_artifacts`, which counts the
    `latest` symlink as a run and crashes on it ("Cannot call rmtree on a symbolic
    link") once it becomes the oldest entry, e.g. with max-runner-artifacts 1.
    The current run's directory is never deleted. Returns what was removed.
    """
    if keep <= 0:
        return []
    try:
        runs = [
            entry
            for entry in artifacts.iterdir()
            if entry.is_dir() and not entry.is_symlink() and entry.name != current
        ]
        runs.sort(key=lambda entry: (entry.stat().st_mtime, entry.name))
    except OSError as error:
        log.warning("cannot list %s for rotation: %s", artifacts, error)
        return []
    has_current = (artifacts / current).is_dir()
    surplus = len(runs) + int(has_current) - keep
    removed = runs[: max(surplus, 0)]
    for entry in removed:
        shutil.rmtree(entry, ignore_errors=True)
    return removed


def refresh_latest(artifacts: Path, ident: str) -> None:
    """Point `artifacts/latest` at `artifacts/<ident>` (relative link, swapped atomically)."""
    link = artifacts / LATEST
    temporary = artifacts / f".{LATEST}.{ident}"
    _remove(temporary)
    os.symlink(ident, temporary)
    os.replace(temporary, link)


def finish_run(
    data_dir: Path,
    *,
    ident: str,
    max_artifacts: int,
    root: Path,
    completed: bool,
    alias: Path | None = None,
) -> None:
    """After a run, whatever its outcome: drop its scratch directory (runner/scratch.py),
    rotate artifacts and refresh `latest`."""
    scratch.drop(data_dir, ident, root=root, completed=completed, alias=alias)
    artifacts = data_dir / "artifacts"
    rotate_artifacts(artifacts, keep=max_artifacts, current=ident)
    if (artifacts / ident).is_dir():
        try:
            refresh_latest(artifacts, ident)
        except OSError as error:
            log.warning("cannot refresh %s/%s: %s", artifacts, LATEST, error)


def remove_cr_dir(
    *,
    root: Path,
    group: str,
    version: str,
    kind: str,
    namespace: str,
    name: str,
    unless_running: bool = False,
) -> bool:
    """Delete a gone resource's private data dir and its now-empty parents up to `root`.

    Must not race a run of the same resource (the controller never runs one resource
    twice at a time); with `unless_running`, a directory whose scratch directory a
    live run holds (`scratch_dir`) is left alone. Returns whether it was removed.
    """
    target = cr_dir(
        root=root, group=group, version=version, kind=kind, namespace=namespace, name=name
    )
    if unless_running and any(scratch.held_by_a_run(t) for t in target.glob("tmp-*")):
        return False
    existed = target.is_dir()
    shutil.rmtree(target, ignore_errors=True)
    parent = target.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()  # only succeeds when empty: siblings are left alone
        except OSError:
            break
        parent = parent.parent
    return existed
