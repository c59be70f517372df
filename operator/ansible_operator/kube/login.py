"""The operator's own credentials, loaded without leaving key material on disk.

Where this sits: `kube.client.load_api_client` (called once by the `run` and
`plan` commands) builds its `kubernetes` Configuration through `load()`, and
the controller's kopf login handler turns that same Configuration into kopf's
connection with `connection_fields()`, so both clients share one login.

Why this module exists: a kubeconfig that embeds its certificates (any
kubeconfig-based deployment, and the testbed's) makes the `kubernetes`
package write the CA, the client certificate and the client's private key to
`$TMPDIR/tmpXXXXXXXX`, and delete them only in an `atexit` handler, which a
SIGKILL or the OOM killer skips: every killed operator left its private key
behind. kopf's own login loaded the kubeconfig a second time, the same way.

What we do instead: the library writes those files into a private directory
of ours (0700, `ansible-operator-login-<pid>-*` in the temp dir); right after
loading, each file's bytes move into an anonymous memory file (`memfd`) and
the Configuration names it as `/proc/self/fd/<n>`, which the TLS code opens
like any path. The directory is removed at once, so the key is on disk only
for the milliseconds of the load, inside a directory that the next start
removes if the process died in between (`sweep_stale_dirs`). A memory file
lives exactly as long as the process: nothing is left whatever kills it.
Without `/proc` (not Linux) the files stay in the private directory until
the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes import client

# The kubernetes package is imported where it is used: the lifeline's watchdog
# (runner/lifeline.py) imports this module for `sweep_stale_dirs` only, and starts
# in well under a second without the client's 27 MiB of imports.

__all__ = ["LOGIN_DIR_PREFIX", "connection_fields", "load", "sweep_stale_dirs"]

LOGIN_DIR_PREFIX = "ansible-operator-login-"
_FILE_ATTRIBUTES = ("ssl_ca_cert", "cert_file", "key_file")
_held: list[int] = []  # the memory files' descriptors: open for the process's life
_held_lock = threading.Lock()


def load(path: str) -> client.Configuration:
    """The Configuration of kubeconfig `path` (its current context), with any
    certificate or key data it embeds held in memory only."""
    from kubernetes import client, config  # noqa: PLC0415 - see the imports above

    configuration = client.Configuration()
    moved: dict[str, str] = {}  # a file the library wrote -> the memory file that holds it
    with _private_dir() as scratch:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path,
            client_configuration=configuration,
            temp_file_path=str(scratch),
        )
        _adopt(configuration, configuration, scratch, moved)
    hook: Any = getattr(configuration, "refresh_api_key_hook", None)
    if hook is not None:
        configuration.refresh_api_key_hook = _shielded(hook, scratch, moved)
    return configuration


def _shielded(hook: Any, scratch: Path, moved: dict[str, str]) -> Any:
    """The library's token refresh, kept away from our configuration's file paths.

    The library runs it before every request that sends a token; it copies the
    loader's own (deleted) file paths onto the configuration it is given, re-installs
    itself there, and on a token's expiry reloads the credentials (an exec plugin's
    certificate, written to a file again). So it runs against a stand-in: the token
    is taken from it, and files it wrote go into memory like the first ones.
    """

    def refreshed(target: Any) -> None:
        stand_in = types.SimpleNamespace(api_key={}, refresh_api_key_hook=None)
        hook(stand_in)
        target.api_key.update(stand_in.api_key)
        _adopt(stand_in, target, scratch, moved)
        shutil.rmtree(scratch, ignore_errors=True)

    return refreshed


def _adopt(source: Any, target: Any, scratch: Path, moved: dict[str, str]) -> None:
    """Set `target`'s file paths to memory files for every file the library wrote
    into `scratch` and named in `source` (moving new ones into memory)."""
    for attribute in _FILE_ATTRIBUTES:
        value = getattr(source, attribute, None)
        if not isinstance(value, str):
            continue
        if value not in moved and Path(value).parent == scratch:
            moved[value] = _into_memory(Path(value))
        if value in moved:
            setattr(target, attribute, moved[value])
    _forget_library_records(scratch)


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    scratch = Path(tempfile.mkdtemp(prefix=f"{LOGIN_DIR_PREFIX}{os.getpid()}-"))  # 0700
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _into_memory(path: Path) -> str:
    """Move `path`'s bytes into a memory file; the path that names it in this process."""
    if not os.path.isdir("/proc/self/fd") or not hasattr(os, "memfd_create"):
        return _keep_until_exit(path)
    data = path.read_bytes()
    fd = os.memfd_create(f"ansible-operator-{path.name}")  # close-on-exec
    try:
        os.write(fd, data)
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    with _held_lock:
        _held.append(fd)
    path.unlink()
    return f"/proc/self/fd/{fd}"


def _keep_until_exit(path: Path) -> str:
    """Without memory files: move the file out of the scratch directory (removed when
    loading ends) into a private one of its own, removed at exit."""
    keeper = Path(tempfile.mkdtemp(prefix=f"{LOGIN_DIR_PREFIX}{os.getpid()}-"))
    target = keeper / path.name
    os.replace(path, target)
    atexit.register(shutil.rmtree, keeper, True)
    return str(target)


def _forget_library_records(scratch: Path) -> None:
    """The library remembers the files it wrote (to reuse and delete them at exit);
    those under `scratch` are gone, and a later load must write them anew."""
    from kubernetes.config import kube_config  # noqa: PLC0415 - see the imports above

    records: Any = getattr(kube_config, "_temp_files", None)
    if isinstance(records, dict):
        for key, name in list(records.items()):
            if isinstance(name, str) and Path(name).parent == scratch:
                del records[key]


def connection_fields(configuration: client.Configuration) -> dict[str, Any]:
    """What kopf's `ConnectionInfo` needs, read from `configuration` (the token is
    asked for again each time, so a provider's refresh hook runs)."""
    header = configuration.get_api_key_with_prefix(
        "BearerToken"
    ) or configuration.get_api_key_with_prefix("authorization")
    parts = str(header).split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else parts
    return {
        "server": configuration.host,
        "ca_path": configuration.ssl_ca_cert,
        "insecure": not configuration.verify_ssl,
        "username": configuration.username or None,
        "password": configuration.password or None,
        "scheme": scheme,
        "token": token,
        "certificate_path": configuration.cert_file,
        "private_key_path": configuration.key_file,
    }


def sweep_stale_dirs(parent: Path, prefix: str) -> int:
    """Remove `<prefix><pid>-*` directories in `parent` whose process is gone.

    Called at start-up, before this process makes its own, so a directory
    carrying our own pid is an earlier incarnation's (a restarted container
    often gets the same pid). Only this user's directories are touched; a pid
    that now belongs to another live process keeps its directory (harmless,
    and never a live operator's loss). Returns how many were removed.
    """
    removed = 0
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            pid = _owner_pid(entry, prefix)
            if pid is None or (pid != os.getpid() and _alive(pid)):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += not entry.exists()
    return removed


def _owner_pid(entry: Path, prefix: str) -> int | None:
    if not entry.name.startswith(prefix):
        return None
    pid, sep, _ = entry.name[len(prefix) :].partition("-")
    if not (sep and pid.isdigit()):
        return None
    try:
        info = entry.lstat()  # never follows a symlink
    except OSError:
        return None
    return int(pid) if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
