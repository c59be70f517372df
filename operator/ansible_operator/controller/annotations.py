"""Per-CR annotations that tune one reconcile, as the Go operator reads them.

Called by the reconciler at the start of every reconcile. All values are strings:
`ansible.sdk.operatorframework.io/reconcile-period` (a Go duration; a bad value
is an error the user sees in status), `.../verbosity` and
`.../max-runner-artifacts` (integers; a bad value is logged and ignored).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ansible_operator.config.durations import DurationError, parse_go_duration
from ansible_operator.errors import Permanent

PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = PREFIX + "reconcile-period"
VERBOSITY = PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = PREFIX + "max-runner-artifacts"


class BadAnnotation(Permanent):
    """An annotation the user must fix; the message is shown in the CR's status."""


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def reconcile_period(obj: Mapping[str, Any]) -> float | None:
    """The annotation's period in seconds, None when absent; BadAnnotation when unparsable."""
    raw = _annotations(obj).get(RECONCILE_PERIOD)
    if raw is None:
        return None
    try:
        return parse_go_duration(str(raw))
    except DurationError as err:
        raise BadAnnotation(f"Unable to parse reconcile period annotation: {err}") from err


def _int(obj: Mapping[str, Any], key: str, log: logging.LoggerAdapter[Any]) -> int | None:
    raw = _annotations(obj).get(key)
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        log.warning("ignoring annotation %s=%r: not an integer", key, raw)
        return None


def verbosity(obj: Mapping[str, Any], log: logging.LoggerAdapter[Any]) -> int | None:
    return _int(obj, VERBOSITY, log)


def max_runner_artifacts(obj: Mapping[str, Any], log: logging.LoggerAdapter[Any]) -> int | None:
    return _int(obj, MAX_RUNNER_ARTIFACTS, log)
