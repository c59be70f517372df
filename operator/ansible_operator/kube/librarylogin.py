"""Logins only the `kubernetes` package can read: exec plugins and auth providers.

Where this sits: kube/kubeconfig.py hands a kubeconfig whose user has an `exec`
plugin or an `auth-provider` (oidc, gcp, azure) to `load()`; tests wrap the
Configuration of their own kubernetes client in a `LibraryLogin`. The package is
imported here, when such a login is loaded, never at start-up otherwise.

Key material stays off the disk, as for the logins we read ourselves
(kube/login.py): the library writes a kubeconfig's embedded files, and an exec
plugin's certificate, into a private directory of ours (0700,
`ansible-operator-login-<pid>-*` in the temp dir); right after loading, each
file's bytes move into a memory file and the Configuration names that instead.
The directory is removed at once, so a key is on disk only for the milliseconds
of a load, inside a directory that the next start removes if the process died in
between (`login.sweep_stale_dirs`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ansible_operator.kube.login import LOGIN_DIR_PREFIX, into_memory

__all__ = ["LibraryLogin", "load"]

_FILE_ATTRIBUTES = ("ssl_ca_cert", "cert_file", "key_file")


class LibraryLogin:
    """A `Login` (kube/login.py) read from a `kubernetes.client.Configuration`.

    Every field is read when asked for: the library's refresh hook, which runs
    when the Authorization header is asked for, may replace the token and an exec
    plugin's certificate files.
    """

    def __init__(self, configuration: Any) -> None:
        self.configuration = configuration

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    @property
    def verify_ssl(self) -> bool:
        return bool(self.configuration.verify_ssl)

    @property
    def ssl_ca_cert(self) -> str | None:
        return self.configuration.ssl_ca_cert or None

    @property
    def cert_file(self) -> str | None:
        return self.configuration.cert_file or None

    @property
    def key_file(self) -> str | None:
        return self.configuration.key_file or None

    @property
    def tls_server_name(self) -> str | None:
        return self.configuration.tls_server_name or None

    @property
    def proxy(self) -> str | None:
        return self.configuration.proxy or None

    def authorization(self) -> str | None:
        # The key under either name the library uses; this runs its refresh hook.
        cfg = self.configuration
        bearer = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        if bearer:
            return str(bearer)
        if cfg.username or cfg.password:
            return str(cfg.get_basic_auth_token())
        return None


def load(path: str) -> LibraryLogin:
    """The login of kubeconfig `path` (its current context), read by the library,
    with the files it writes held in memory only."""
    from kubernetes import client, config  # noqa: PLC0415 - see the module docstring

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
    return LibraryLogin(configuration)


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
            written = Path(value)
            moved[value] = into_memory(written.read_bytes(), written.name)
            written.unlink()
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


def _forget_library_records(scratch: Path) -> None:
    """The library remembers the files it wrote (to reuse and delete them at exit);
    those under `scratch` are gone, and a later load must write them anew."""
    from kubernetes.config import kube_config  # noqa: PLC0415 - see the module docstring

    records: Any = getattr(kube_config, "_temp_files", None)
    if isinstance(records, dict):
        for key, name in list(records.items()):
            if isinstance(name, str) and Path(name).parent == scratch:
                del records[key]
