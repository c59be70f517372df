"""How one Ansible run reaches Kubernetes: its own token and kubeconfig for the proxy.

The reconciler opens `RunAccess.kubeconfig_for(...)` around each run. It issues
a fresh bearer token bound to the CR (so whatever the run writes is attributed
to that CR, whatever else runs concurrently), writes a kubeconfig for the
operator's API proxy into a private directory outside the run's artifacts,
and on exit revokes the token and deletes the file. The run never sees the
operator's own credentials.

The directory is named after the operator's pid. An operator that was killed
(SIGKILL, OOM) cannot remove its own, so the next one to start on the machine
removes those whose process is gone: its tokens died with it, and nothing is
left behind for good.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ansible_operator.compat.notices import RunNotes
from ansible_operator.kube import login
from ansible_operator.proxy import Owner, RunCredentials, write_kubeconfig

log = logging.getLogger("ansible_operator.access")

DIR_PREFIX = "ansible-operator-kubeconfigs-"


class RunAccess:
    def __init__(
        self,
        *,
        credentials: RunCredentials,
        proxy_url: str,
        sweep: bool = True,
        parent: Path | None = None,
    ) -> None:
        """`sweep=False` for a second RunAccess in the same process (plans, drift checks):
        the sweep takes a directory with our own pid for a dead predecessor's. `parent`:
        the operator's private directory (runner/lifeline.py), which its watchdog
        removes whatever ends the operator; else the temp dir."""
        self.credentials = credentials
        self.proxy_url = proxy_url
        # 0700, never inside artifacts; removed by close().
        removed = sweep_stale(Path(tempfile.gettempdir())) if sweep else 0
        if removed:
            log.info("Removed %d kubeconfig directories of operators that were killed", removed)
        self._dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=parent))

    @contextlib.contextmanager
    def kubeconfig_for(
        self,
        obj: Mapping[str, Any],
        *,
        controller: str,
        read_only: bool = False,
        notes: RunNotes | None = None,
    ) -> Iterator[Path]:
        """A kubeconfig for one run of `obj`, valid until the block ends.

        `read_only` (plans): the proxy sends the run's writes as
        server-side dry runs (proxy.readonly). `notes`: where the proxy notes what
        the 2.18 compatibility mode changed in the run's requests (proxy.screen).
        """
        meta = obj["metadata"]
        owner = Owner(
            api_version=str(obj["apiVersion"]),
            kind=str(obj["kind"]),
            name=str(meta["name"]),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta["uid"]),
            controller=controller,
            # The reconciler runs the finalizer exactly when the CR is being deleted.
            finalizing=bool(meta.get("deletionTimestamp")),
            read_only=read_only,
            notes=notes,
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


def sweep_stale(parent: Path) -> int:
    """Remove the kubeconfig directories in `parent` left by operators that died
    (before this process makes its own); returns how many were removed."""
    return login.sweep_stale_dirs(parent, DIR_PREFIX)
