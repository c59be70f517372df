"""The metrics side of the reconcile contract: what reconcilers and the pool report.

Where it sits: controller/wiring.py builds one `MetricsHooks` over the operator's
Prometheus metrics (observability/metrics.py) and gives it to every reconciler
(contract.RunMetrics: each Ansible run), to the worker pool (contract.ReconcileMetrics:
each reconcile, with the label contract.decide chose) and to the primary watches
(each CR seen or deleted).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ansible_operator.compat.notices import Notice
from ansible_operator.config.watches import Watch
from ansible_operator.controller.contract import run_label
from ansible_operator.observability.metrics import OperatorMetrics, ReconcileLabel, format_gvk
from ansible_operator.runner.base import RunOutcome

__all__ = ["MetricsHooks"]


class MetricsHooks:
    """Adapts what the reconcilers and the worker pool report to the Prometheus metrics
    (contract.RunMetrics and contract.ReconcileMetrics)."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    @staticmethod
    def gvk_of(watch: Watch) -> str:
        return format_gvk(group=watch.gvk.group, version=watch.gvk.version, kind=watch.gvk.kind)

    def run_finished(self, *, gvk: str, outcome: RunOutcome | None, seconds: float) -> None:
        self.metrics.run_finished(gvk=gvk, outcome=run_label(outcome), seconds=seconds)
        if outcome is not RunOutcome.CANCELED:
            self.metrics.reconcile_result(gvk=gvk, succeeded=outcome is RunOutcome.SUCCESSFUL)

    def reconciled(self, *, controller: str, result: ReconcileLabel, seconds: float) -> None:
        self.metrics.reconcile_finished(controller=controller, result=result, seconds=seconds)

    def compat_deprecation(self, watch: Watch, notice: Notice) -> None:
        """A 2.18 behaviour a run relied on (launch/compatlog.py): the deprecations metric."""
        self.metrics.compat_deprecation(gvk=self.gvk_of(watch), what=notice.what)

    def object_seen(self, watch: Watch, event_type: str, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        labels = {
            "name": str(meta.get("name", "")),
            "namespace": str(meta.get("namespace", "")),
            "group": watch.gvk.group,
            "version": watch.gvk.version,
            "kind": watch.gvk.kind,
        }
        if event_type == "DELETED":
            self.metrics.resource_deleted(**labels)
            return
        created = str(meta.get("creationTimestamp") or "")
        try:
            stamp = datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return
        self.metrics.resource_created(**labels, created_at=stamp)
