"""Where the roles and playbooks named in watches.yaml are found, exactly as the Go operator looks.

Step 4 of :func:`ansible_operator.config.watches.load_watches` (controller
start-up, `ansible-operator validate`) calls :func:`find_target` for an
entry's `playbook`/`role` and for its finalizer's. A playbook is the written
path, relative ones taken from the working directory. A role is looked for in
order: collection roles for `ns.coll.role` names, every ANSIBLE_ROLES_PATH
entry (with and without a `roles/` level), `<cwd>/roles/<role>`, and finally
the written value itself relative to the working directory. Whether the
winner exists is judged later, by validation, from :attr:`Target.found`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible_operator.config import defaults

log = logging.getLogger("ansible_operator.config")


@dataclass(frozen=True)
class Target:
    """A playbook or role as written (`key` says which) and where it was found, if anywhere."""

    key: str
    written: str
    found: Path | None
    searched: tuple[Path, ...]

    @property
    def is_playbook(self) -> bool:
        return self.key.endswith("playbook")

    def problem(self) -> str:
        """Why validation refuses it; "<key>: " + this is the Go operator's wording."""
        # Go shows a role as written and a playbook as the joined path.
        shown = str(self.searched[0]) if self.is_playbook else self.written
        if len(self.searched) > 1:
            return f"{shown} was not found (looked in {', '.join(map(str, self.searched))})"
        return f"{shown} was not found"


def _clean(path: str) -> Path:
    # Go's filepath.Join cleans lexically ("a/../b" is "b"), and so do we, so
    # that the same candidates exist or not as for the Go operator.
    text = os.path.normpath(path)
    return Path("/" + text.lstrip("/") if text.startswith("//") else text)


def _exists(path: Path) -> bool:
    # os.Stat semantics: any failure (missing, no permission, bad name) is "not found".
    try:
        path.stat()
    except (OSError, ValueError):
        return False
    return True


def _collection_bases(environ: Mapping[str, str]) -> list[str]:
    configured = environ.get("ANSIBLE_COLLECTIONS_PATH", "")
    if configured:
        return configured.split(":")
    bases = [defaults.SYSTEM_COLLECTIONS_PATH]
    home = environ.get("HOME", "")
    if home:
        bases.append(os.path.join(home, defaults.HOME_COLLECTIONS_SUBDIR))
    return bases


def role_candidates(role: str, *, cwd: Path, environ: Mapping[str, str]) -> list[Path]:
    """Where a role named `role` is looked for, in order; the first that exists wins.

    An absolute path is the only candidate. Otherwise: for `ns.coll.role`, each
    collections base; then each ANSIBLE_ROLES_PATH entry, with and without a
    `roles/` level; then `<cwd>/roles/<role>`. Relative bases are taken from `cwd`.
    """
    if os.path.isabs(role):
        return [Path(role)]
    candidates: list[Path] = []
    parts = role.split(".")
    if len(parts) == 3:
        namespace, collection, name = parts
        for base in _collection_bases(environ):
            tail = os.path.join("ansible_collections", namespace, collection, "roles", name)
            candidates.append(_clean(os.path.join(cwd, base, tail)))
    roles_path = environ.get("ANSIBLE_ROLES_PATH", "")
    for base in roles_path.split(":") if roles_path else []:
        candidates.append(_clean(os.path.join(cwd, base, role)))
        candidates.append(_clean(os.path.join(cwd, base, "roles", role)))
    candidates.append(_clean(os.path.join(cwd, "roles", role)))
    return candidates


def find_target(
    state: Mapping[str, Any], *, prefix: str, label: str, cwd: Path, environ: Mapping[str, str]
) -> Target | None:
    """The playbook (which wins) or role of a decoded entry or finalizer; None when neither is set.

    `prefix` is "" or "finalizer." (for keys in messages); `label` names the
    entry in the warning logged when both are set.
    """
    playbook, role = state.get("playbook") or "", state.get("role") or ""
    if playbook:
        if role:
            log.warning(
                "%s: both %splaybook and %srole are set; the playbook is used and the role "
                "ignored, as the Go operator does",
                label,
                prefix,
                prefix,
            )
        path = Path(playbook) if os.path.isabs(playbook) else _clean(os.path.join(cwd, playbook))
        return Target(prefix + "playbook", playbook, path if _exists(path) else None, (path,))
    if not role:
        return None
    searched = role_candidates(role, cwd=cwd, environ=environ)
    # Go keeps the written value when no candidate exists and later stats it
    # from the working directory, so `role: roles/foo` works too.
    fallback = _clean(os.path.join(cwd, role))
    if fallback not in searched:
        searched.append(fallback)
    found = next((path for path in searched if _exists(path)), None)
    return Target(prefix + "role", role, found, tuple(searched))
