"""The environment's two ways into watches.yaml, both as the Go operator does them.

Used by :func:`ansible_operator.config.watches.load_watches` (called by the
controller at start-up and by `ansible-operator validate`):

* step 2 of the load, :func:`expand_env`: the whole raw file text is expanded
  before any YAML parsing, so comments, quoted strings, keys and Jinja in
  `vars` are all expanded, and a value can even inject YAML structure;
* step 4, per entry: `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>` (or the
  deprecated `WORKER_<KIND>_<GROUP>`) and `ANSIBLE_VERBOSITY_<KIND>_<GROUP>`
  override the flags for one kind (:func:`gvk_max_concurrent_reconciles`,
  :func:`gvk_ansible_verbosity`).

The grammar is Go's `os.Expand`; the mapping is the Go operator's: a defined
variable gives its value (possibly empty), an undefined one gives back the
literal `${NAME}`. Compatibility consequences worth knowing (docs/watches.md):
`$NAME` of an undefined variable comes back as `${NAME}`, and `$$` becomes
`${$}` because `$` is looked up as a one-character variable name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Protocol

from ansible_operator.config import defaults

log = logging.getLogger("ansible_operator.config")

# Characters that form a one-character shell variable name on their own.
_SPECIAL = frozenset("*#$@!?-0123456789")
_ALNUM = frozenset("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _shell_name(rest: str) -> tuple[str, int]:
    """The variable name at the start of `rest` (the text after a `$`) and how much it spans.

    An empty name with a non-zero span is bad syntax to be dropped; an empty
    name with a zero span means the `$` was not a reference at all.
    """
    if rest[0] == "{":
        if len(rest) > 2 and rest[1] in _SPECIAL and rest[2] == "}":
            return rest[1], 3
        close = rest.find("}", 1)
        if close == -1:
            return "", 1  # "${" never closed: drop just those two characters
        if close == 1:
            return "", 2  # "${}"
        return rest[1:close], close + 1
    if rest[0] in _SPECIAL:
        return rest[0], 1
    end = 0
    while end < len(rest) and rest[end] in _ALNUM:
        end += 1
    return rest[:end], end


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """`text` with every `$NAME` / `${NAME}` replaced from `environ`.

    Undefined names are written back as `${NAME}` so that text meant for
    someone else (Jinja, shell snippets in vars) survives untouched when the
    variable does not exist.
    """
    out: list[str] = []
    copied_to = 0
    index = 0
    while index < len(text):
        # A `$` as the very last character is not a reference.
        if text[index] != "$" or index + 1 == len(text):
            index += 1
            continue
        out.append(text[copied_to:index])
        name, span = _shell_name(text[index + 1 :])
        if name:
            value = environ.get(name)
            out.append(value if value is not None else "${" + name + "}")
        elif span == 0:
            out.append("$")
        index += span + 1
        copied_to = index
    out.append(text[copied_to:])
    return "".join(out)


class _HasGroupKind(Protocol):
    @property
    def group(self) -> str: ...

    @property
    def kind(self) -> str: ...


def _go_upper(text: str) -> str:
    # Go upper-cases rune by rune: a letter without a one-rune capital (ß) stays.
    return "".join(upper if len(upper := char.upper()) == 1 else char for char in text)


def gvk_env_var(prefix: str, gvk: _HasGroupKind) -> str:
    """`<PREFIX>_<KIND>_<GROUP>` upper-cased, with only '.' turned into '_'.

    A '-' in the group stays (so the variable cannot be set from most shells),
    and the core group leaves a trailing '_' (`ANSIBLE_VERBOSITY_SECRET_`).
    """
    return _go_upper(f"{prefix}_{gvk.kind}_{gvk.group}".replace(".", "_"))


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _env_int(name: str, text: str, default: int) -> int:
    # strconv.Atoi: ASCII digits with an optional sign, nothing else, int64 range.
    if _GO_INT.fullmatch(text) and -(1 << 63) <= int(text) < (1 << 63):
        return int(text)
    log.warning(
        "environment variable %s=%r is not an integer; using the default %d", name, text, default
    )
    return default


def gvk_max_concurrent_reconciles(
    gvk: _HasGroupKind, *, default: int, environ: Mapping[str, str]
) -> int:
    """Concurrent reconciles for one kind.

    MAX_CONCURRENT_RECONCILES_* when set, else the deprecated WORKER_*, else `default`.
    A set but unparsable MAX_CONCURRENT_RECONCILES_* falls back to `default`,
    not to WORKER_*, and a result of 0 or less also gives `default`.
    """
    name = gvk_env_var("MAX_CONCURRENT_RECONCILES", gvk)
    legacy = gvk_env_var("WORKER", gvk)
    if name in environ:
        value = _env_int(name, environ[name], default)
    elif legacy in environ:
        log.warning("environment variable %s is deprecated, use %s instead", legacy, name)
        value = _env_int(legacy, environ[legacy], default)
    else:
        log.debug("environment variable %s not set; using the default %d", name, default)
        value = default
    if value <= 0:
        log.warning("%d concurrent reconciles is not valid; using the default %d", value, default)
        return default
    return value


def gvk_ansible_verbosity(gvk: _HasGroupKind, *, default: int, environ: Mapping[str, str]) -> int:
    """Ansible verbosity for one kind: ANSIBLE_VERBOSITY_* if an integer in 0..7, else `default`."""
    name = gvk_env_var("ANSIBLE_VERBOSITY", gvk)
    if name not in environ:
        log.debug("environment variable %s not set; using the default %d", name, default)
        return default
    value = _env_int(name, environ[name], default)
    if not defaults.ANSIBLE_VERBOSITY_MIN <= value <= defaults.ANSIBLE_VERBOSITY_MAX:
        log.warning(
            "%s=%d is outside %d..%d; using the default %d",
            name,
            value,
            defaults.ANSIBLE_VERBOSITY_MIN,
            defaults.ANSIBLE_VERBOSITY_MAX,
            default,
        )
        return default
    return value
