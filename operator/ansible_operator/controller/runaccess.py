"""How one Ansible run reaches Kubernetes: its own token and kubeconfig for the proxy.

The reconciler opens `RunAccess.kubeconfig_for(...)` around each run. It issues
a fresh bearer token bound to the CR (so whatever the run writes is attributed
to that CR, whatever else runs concurrently), writes a kubeconfig for the
operator's API proxy into a private directory outside the run's artifacts,
and on exit revokes the token and deletes the file. The run never sees the
operator's own credentials.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ansible_operator.proxy import Owner, RunCredentials, write_kubeconfig


class RunAccess:
    def __init__(self, *, credentials: RunCredentials, proxy_url: str) -> None:
        self.credentials = credentials
        self.proxy_url = proxy_url
        # 0700, removed with the process's temp files; never inside artifacts.
        self._dir = Path(tempfile.mkdtemp(prefix="ansible-operator-kubeconfigs-"))

    @contextlib.contextmanager
    def kubeconfig_for(self, obj: Mapping[str, Any], *, controller: str) -> Iterator[Path]:
        meta = obj["metadata"]
        owner = Owner(
            api_version=str(obj["apiVersion"]),
            kind=str(obj["kind"]),
            name=str(meta["name"]),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta["uid"]),
            controller=controller,
        )
        with self.credentials.issue(owner) as token:
            handle, name = tempfile.mkstemp(dir=self._dir, prefix="run-", suffix=".kubeconfig")
            os.close(handle)
            path = Path(name)
            try:
                write_kubeconfig(
                    path, server=self.proxy_url, token=token.token, namespace=owner.namespace
                )
                yield path
            finally:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for leftover in self._dir.iterdir():
                leftover.unlink()
            self._dir.rmdir()
