"""Per-run identity: who is asking the API proxy, and the kubeconfig that says so.

Where it sits in the flow::

    reconciler (per run)  --issue(Owner)-->  RunCredentials  --RunToken-->  write_kubeconfig()
                                                   ^                            |
    ApiProxy (per request) --lookup(bearer token)--+        Ansible run (K8S_AUTH_KUBECONFIG)

The reconciler issues one token per Ansible run, writes a kubeconfig that
points the run's kubernetes.core modules at the proxy with that token, and
revokes the token when the run ends (`with credentials.issue(owner) as token:`).
The proxy looks every request's bearer token up to learn which custom
resource the request is made for.

Why not the Go operator's scheme: it put the owner, base64-encoded,
into the proxy URL's user name, unauthenticated. Any process in the pod could
pose as any CR, and the shared URL let concurrent runs' objects be attributed
to the wrong CR (AOP #136). Here the token is 256 random bits known only to the
run it was issued for, the proxy refuses requests without a live one, and the
owner comes from the registry, never from the request. The run never sees the
operator's own credentials: the proxy adds those upstream.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from ansible_operator.compat.notices import RunNotes

# 32 bytes = 256 bits of randomness; token_urlsafe encodes them in 43 characters.
_TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class Owner:
    """The custom resource a run reconciles: what its objects are owned by."""

    api_version: str
    kind: str
    name: str
    namespace: str  # "" if the custom resource is cluster-scoped
    uid: str
    controller: str  # the primary watch's controller name, e.g. "memcached-v1alpha1-controller"
    # A finalizer run's CR is going away: nothing that run creates is made
    # its dependent, or the garbage collector would delete it right after.
    finalizing: bool = False
    # A plan (proxy.readonly): every write is sent as a server-side
    # dry run and requests that cannot be dry-run are refused.
    read_only: bool = False
    # Where the proxy notes what the 2.18 compatibility mode changed in this run's
    # requests (proxy.screen); the run's notice observer reports them (compat.notices).
    notes: RunNotes | None = field(default=None, compare=False, repr=False)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def cluster_scoped(self) -> bool:
        return not self.namespace


def _digest(token: str) -> bytes:
    # The registry is keyed by a hash of the token, so a dict lookup's timing
    # says nothing about the secret itself.
    return hashlib.sha256(token.encode()).digest()


class RunToken:
    """A live token for one run; as a context manager it revokes itself on exit."""

    def __init__(self, registry: RunCredentials, token: str, owner: Owner) -> None:
        self._registry = registry
        self.token = token
        self.owner = owner

    def revoke(self) -> None:
        self._registry.revoke(self.token)

    def __enter__(self) -> RunToken:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.revoke()

    def __repr__(self) -> str:
        # Never print the secret itself (logs, tracebacks).
        return f"RunToken(owner={self.owner!r})"


class RunCredentials:
    """Thread-safe registry of live run tokens."""

    def __init__(self) -> None:
        self._owners: dict[bytes, tuple[str, Owner]] = {}
        self._lock = threading.Lock()

    def issue(self, owner: Owner) -> RunToken:
        """A fresh random token that identifies `owner` until revoked."""
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        with self._lock:
            self._owners[_digest(token)] = (token, owner)
        return RunToken(self, token, owner)

    def lookup(self, token: str) -> Owner | None:
        """The owner a live token was issued for; None for unknown or revoked tokens."""
        if not token:
            return None
        with self._lock:
            found = self._owners.get(_digest(token))
        if found is None or not hmac.compare_digest(found[0], token):
            return None
        return found[1]

    def revoke(self, token: str) -> None:
        """Forget `token`; later requests with it get 401. Revoking twice is harmless."""
        with self._lock:
            self._owners.pop(_digest(token), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._owners)


def kubeconfig_document(*, server: str, token: str, namespace: str) -> dict[str, Any]:
    """The kubeconfig a run uses: the proxy, its bearer token, the CR's namespace."""
    context: dict[str, Any] = {"cluster": "proxy-server", "user": "run"}
    if namespace:
        # Modules that omit `namespace` then write into the CR's namespace, as
        # with the Go operator's context.
        context["namespace"] = namespace
    context_name = f"{namespace}/proxy-server" if namespace else "proxy-server"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "proxy-server", "cluster": {"server": server}}],
        "users": [{"name": "run", "user": {"token": token}}],
        "contexts": [{"name": context_name, "context": context}],
        "current-context": context_name,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str], *, server: str, token: str, namespace: str
) -> Path:
    """Write the run's kubeconfig to `path`, readable by this user only (0600)."""
    target = Path(path)
    text = yaml.safe_dump(
        kubeconfig_document(server=server, token=token, namespace=namespace), sort_keys=False
    )
    # Created 0600 from the start (no window in which another user could read
    # the token); fchmod also tightens a file that already existed.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)
    return target
