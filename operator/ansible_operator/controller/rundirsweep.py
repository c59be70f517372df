"""Remove the runner directories of custom resources that no longer exist.

Where this sits: controller/manager.py calls `start_sweep()` once per process,
after the watches start; it lists each watched kind once in a daemon thread and
removes (runner.inputdir.remove_cr_dir) the private data directory of every
custom resource that is gone.

Why: a resource's directory holds `env/extravars`, i.e. the resource's content,
and its run artifacts. It is removed when its finalizer succeeds
(controller/reconciler.py) and when a reconcile finds the resource gone; a
resource deleted while no operator ran, or an operator killed right after a
finalizer, left it for good (docs/runner.md promises removal "when the CR is
gone"). So at start-up: every directory of a watched kind, in a watched
namespace, whose resource the API server does not list is removed, unless it
changed after the list began (a resource created since) or a run holds its
scratch directory (another operator sharing the runner root). A kind the API
server does not serve (CRD absent) is left alone: its resources may come back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from ansible_operator.config.watches import Watch
from ansible_operator.errors import KubeUnavailable
from ansible_operator.kube.client import ApiError, KubeApi, ResourceInfo
from ansible_operator.runner import inputdir

__all__ = ["remove_gone", "start_sweep"]

log = logging.getLogger("ansible_operator.rundirsweep")


def start_sweep(
    kube: KubeApi, watches: Sequence[Watch], *, root: Path, namespaces: Sequence[str]
) -> threading.Thread:
    """`remove_gone` in a daemon thread (a fleet's list must not delay start-up)."""

    def sweep() -> None:
        try:
            removed = remove_gone(kube, watches, root=root, namespaces=namespaces)
        except (ApiError, KubeUnavailable, OSError) as error:
            log.warning("Runner directories of deleted resources not swept: %s", str(error))
            return
        if removed:
            log.info("Removed the runner directories of %d deleted resources", removed)

    thread = threading.Thread(target=sweep, name="rundir-sweep", daemon=True)
    thread.start()
    return thread


def remove_gone(
    kube: KubeApi, watches: Iterable[Watch], *, root: Path, namespaces: Sequence[str]
) -> int:
    """Remove the directories of watched resources the API server does not list;
    returns how many were removed."""
    removed = 0
    seen: set[tuple[str, str, str]] = set()
    for watch in watches:
        gvk = watch.gvk
        if (gvk.group, gvk.version, gvk.kind) in seen:
            continue
        seen.add((gvk.group, gvk.version, gvk.kind))
        try:
            res = kube.resource(group=gvk.group, version=gvk.version, kind=gvk.kind)
        except ApiError:
            continue  # not served now (no CRD): its resources may come back
        removed += _sweep_kind(kube, res, root=root, namespaces=namespaces)
    return removed


def _sweep_kind(kube: KubeApi, res: ResourceInfo, *, root: Path, namespaces: Sequence[str]) -> int:
    began = time.time()
    scopes = list(namespaces) if namespaces and res.namespaced else [""]
    existing: set[tuple[str, str]] = set()
    for scope in scopes:
        existing |= kube.list_names(res, namespace=scope)
    removed = 0
    for namespace, name, directory in _cr_dirs(root, res):
        if res.namespaced and namespaces and namespace not in namespaces:
            continue  # another operator's namespace, maybe
        # A second of margin: file times come from a coarser clock than time.time().
        if (namespace, name) in existing or _changed_since(directory, began - 1.0):
            continue
        if inputdir.remove_cr_dir(
            root=root,
            group=res.group,
            version=res.version,
            kind=res.kind,
            namespace=namespace,
            name=name,
            unless_running=True,
        ):
            removed += 1
    return removed


def _cr_dirs(root: Path, res: ResourceInfo) -> list[tuple[str, str, Path]]:
    """(namespace, name, directory) of every resource directory of a kind."""
    kind_dir = inputdir.cr_dir(
        root=root, group=res.group, version=res.version, kind=res.kind, namespace="", name="x"
    ).parent
    found: list[tuple[str, str, Path]] = []
    for entry in _subdirs(kind_dir):
        if not res.namespaced:
            found.append(("", entry.name, entry))
            continue
        found += [(entry.name, cr.name, cr) for cr in _subdirs(entry)]
    return found


def _subdirs(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def _changed_since(directory: Path, moment: float) -> bool:
    """Did a run touch it after `moment` (its own, env/ or artifacts/ changed)?"""
    for path in (directory, directory / "env", directory / "artifacts"):
        try:
            if path.stat().st_mtime >= moment:
                return True
        except OSError:
            continue
    return False
