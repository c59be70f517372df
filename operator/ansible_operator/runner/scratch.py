"""A run's scratch directory: its TMPDIR, and everything Ansible writes there.

Where this sits: runner/ansible.py calls `scratch_dir()` before each run (the
run's TMPDIR and Ansible's temp dirs, runner/tempdirs.py) and
runner/privatedir.py's `finish_run()` calls `drop()` after it; runner/lifeline.py
calls `sweep_scratch_dirs()` at start-up and from the watchdog once the operator
is gone.

Layout: `tmp-<ident>` in the resource's private data dir, seen by the run through
a short symlink in the operator's temp dir (a Unix socket Ansible opens under
`$TMPDIR` must stay under 108 bytes). kubernetes.core's API discovery cache is
carried from run to run through `<root>/.discovery/`. While its run lasts, the
operator holds an flock on the directory: a sweep leaves it alone, and the kernel
drops the lock with the process, whatever ends it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = [
    "DISCOVERY_CACHES",
    "DISCOVERY_DIR",
    "drop",
    "held_by_a_run",
    "release",
    "scratch_dir",
    "sweep_scratch_dirs",
]

_DIR_MODE = 0o700


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
        release(path)
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


def drop(data_dir: Path, ident: str, *, root: Path, completed: bool, alias: Path | None) -> None:
    """After a run: keep the discovery cache of a run that was not killed (a killed one
    may have left it half written), remove the scratch directory and `alias`."""
    scratch = data_dir / f"tmp-{ident}"
    if completed:
        _keep_discovery_caches(scratch, root)
    shutil.rmtree(scratch, ignore_errors=True)
    release(scratch)
    if alias is not None and alias.is_symlink() and alias.name == _ALIAS_LINK:
        # Its private holder directory: the symlink goes, not what it pointed to.
        shutil.rmtree(alias.parent, ignore_errors=True)


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
                if held_by_a_run(here / name):
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


def release(path: Path) -> None:
    with _held_lock:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def held_by_a_run(path: Path) -> bool:
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
