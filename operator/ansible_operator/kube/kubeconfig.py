"""Reading a kubeconfig, or the pod's service account, into a `Login` (kube/login.py).

Where this sits: `kube.client.load_login` calls `from_kubeconfig(path)` or
`in_cluster()` once at start-up (the `run` and `plan` commands).

Why not the `kubernetes` package's loader: importing it loads the whole package
(its API client, pydantic, requests, oauthlib, websocket: some 280 modules and
20 MiB, a quarter of the idle operator), only to read a YAML file. We read the
current context's cluster and user as that loader does (docs/benchmarks.md,
"Start-up and resting size"): `server`, `certificate-authority[-data]`,
`insecure-skip-tls-verify`, `tls-server-name`, `proxy-url`; a user's `token` or
`tokenFile`, `client-certificate[-data]` and `client-key[-data]`, or `username`
and `password`. A `-data` field wins over its file, files are relative to the
kubeconfig's directory, and TLS files count only for an https server; embedded
data goes into memory files (kube/login.py). A user with an `exec` plugin or an
`auth-provider` (oidc, gcp, azure: commands to run, tokens to refresh) is read
by the `kubernetes` package after all (kube/librarylogin.py), so those
kubeconfigs work exactly as before.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ansible_operator.errors import ConfigError
from ansible_operator.kube import librarylogin
from ansible_operator.kube.login import Login, StaticLogin, TokenFile, into_memory

__all__ = ["SERVICE_ACCOUNT_DIR", "from_kubeconfig", "in_cluster"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_LIBRARY_ONLY = ("exec", "auth-provider")


def from_kubeconfig(path: str) -> Login:
    """The login of `path`'s current context."""
    where = f"kubeconfig {path}"
    path = os.path.expanduser(path)
    try:
        with open(path) as handle:
            document = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{where}: {err}") from err
    if not isinstance(document, Mapping):
        raise ConfigError(f"{where}: no configuration found")
    context = _named(document, "contexts", document.get("current-context"), where)
    cluster = _named(document, "clusters", context.get("cluster"), where)
    user: Mapping[str, Any] = {}
    if context.get("user") and document.get("users"):
        user = _named(document, "users", context["user"], where, required=False)
    if any(key in user for key in _LIBRARY_ONLY):
        return librarylogin.load(path)
    # Relative files are found from the kubeconfig's directory, the symlink's if it is one.
    base = Path(os.path.abspath(os.path.dirname(path)))
    return _login(cluster, user, base=base, where=where)


def in_cluster() -> Login:
    """The pod's service account: its token (re-read as it rotates) and CA."""
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    if not host or not port:
        raise ConfigError("in-cluster login: KUBERNETES_SERVICE_HOST/PORT are not set")
    ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    token = TokenFile(str(SERVICE_ACCOUNT_DIR / "token"))
    try:
        if not ca.read_bytes():
            raise ConfigError(f"in-cluster login: {ca} is empty")
    except OSError as err:
        raise ConfigError(f"in-cluster login: {err}") from err
    joined = f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"
    return StaticLogin(host=f"https://{joined}", ssl_ca_cert=str(ca), token_file=token)


def _named(
    document: Mapping[str, Any], section: str, name: object, where: str, *, required: bool = True
) -> Mapping[str, Any]:
    """The inner mapping of the entry `name` in `section` (e.g. a context's `context`)."""
    inner = section[:-1]  # contexts -> context
    for entry in document.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(inner)
            if isinstance(value, Mapping):
                return value
            break
    if not required:
        return {}
    raise ConfigError(f"{where}: no {inner} named {name!r}")


def _login(
    cluster: Mapping[str, Any], user: Mapping[str, Any], *, base: Path, where: str
) -> StaticLogin:
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{where}: the cluster has no server")
    host = server.rstrip("/")
    ca = cert = key = None
    if host.startswith("https"):
        ca = _file_or_data(cluster, "certificate-authority", base, where)
        cert = _file_or_data(user, "client-certificate", base, where)
        key = _file_or_data(user, "client-key", base, where)
    return StaticLogin(
        host=host,
        verify_ssl=not cluster.get("insecure-skip-tls-verify", False),
        ssl_ca_cert=ca,
        cert_file=cert,
        key_file=key,
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        **_credentials(user, base, where),
    )


def _credentials(user: Mapping[str, Any], base: Path, where: str) -> dict[str, Any]:
    """A token wins over a token file, which wins over a username and password."""
    if user.get("token"):
        return {"header": f"Bearer {user['token']}"}
    if user.get("tokenFile"):
        path = os.path.normpath(base / str(user["tokenFile"]))
        try:
            return {"token_file": TokenFile(path)}
        except ConfigError as err:
            raise ConfigError(f"{where}: tokenFile: {err}") from err
    if "username" in user and "password" in user:
        pair = f"{user['username']}:{user['password']}".encode()
        return {"header": f"Basic {base64.b64encode(pair).decode()}"}
    return {}


def _file_or_data(section: Mapping[str, Any], name: str, base: Path, where: str) -> str | None:
    """The path of `name`'s file: `<name>-data` in memory, else `<name>` (a path)."""
    data = section.get(f"{name}-data")
    if data:
        try:
            decoded = base64.b64decode(str(data), validate=False)
        except (binascii.Error, ValueError) as err:
            raise ConfigError(f"{where}: {name}-data: {err}") from err
        return into_memory(decoded, name)
    if section.get(name):
        path = os.path.normpath(base / str(section[name]))
        if not os.path.isfile(path):
            raise ConfigError(f"{where}: {name}: file does not exist: {path}")
        return path
    return None
