"""The operator's own login to the API server, `Login`, with no key material on disk.

Where this sits: `kube.client.load_login` (called once by the `run` and `plan`
commands) builds it from a kubeconfig (kube/kubeconfig.py) or the pod's service
account; `Kube` (kube/client.py) and the API proxy's `Upstream` (kube/upstream.py)
send every request with it, and the controller's kopf login handler turns it into
kopf's connection with `connection_fields()`, so all three share one login.

What a `Login` holds: the server's URL, the TLS settings as file paths (what
urllib3 and kopf's TLS code open), and `authorization()`, the Authorization
header, asked for per request (service-account tokens rotate, exec plugins'
tokens expire). `StaticLogin` is ours; kube/librarylogin.py adapts the
`kubernetes` package's Configuration for the kubeconfigs only it can read (exec
plugins, auth providers).

Why key material lives in memory: the `kubernetes` package writes a
kubeconfig's embedded CA, client certificate and private key to
`$TMPDIR/tmpXXXXXXXX` and deletes them only in an `atexit` handler, which a
SIGKILL or the OOM killer skips: every killed operator left its private key
behind. Here each embedded file's bytes go into an anonymous memory file
(`memfd`) named `/proc/self/fd/<n>`, which TLS code opens like any path and
which lives exactly as long as the process. Without `/proc` (not Linux) the
bytes go to a file in a private directory (0700, `ansible-operator-login-<pid>-*`
in the temp dir) removed at exit, and by the next start if the process died
(`sweep_stale_dirs`).

This module imports nothing outside the standard library (and errors.py): the
lifeline's watchdog (runner/lifeline.py) imports it for `sweep_stale_dirs` and
must start fast.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ansible_operator.errors import ConfigError

__all__ = [
    "LOGIN_DIR_PREFIX",
    "Login",
    "StaticLogin",
    "TokenFile",
    "connection_fields",
    "into_memory",
    "sweep_stale_dirs",
]

LOGIN_DIR_PREFIX = "ansible-operator-login-"
TOKEN_REREAD_SECONDS = 60.0  # as the kubernetes client re-reads a service-account token
_held: list[int] = []  # the memory files' descriptors: open for the process's life
_held_lock = threading.Lock()


class Login(Protocol):
    """What a request to the API server needs; see the module docstring."""

    @property
    def host(self) -> str: ...
    @property
    def verify_ssl(self) -> bool: ...
    @property
    def ssl_ca_cert(self) -> str | None: ...
    @property
    def cert_file(self) -> str | None: ...
    @property
    def key_file(self) -> str | None: ...
    @property
    def tls_server_name(self) -> str | None: ...
    @property
    def proxy(self) -> str | None: ...

    def authorization(self) -> str | None:
        """The Authorization header's value (`Bearer ...`, `Basic ...`); None: none."""


class TokenFile:
    """A token kept in a file that is rewritten as it rotates (a service account's
    projected token, a kubeconfig's `tokenFile`): re-read at most once a minute.

    A missing or empty file fails at construction (start-up); later, a failed
    re-read keeps the token read before (kubelet replaces the file atomically, so
    that is a passing problem) and tries again at the next request.
    """

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._value = self._read()
        if not self._value:
            raise ConfigError(f"token file {path} is empty")
        self._read_at = clock()

    def _read(self) -> str:
        try:
            return Path(self.path).read_text().strip()
        except OSError as err:
            raise ConfigError(f"token file: {err}") from err

    def header(self) -> str:
        with self._lock:
            now = self._clock()
            if now - self._read_at >= TOKEN_REREAD_SECONDS:
                with contextlib.suppress(ConfigError):
                    self._value = self._read() or self._value
                self._read_at = now
            return f"Bearer {self._value}"


@dataclass(frozen=True)
class StaticLogin:
    """A login whose TLS files do not change: a kubeconfig's, or the service account's.

    `authorization` is `header` as it is, or the header of `token_file` (read again
    as the file rotates).
    """

    host: str
    verify_ssl: bool = True
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str | None = None
    proxy: str | None = None
    header: str | None = field(default=None, repr=False)
    token_file: TokenFile | None = field(default=None, repr=False)

    def authorization(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.header()
        return self.header


def connection_fields(login: Login) -> dict[str, Any]:
    """What kopf's `ConnectionInfo` needs, read from `login` (the header is asked for
    again each time, so a rotated token is picked up when kopf logs in again)."""
    header = login.authorization()
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else parts
    return {
        "server": login.host,
        "ca_path": login.ssl_ca_cert,
        "insecure": not login.verify_ssl,
        "username": None,
        "password": None,
        "scheme": scheme,
        "token": token,
        "certificate_path": login.cert_file,
        "private_key_path": login.key_file,
    }


def into_memory(data: bytes, name: str) -> str:
    """A path, valid in this process for its whole life, to a file holding `data`."""
    if not os.path.isdir("/proc/self/fd") or not hasattr(os, "memfd_create"):
        return _keep_until_exit(data, name)
    fd = os.memfd_create(f"ansible-operator-{name}")  # close-on-exec
    try:
        os.write(fd, data)
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    with _held_lock:
        _held.append(fd)
    return f"/proc/self/fd/{fd}"


def _keep_until_exit(data: bytes, name: str) -> str:
    """Without memory files: a file in a private directory of its own, removed at exit."""
    keeper = Path(tempfile.mkdtemp(prefix=f"{LOGIN_DIR_PREFIX}{os.getpid()}-"))  # 0700
    target = keeper / name
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    atexit.register(shutil.rmtree, keeper, True)
    return str(target)


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
