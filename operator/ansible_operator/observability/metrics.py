"""Prometheus metrics of the operator, and the HTTP server that exposes them.

Where this sits: the `run` command builds one `OperatorMetrics`, hands it to
the controller and starts a `MetricsServer` on `--metrics-bind-address`. The
reconciler reports what happened (`reconcile_finished`, `run_finished`,
`reconcile_result`, `resource_*`); the work queue reports through the
`QueueObserver` methods (`added`, `depth`, ...); leader election reports
`leader_status`. Prometheus scrapes `GET /metrics`.

Names, types and labels are the Go operator's (controller-runtime v0.21,
operator-lib, ansible-operator-plugins v1.42) so dashboards and alerts keep
working; `docs/observability.md` lists where and why we differ.

`MetricsServer` is an `observability.health.EndpointServer`, the plumbing both
servers share: a stdlib threaded HTTP server in a daemon thread, never on
kopf's asyncio loop.
"""

from __future__ import annotations

import copy
import gzip
from collections.abc import Iterable, Iterator
from typing import Final, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ansible_operator.observability.health import (
    BindError,
    EndpointServer,
    Request,
    Response,
    not_found,
)

__all__ = [
    "BindError",
    "MetricsServer",
    "OperatorMetrics",
    "ReconcileLabel",
    "RunLabel",
    "format_gvk",
]

ReconcileLabel = Literal["success", "error", "requeue", "requeue_after"]
RunLabel = Literal["successful", "failed", "timeout", "canceled", "error"]
_RECONCILE_OUTCOMES: Final = frozenset(get_args(ReconcileLabel))
_RUN_OUTCOMES: Final = frozenset(get_args(RunLabel))

# client_golang's DefBuckets, which the Go operator uses for
# ansible_operator_reconciles, extended upwards: we observe the whole Ansible
# run (the reference only timed process start-up), and runs take minutes.
_RECONCILES_BUCKETS: Final = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    *(30.0, 60.0, 120.0, 300.0, 600.0, 1800.0),
)
# controller-runtime's buckets for controller_runtime_reconcile_time_seconds,
# kept exactly so quantiles compare with other controller-runtime operators.
_RECONCILE_TIME_BUCKETS: Final = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5),
    *(5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0),
)
# client-go's workqueue buckets: 10ns to 1000s, factor 10.
_WORKQUEUE_BUCKETS: Final = tuple(1e-8 * 10**exponent for exponent in range(12))
# Ours: an Ansible run takes from half a second (a no-op role) to many minutes.
_RUN_BUCKETS: Final = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1200, 1800)


def format_gvk(*, group: str, version: str, kind: str) -> str:
    """The `GVK` label value, as Go's GroupVersionKind.String() prints it.

    >>> format_gvk(group="cache.example.com", version="v1alpha1", kind="Memcached")
    'cache.example.com/v1alpha1, Kind=Memcached'
    """
    return f"{group}/{version}, Kind={kind}"


class OperatorMetrics:
    """Every metric the operator exposes, in its own registry.

    Each instance owns a fresh `CollectorRegistry` unless one is given, so
    tests can build as many as they like. All methods are thread-safe and
    cheap; callers on the asyncio loop may call them directly.
    """

    def __init__(
        self, *, registry: CollectorRegistry | None = None, runtime_collectors: bool = True
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        if runtime_collectors:
            # The Go binary exposes process_* and go_*; process_* keep their names here.
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)
        self._init_reference_metrics(reg)
        self._init_controller_metrics(reg)
        self._init_workqueue_metrics(reg)
        self._run_duration = Histogram(
            "ansible_operator_run_duration_seconds",
            "Duration of whole Ansible runs (start of ansible-runner to its final event).",
            ["gvk", "outcome"],
            buckets=_RUN_BUCKETS,
            registry=reg,
        )
        self._run_failures = Counter(
            "ansible_operator_run_failures",
            "Ansible runs that did not end successfully (failed, timed out, canceled, error).",
            ["gvk"],
            registry=reg,
        )
        # Counter appends _total: ansible_operator_compat_deprecations_total.
        self._compat = Counter(
            "ansible_operator_compat_deprecations",
            "ansible-core 2.18 behaviours that runs relied on, once per run and task: "
            "restored by the 2.18 compatibility mode, or warned of by ansible-core 2.18 "
            "(docs/porting.md).",
            ["gvk", "what"],
            registry=reg,
        )
        self._drifted = Gauge(
            "ansible_operator_drifted_resources",
            "Custom resources whose last drift check found drift (docs/plan.md).",
            ["GVK"],
            registry=reg,
        )
        self._leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=reg,
        )

    def _init_reference_metrics(self, reg: CollectorRegistry) -> None:
        """The Go ansible-operator's own series, with its names and types."""
        self._build_info = Gauge(
            "ansible_operator_build_info",
            "Build information for the ansible-operator binary",
            ["commit", "version"],
            registry=reg,
        )
        # A Gauge only ever incremented: the reference's type, kept for dashboards.
        self._reconcile_result = Gauge(
            "ansible_operator_reconcile_result",
            "Gauge of reconciles and their results.",
            ["GVK", "result"],
            registry=reg,
        )
        self._reconciles = Histogram(
            "ansible_operator_reconciles",
            "How long in seconds a reconcile takes.",
            ["GVK"],
            buckets=_RECONCILES_BUCKETS,
            registry=reg,
        )
        self._created_at = Gauge(
            "resource_created_at_seconds",
            "Timestamp at which a resource was created",
            ["name", "namespace", "group", "version", "kind"],
            registry=reg,
        )

    def _init_controller_metrics(self, reg: CollectorRegistry) -> None:
        self._reconcile_total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=reg,
        )
        self._reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=reg,
        )
        self._reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_TIME_BUCKETS,
            registry=reg,
        )
        self._max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=reg,
        )
        self._active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=reg,
        )

    def _init_workqueue_metrics(self, reg: CollectorRegistry) -> None:
        # controller-runtime labels every workqueue series with both `name` and
        # `controller` (the same value); dashboards select on either.
        labels = ["name", "controller"]
        self._depth = Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=reg)
        self._adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", labels, registry=reg
        )
        self._queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            buckets=_WORKQUEUE_BUCKETS,
            registry=reg,
        )
        self._work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            buckets=_WORKQUEUE_BUCKETS,
            registry=reg,
        )
        self._retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            labels,
            registry=reg,
        )

    # --- reported by the run command and the controller -------------------------------

    def set_build_info(self, *, version: str, commit: str) -> None:
        """`ansible_operator_build_info{commit,version} 1`; a second call replaces the first."""
        self._build_info.clear()
        self._build_info.labels(commit=commit, version=version).set(1)

    def register_controller(
        self, *, controller: str, gvk: str, max_concurrent_reconciles: int
    ) -> None:
        """A controller for one watched kind started.

        Sets `controller_runtime_max_concurrent_reconciles` and, as
        controller-runtime does, creates the per-controller series at zero so
        `rate()` and `increase()` see the first reconcile.
        """
        self._max_concurrent.labels(controller=controller).set(max_concurrent_reconciles)
        self._active_workers.labels(controller=controller).set(0)
        for result in sorted(_RECONCILE_OUTCOMES):
            self._reconcile_total.labels(controller=controller, result=result)
        self._reconcile_errors.labels(controller=controller)
        self._run_failures.labels(gvk=gvk)

    def reconcile_finished(
        self, *, controller: str, result: ReconcileLabel, seconds: float
    ) -> None:
        """One reconcile returned: controller-runtime's total/errors/time series.

        `result`: "error" when it raised or asked for backoff, "requeue" for an
        immediate requeue, "requeue_after" for a delayed one (the reconcile
        period counts), "success" otherwise.
        """
        if result not in _RECONCILE_OUTCOMES:
            raise ValueError(
                f"reconcile result {result!r}: expected one of {_sorted(_RECONCILE_OUTCOMES)}"
            )
        self._reconcile_total.labels(controller=controller, result=result).inc()
        if result == "error":
            self._reconcile_errors.labels(controller=controller).inc()
        self._reconcile_time.labels(controller=controller).observe(seconds)

    def reconcile_result(self, *, gvk: str, succeeded: bool) -> None:
        """`ansible_operator_reconcile_result`, counted where the Go operator counts it.

        That is: when it writes the Successful condition (succeeded) or a
        Failure condition (failed), including failures before any run.
        """
        self._reconcile_result.labels(GVK=gvk, result="succeeded" if succeeded else "failed").inc()

    def run_finished(self, *, gvk: str, outcome: RunLabel, seconds: float) -> None:
        """One Ansible run ended; `seconds` spans the whole run, not just its start-up."""
        if outcome not in _RUN_OUTCOMES:
            raise ValueError(f"run outcome {outcome!r}: expected one of {_sorted(_RUN_OUTCOMES)}")
        self._reconciles.labels(GVK=gvk).observe(seconds)
        self._run_duration.labels(gvk=gvk, outcome=outcome).observe(seconds)
        if outcome != "successful":
            self._run_failures.labels(gvk=gvk).inc()

    def compat_deprecation(self, *, gvk: str, what: str) -> None:
        """A run relied on a 2.18 behaviour (`what`: one of compat.notices.WHATS)."""
        self._compat.labels(gvk=gvk, what=what).inc()

    def resource_created(
        self, *, name: str, namespace: str, group: str, version: str, kind: str, created_at: float
    ) -> None:
        """A primary CR was seen (create or update): its creationTimestamp, in Unix seconds."""
        self._created_at.labels(
            name=name, namespace=namespace, group=group, version=version, kind=kind
        ).set(created_at)

    resource_updated = resource_created

    def resource_deleted(
        self, *, name: str, namespace: str, group: str, version: str, kind: str
    ) -> None:
        """A primary CR is gone: drop its series so deleted objects do not linger."""
        try:
            self._created_at.remove(name, namespace, group, version, kind)
        except KeyError:
            return  # never seen (e.g. deleted before we started): nothing to drop

    def drifted_resources(self, *, gvk: str, count: int) -> None:
        """`ansible_operator_drifted_resources`: set after every drift check of the kind."""
        self._drifted.labels(GVK=gvk).set(count)

    def leader_status(self, *, name: str, leading: bool) -> None:
        """`leader_election_master_status{name}`: 1 while we hold lease `name`, else 0."""
        self._leader.labels(name=name).set(1 if leading else 0)

    # --- controller.queueobserver.QueueObserver; `queue` is the controller name -------------

    def added(self, queue: str) -> None:
        self._adds.labels(name=queue, controller=queue).inc()

    def depth(self, queue: str, items: int) -> None:
        self._depth.labels(name=queue, controller=queue).set(items)

    def queued(self, queue: str, seconds: float) -> None:
        self._queue_duration.labels(name=queue, controller=queue).observe(seconds)

    def worked(self, queue: str, seconds: float) -> None:
        self._work_duration.labels(name=queue, controller=queue).observe(seconds)

    def retried(self, queue: str) -> None:
        self._retries.labels(name=queue, controller=queue).inc()

    def active(self, queue: str, workers: int) -> None:
        self._active_workers.labels(controller=queue).set(workers)

    # --- exposition --------------------------------------------------------------------

    def render(self) -> bytes:
        """All metrics in the Prometheus text format 0.0.4, as the Go operator serves them."""
        return bytes(generate_latest(_WithoutCreated(self.registry)))


class _WithoutCreated:
    """A view of a registry without the `_created` series prometheus_client adds.

    client_golang emits no such series; dropping them here (instead of with
    prometheus_client's process-wide switch) leaves other registries alone.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            created = f"{family.name}_created"
            trimmed = copy.copy(family)
            trimmed.samples = [sample for sample in family.samples if sample.name != created]
            yield trimmed


def _sorted(values: Iterable[str]) -> str:
    return ", ".join(sorted(values))


class MetricsServer(EndpointServer):
    """`GET /metrics` on `--metrics-bind-address` (":8443"; "0" disables it).

    Plain HTTP; compressed when the scraper accepts gzip, as client_golang does.
    """

    def __init__(self, metrics: OperatorMetrics, *, bind: str) -> None:
        self._metrics = metrics
        super().__init__(
            bind=bind, what="metrics server", flag="--metrics-bind-address", handler=self._serve
        )

    def _serve(self, request: Request) -> Response:
        if request.path != "/metrics":
            return not_found()
        body = self._metrics.render()
        headers: dict[str, str] = {}
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return Response(200, body, content_type=CONTENT_TYPE_PLAIN_0_0_4, headers=headers)
