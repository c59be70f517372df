"""The 2.18-compatibility mode: whether it is on, and what it puts into every run's environment.

Where it sits: `ansible-operator run` (controller.manager) and `ansible-operator plan`
call `resolve()` with the `--ansible-compat` flag's value (config.options; default
$ANSIBLE_OPERATOR_ANSIBLE_COMPAT, else "2.18") and then `apply()` once at start-up,
before the warm servers start: the settings go into the operator's own environment,
which every run inherits, cold or warm (the warm servers key their primed children
by it, warm/configkey.py), reconcile, drift check or plan alike. The API proxy asks
`CompatMode.restores` whether to send numbers in string fields as text
(compat.stringfields).

On the 2.18 line there is nothing to restore: the mode changes no setting and only
keeps Ansible's own deprecations visible (compat.notices). On 2.19 and later it sets

* ANSIBLE_ALLOW_BROKEN_CONDITIONALS=true: ansible-core's own switch (it says it goes
  away in 2.23): a non-boolean `when`/`assert` is taken for its truth, as on 2.18,
  with a deprecation;
* ANSIBLE_LOOKUP_PLUGINS=<our lookup dir>:<its value or Ansible's default>: the
  short name `template` gives '' for a template that renders nothing, as on 2.18.

A value the operator's environment already gives ANSIBLE_ALLOW_BROKEN_CONDITIONALS
is kept (the user chose it).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from ansible_operator.config import defaults

__all__ = ["LOOKUP_PLUGINS_DIR", "CompatMode", "apply", "installed_line", "resolve"]

log = logging.getLogger("ansible_operator.compat")

LOOKUP_PLUGINS_DIR = Path(__file__).parent / "ansible-plugins" / "lookup"
BROKEN_CONDITIONALS_ENV = "ANSIBLE_ALLOW_BROKEN_CONDITIONALS"
LOOKUP_PLUGINS_ENV = "ANSIBLE_LOOKUP_PLUGINS"
_TAGGED_LINE = (2, 19)  # data tagging: types kept, conditionals strict


def installed_line() -> tuple[int, int] | None:
    """ansible-core's (major, minor), read from its metadata (no Ansible import)."""
    try:
        version = importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


@dataclass(frozen=True, slots=True)
class CompatMode:
    enabled: bool
    line: tuple[int, int] | None
    """The installed ansible-core line; None if it cannot be read."""

    @property
    def restores(self) -> bool:
        """On, on a line that dropped 2.18's behaviours: settings and proxy act."""
        return self.enabled and self.line is not None and self.line >= _TAGGED_LINE

    def describe(self) -> str:
        line = ".".join(map(str, self.line)) if self.line else "unknown"
        if not self.enabled:
            return f"Ansible 2.18 compatibility mode is off (ansible-core {line})"
        if not self.restores:
            return (
                f"Ansible 2.18 compatibility mode is on (ansible-core {line}: nothing to "
                "restore; Ansible's deprecations of 2.18 behaviours are reported)"
            )
        return (
            f"Ansible 2.18 compatibility mode is on (ansible-core {line}): non-boolean "
            "conditionals, numbers in string fields and empty template lookups behave as "
            "on 2.18, each reported as a deprecation (docs/porting.md); "
            "--ansible-compat=off turns it off"
        )


def resolve(enabled: bool) -> CompatMode:
    return CompatMode(enabled=enabled, line=installed_line())


def apply(mode: CompatMode, environ: MutableMapping[str, str]) -> None:
    """Put the mode's settings into `environ` (the operator's, inherited by every run)."""
    log.info(mode.describe())
    if not mode.restores:
        return
    if environ.get(BROKEN_CONDITIONALS_ENV, "").strip():
        log.info(
            "Keeping %s=%s from the environment",
            BROKEN_CONDITIONALS_ENV,
            environ[BROKEN_CONDITIONALS_ENV],
        )
    else:
        environ[BROKEN_CONDITIONALS_ENV] = "true"
    current = environ.get(LOOKUP_PLUGINS_ENV, "").strip() or defaults.ANSIBLE_LOOKUP_PLUGINS_PATH
    paths = current.split(":")
    if str(LOOKUP_PLUGINS_DIR) not in paths:
        environ[LOOKUP_PLUGINS_ENV] = ":".join([str(LOOKUP_PLUGINS_DIR), *paths])
