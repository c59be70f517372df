"""Which custom resources need a run when the operator starts: the restart rule.

Where it sits: controller/wiring.py builds one `RestartRule` per watch at start-up;
the primary watch (controller/watching.py) asks `unchanged(body)` for every object
of kopf's initial listing, and the reconciler (controller/reconciler.py) writes
`record(generation)` into the status together with each Successful condition.

The Go operator runs every CR's role again after each restart of the operator: with
thousands of CRs, hours of work that changes nothing. Here a CR whose last
reconcile succeeded, covered its current generation, and ran the same content
with the same settings is not run at once; its next run comes with the regular
reconcile period, spread by `delay()` so that the periodic runs of a fleet do not
all fall in the same minute. Everything else runs at once, new and changed CRs
first: a new CR, a changed spec (generation), a changed role or playbook (a new
operator image), changed watch settings or `--ansible-args`, a CR whose last run
failed, or one whose status holds no record (reconciled by another operator, or
its CRD's status schema pruned the field). `--reconcile-all-at-start` restores the
Go behaviour.

The record is `status.reconciledDigest`: `<generation>:<16 hex digits>`, the hash of

* every file under the watch's role directory (role mode), or the playbook and the
  YAML files beside it plus the `roles/` directories next to its directory and one
  level up (playbook mode), and the finalizer's role or playbook the same way;
  hidden files and directories are skipped, and at most `_MAX_FILES` files are read;
* the watch's settings (config/watchmodel.py: vars, flags, selector...) and the
  `--ansible-args` text;
* the operator's version and ansible-core's.

Collections installed elsewhere are not covered: a change of those alone is a
reason to restart with `--reconcile-all-at-start`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ansible_operator import __version__
from ansible_operator.config.watches import Watch
from ansible_operator.errors import BadAnnotation
from ansible_operator.launch import crannotations

__all__ = ["DIGEST_KEY", "RestartRule"]

DIGEST_KEY = "reconciledDigest"
"""The status key that records what the last successful reconcile ran."""
_MAX_FILES = 5000
_JITTER = 0.5  # a periodic run comes between (1 - _JITTER) and 1 period after start


class RestartRule:
    """The restart rule of one watch; see the module docstring."""

    def __init__(
        self,
        watch: Watch,
        *,
        ansible_args: str,
        period: float,
        rerun_all: bool = False,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.period = period
        self.rerun_all = rerun_all
        self._content = _content_digest(watch, ansible_args)
        self._rand = rand

    def record(self, generation: object) -> str:
        """What a successful reconcile of a CR at `generation` records."""
        return f"{generation}:{self._content}"

    def unchanged(self, body: Mapping[str, Any]) -> bool:
        """Did the CR's last reconcile succeed with what would run now?"""
        if self.rerun_all or self._period(body) <= 0:
            return False
        status = body.get("status")
        if not isinstance(status, Mapping):
            return False
        generation = (body.get("metadata") or {}).get("generation")
        if generation is None or status.get(DIGEST_KEY) != self.record(generation):
            return False
        return _condition_true(status, "Successful") and not _condition_true(status, "Failure")

    def spec_changed(self, body: Mapping[str, Any]) -> bool:
        """Is the CR's spec newer than its last recorded reconcile (or never recorded)?
        Such CRs go first at start-up, before those whose role or last run changed."""
        status = body.get("status")
        recorded = status.get(DIGEST_KEY) if isinstance(status, Mapping) else None
        generation = (body.get("metadata") or {}).get("generation")
        if not isinstance(recorded, str):
            return True
        return recorded.partition(":")[0] != str(generation)

    def delay(self, body: Mapping[str, Any]) -> float:
        """When an unchanged CR's next run comes, in seconds from now."""
        return self._period(body) * (1.0 - _JITTER * self._rand())

    def _period(self, body: Mapping[str, Any]) -> float:
        """The CR's reconcile period: its annotation's, else the watch's; 0 (run now)
        for an annotation that cannot be read, which the reconcile then reports."""
        try:
            annotated = crannotations.reconcile_period(body)
        except BadAnnotation:
            return 0.0
        return self.period if annotated is None else annotated


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True"
        for c in conditions
    )


def _content_digest(watch: Watch, ansible_args: str) -> str:
    digest = hashlib.sha256()
    for part in (__version__, _version("ansible-core"), ansible_args, repr(watch)):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    paths: list[Path | None] = [watch.role, watch.playbook]
    if watch.finalizer is not None:
        paths += [watch.finalizer.role, watch.finalizer.playbook]
    for path in _files(p for p in paths if p is not None):
        digest.update(str(path).encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\0unreadable")
    return digest.hexdigest()[:16]


def _files(targets: Iterator[Path]) -> list[Path]:
    """The files a role or playbook is made of (module docstring), sorted, bounded."""
    found: set[Path] = set()
    for target in targets:
        if target.is_dir():
            found.update(_walk(target))
            continue
        found.add(target)
        folder = target.parent
        found.update(p for p in folder.glob("*.y*ml") if p.is_file())
        for roles in (folder / "roles", folder.parent / "roles"):
            if roles.is_dir():
                found.update(_walk(roles))
    return sorted(found)[:_MAX_FILES]


def _walk(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_file():
            yield path


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
