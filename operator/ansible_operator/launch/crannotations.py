"""Per-CR annotations that tune one reconcile, as the Go operator reads them.

Called by the reconciler at the start of every reconcile. All values are strings:
`ansible.sdk.operatorframework.io/reconcile-period` (a Go duration; a bad value
is an error the user sees in status), `.../verbosity` and
`.../max-runner-artifacts` (integers; a bad value is logged and ignored).
Ours (docs/plan.md), read by the reconciler and by controller.driftchecks:
`.../drift-check-period` (a Go duration) and `.../observe-only` (a Go bool);
a bad value is reported like a bad reconcile period: the role does not run
for that CR (observe-only might have been meant) and no drift check runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ansible_operator.config.durations import DurationError, parse_go_duration
from ansible_operator.errors import BadAnnotation

PREFIX = "ansible.sdk.operatorframework.io/"
RECONCILE_PERIOD = PREFIX + "reconcile-period"
VERBOSITY = PREFIX + "verbosity"
MAX_RUNNER_ARTIFACTS = PREFIX + "max-runner-artifacts"
DRIFT_CHECK_PERIOD = PREFIX + "drift-check-period"
OBSERVE_ONLY = PREFIX + "observe-only"
# What Go's strconv.ParseBool accepts.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


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


def drift_check_period(obj: Mapping[str, Any]) -> float | None:
    """The drift-check-period annotation in seconds, None when absent; BadAnnotation when
    unparsable or negative."""
    raw = _annotations(obj).get(DRIFT_CHECK_PERIOD)
    if raw is None:
        return None
    try:
        period = parse_go_duration(str(raw))
    except DurationError as err:
        raise BadAnnotation(f"Unable to parse drift check period annotation: {err}") from err
    if period < 0:
        raise BadAnnotation(f"Drift check period annotation must not be negative: {raw!r}")
    return period


def observe_only(obj: Mapping[str, Any]) -> bool | None:
    """The observe-only annotation, None when absent; BadAnnotation when not a bool."""
    raw = _annotations(obj).get(OBSERVE_ONLY)
    if raw is None:
        return None
    text = str(raw).strip()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadAnnotation(
        f'Unable to parse observe-only annotation: {raw!r} is not "true" or "false"'
    )
