"""observability: what the operator tells people about itself and the resources it manages.

The `run` command sets it up before anything is watched: `setup_logging` from
the zap flags, an `OperatorMetrics` served by a `MetricsServer` on
`--metrics-bind-address`, a `HealthServer` on `--health-probe-bind-address`,
and an `EventRecorder` that posts through kube (its `EventPoster` Protocol). The
controller then reports into them: the reconciler logs through `object_logger`,
reports reconciles and Ansible runs to `OperatorMetrics`, and records
Kubernetes Events; the work queue reports through `OperatorMetrics` as its
`QueueObserver`.

    logging        zap-compatible JSON/console lines on stderr, per-object fields
    metrics        the Go operator's Prometheus metrics (same names) plus run durations
    health         /healthz and /readyz, and the HTTP plumbing both servers share
    serving        the servers' loop (and the API proxy's): asleep until a client or stop()
    eventrecorder  core/v1 Events about CRs: non-blocking, aggregated, rate-limited
    usermetrics    the user metrics API roles call with osdk_metric (port 5050)
    usermetricsapi its requests, decoded as the Go operator's encoding/json does

Nothing here runs on kopf's asyncio loop: servers and the Event poster are
daemon threads, so a busy loop never delays a probe or a scrape.
docs/observability.md is the user-facing description.
"""

from ansible_operator.observability.eventrecorder import (
    EventPoster,
    EventRecorder,
    EventType,
    ObjectRef,
    RecorderStats,
)
from ansible_operator.observability.health import BindError, HealthServer
from ansible_operator.observability.logging import (
    ObjectLogger,
    object_logger,
    parse_log_level,
    setup_logging,
)
from ansible_operator.observability.metrics import (
    MetricsServer,
    OperatorMetrics,
    ReconcileLabel,
    RunLabel,
    format_gvk,
)

__all__ = [
    "BindError",
    "EventPoster",
    "EventRecorder",
    "EventType",
    "HealthServer",
    "MetricsServer",
    "ObjectLogger",
    "ObjectRef",
    "OperatorMetrics",
    "ReconcileLabel",
    "RecorderStats",
    "RunLabel",
    "format_gvk",
    "object_logger",
    "parse_log_level",
    "setup_logging",
]
