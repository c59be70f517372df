"""Whether and how often a CR gets drift checks, and whether its role may run for real.

Called by the reconciler before every run (an observe-only CR is not run),
by controller.driftchecks's scheduler on every watch event of a CR (when to check
it next) and by controller.watching (a change of these annotations triggers
a reconcile even without `watchAnnotationsChanges`). The watch's keys
(`driftCheckPeriod`, `observeOnly`, config.watches) give the defaults; the
CR's annotations (launch.crannotations) win over them. docs/plan.md,
"Drift checks and observe-only", is the user's description.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_operator.config import defaults
from ansible_operator.config.watches import Watch
from ansible_operator.launch import crannotations as cr_annotations


@dataclass(frozen=True, slots=True)
class DriftSettings:
    period: float  # seconds between drift checks; 0: no drift checks
    observe_only: bool  # never run the role for real, only check drift


def settings_for(watch: Watch, obj: Mapping[str, Any]) -> DriftSettings:
    """The CR's drift settings; raises annotations.BadAnnotation for a bad annotation."""
    observe_only = cr_annotations.observe_only(obj)
    if observe_only is None:
        observe_only = watch.observe_only
    period = cr_annotations.drift_check_period(obj)
    if period is None:
        # The watch's period; an observe-only watch has its default period already.
        period = watch.drift_check_period
    if not period and observe_only:
        period = defaults.OBSERVE_ONLY_DRIFT_CHECK_PERIOD
    return DriftSettings(period=period, observe_only=observe_only)


def annotations_state(obj: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The raw values of the two annotations, for noticing that one changed."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    period = annotations.get(cr_annotations.DRIFT_CHECK_PERIOD)
    observe = annotations.get(cr_annotations.OBSERVE_ONLY)
    return (
        None if period is None else str(period),
        None if observe is None else str(observe),
    )
