"""The per-resource ansible-runner private data directory.

Where this sits: runner/ansible.py calls `prepare()` before every run and
`finish_run()` after it; the controller calls `remove_cr_dir()` once a custom
resource is gone (the Go operator never does, AOP issue #47), and
`sweep_scratch_dirs()` at start-up, before the first run (runner/lifeline.py). Layout, kept
compatible with the Go operator so existing debugging habits still work:

    <root>/<group>/<version>/<Kind>/<namespace>/<name>/     (empty segments dropped)
        env/extravars      the run's extra vars, compact sorted JSON   (rewritten every run)
        env/envvars        K8S_AUTH_KUBECONFIG and KUBECONFIG: the kubeconfig PATH only
        env/settings       ansible-runner settings (pexpect poll interval ...)
        env/cmdline        the `--ansible-args` text; absent when there is none
        inventory/         localhost, or a copy of $ANSIBLE_INVENTORY
        artifacts/<ident>/ written by ansible-runner; the newest `max_artifacts` are kept;
                           in its `command` file we redact the environment's values
        artifacts/latest   symlink to the newest run's directory
        tmp-<ident>/       the run's TMPDIR (through a short symlink in the operator's
                           temp dir), removed when the run ends
    <root>/.discovery/     kubernetes.core's API discovery cache, shared by all runs

Every file is rewritten on every run because ansible-runner itself only writes its
env files when they do not exist yet, which would pin the first run's values forever.
Directories are 0700 and files 0600: extra vars can carry a watched Secret's data.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shlex
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_operator.errors import RunSetupError
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
    "scratch_dir",
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


def _plain(value: object) -> object:
    # json only knows dict; read-only views (MappingProxyType ...) are mappings too.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _write_extravars(env_dir: Path, extravars: Mapping[str, Any]) -> None:
    try:
        text = json.dumps(
            dict(extravars),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            default=_plain,
        )
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


# kubernetes.core keeps its API discovery cache in $TMPDIR under this name. A
# per-run TMPDIR would lose it and re-discover on every run, so it is carried
# between the runs through one shared directory (a group name, being a DNS
# name, never starts with a dot).
DISCOVERY_CACHES = "k8srcp-*.json"
DISCOVERY_DIR = ".discovery"


def scratch_dir(data_dir: Path, ident: str, *, root: Path) -> Path:
    """A private directory for the run's TMPDIR, seeded with the shared API
    discovery cache; `finish_run` removes it.

    Modules unpack themselves into `$TMPDIR/ansible_<module>_payload_*` and remove
    that on exit, which a killed run (timeout, cancel) never does: with a
    per-run TMPDIR nothing of it outlives the run. Until `finish_run` this process
    holds a lock on it: a sweep (`sweep_scratch_dirs`) leaves it alone, and after a
    kill the kernel releases the lock with the process.
    """
    path = data_dir / f"tmp-{ident}"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=_DIR_MODE)
    _hold(path)
    for cache in (root / DISCOVERY_DIR).glob(DISCOVERY_CACHES):
        with contextlib.suppress(OSError):  # only a cache: the run re-discovers
            shutil.copy2(cache, path / cache.name)  # its mtime tells if a run changed it
    try:
        return _short_alias(path, ident)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        _release(path)
        raise


# A run's short name for its scratch directory: <base>/ao-run-<ident>-*/t, in the
# operator's temp dir, or in /tmp when that is too long for a socket path under it.
_ALIAS_PREFIX = "ao-run-"
_ALIAS_LINK = "t"
_ALIAS_BASE_MAX = 32  # + 38 for the alias + 32 for ansible's pymp-*/listener-*: < 108


def _alias_bases() -> list[Path]:
    bases = [Path(tempfile.gettempdir()), Path("/tmp")]  # noqa: S108 - a short fallback
    return list(dict.fromkeys(bases))


def _short_alias(path: Path, ident: str) -> Path:
    """A short path to `path`, for TMPDIR. ansible-core 2.21's ansible-playbook listens
    on a Unix socket under $TMPDIR (`pymp-*/listener-*`, 32 more bytes) and a socket
    path has at most 107 bytes: under the per-resource directory that fails the run
    ("Local RPC server did not start"). A private directory in the operator's own
    temp dir holds a symlink to `path`; `finish_run` removes it."""
    fits = [b for b in _alias_bases() if len(str(b)) <= _ALIAS_BASE_MAX and os.access(b, os.W_OK)]
    base = (fits or _alias_bases())[0]
    holder = Path(tempfile.mkdtemp(prefix=f"{_ALIAS_PREFIX}{ident}-", dir=base))
    alias = holder / _ALIAS_LINK
    alias.symlink_to(path, target_is_directory=True)
    return alias


def _keep_discovery_caches(scratch: Path, root: Path) -> None:
    shared = root / DISCOVERY_DIR
    for cache in scratch.glob(DISCOVERY_CACHES):
        target = shared / cache.name
        with contextlib.suppress(OSError):
            if target.exists() and target.stat().st_mtime >= cache.stat().st_mtime:
                continue  # unchanged by this run, or a newer one is there already
            shared.mkdir(mode=_DIR_MODE, exist_ok=True)
            os.replace(cache, target)  # atomic: concurrent runs read whole files


def finish_run(
    data_dir: Path,
    *,
    ident: str,
    max_artifacts: int,
    root: Path,
    completed: bool,
    alias: Path | None = None,
) -> None:
    """After a run, whatever its outcome: keep the discovery cache of a run that
    was not killed (a killed one may have left it half written), drop the run's
    scratch directory and `alias` (what scratch_dir returned), rotate artifacts
    and refresh `latest`."""
    scratch = data_dir / f"tmp-{ident}"
    if completed:
        _keep_discovery_caches(scratch, root)
    shutil.rmtree(scratch, ignore_errors=True)
    _release(scratch)
    if alias is not None and alias.is_symlink() and alias.name == _ALIAS_LINK:
        # Its private holder directory: the symlink goes, not what it pointed to.
        shutil.rmtree(alias.parent, ignore_errors=True)
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
    if unless_running and any(_held_elsewhere(t) for t in target.glob("tmp-*")):
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


_SCRATCH = re.compile(r"tmp-\d+")
# Per-CR subdirectories that never hold a run's scratch directory: not walked.
_NOT_WALKED = frozenset({"artifacts", "env", "inventory", "project", DISCOVERY_DIR})


def sweep_scratch_dirs(root: Path) -> int:
    """Remove the `tmp-<ident>` directories of runs that never finished.

    A run's scratch directory goes when the run ends; an operator killed
    mid-run (SIGKILL, OOM, node loss) leaves it, with module payloads and
    Ansible's temp dirs. Called at start-up, before any run of this process,
    and by the lifeline's watchdog once the operator is gone
    (runner/lifeline.py). A directory locked by a live run (`scratch_dir`; an
    operator sharing the root) is left alone. Only directories beside an
    `env/` (a CR's private data dir) are touched. Returns how many were
    removed.
    """
    removed = 0
    for top, dirs, _ in os.walk(root):
        here = Path(top)
        keep = []
        for name in dirs:
            if _SCRATCH.fullmatch(name) and (here / "env").is_dir():
                if _held_elsewhere(here / name):
                    continue  # a live run's, of an operator sharing this root
                shutil.rmtree(here / name, ignore_errors=True)
                removed += not (here / name).exists()
            elif name not in _NOT_WALKED:
                keep.append(name)
        dirs[:] = keep
    _sweep_aliases()
    return removed


# Scratch dir -> the open descriptor holding its lock while its run lasts.
_held: dict[Path, int] = {}
_held_lock = threading.Lock()


def _hold(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)  # close-on-exec: no run inherits it
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new directory: never contended
    with _held_lock:
        previous = _held.pop(path, None)
        _held[path] = fd
    if previous is not None:
        os.close(previous)


def _release(path: Path) -> None:
    with _held_lock:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def _held_elsewhere(path: Path) -> bool:
    """Does a live run hold `path`'s lock (flock: per open file, so also ours)?"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _sweep_aliases() -> None:
    """Remove our `_short_alias` holders whose run is gone (the link's target no longer
    exists), of any runner root: a killed operator's successor may use another one. A
    live run's link always has its target: scratch_dir makes it first."""
    for holder in (h for base in _alias_bases() for h in base.glob(f"{_ALIAS_PREFIX}*")):
        link = holder / _ALIAS_LINK
        with contextlib.suppress(OSError):
            if holder.lstat().st_uid == os.getuid() and link.is_symlink() and not link.exists():
                shutil.rmtree(holder)
