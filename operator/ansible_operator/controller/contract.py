"""The reconcile contract: what a reconcile is given, what it gives back, what that means.

Where this sits: the analogue of controller-runtime's `pkg/reconcile`. The work
queue (controller/queue.py) holds `Key`s; the worker pool (controller/workers.py)
hands each to the reconciler (controller/reconciler.py), which returns an
`Outcome`; the pool asks `decide()` what the queue does next and which result
the reconcile metric counts, and does both. The sharding gate and the metrics
hooks the reconciler calls are the Protocols below.

An outcome, and what `decide()` makes of it (the first that applies):

* `error`: failed, and not as a final verdict (or the reconcile raised): back off,
  after the error's own `delay` when a RetryLater has one, else after the key's
  exponential backoff; counted as `error`;
* `forget`: the object is gone: drop its backoff, never come back; `success`;
* `terminal`: failed for good and already reported on the CR: drop the backoff and
  come back only at `requeue_after` (the reconcile period) or when the CR changes;
  counted as `error`;
* `requeue_after` > 0: drop the backoff, come back then at RESYNC priority;
  `requeue_after`;
* otherwise: drop the backoff; `success`.

`counted=False` (nothing was reconciled: an observe-only CR) keeps the queue's
decision and counts nothing.

errors.py says which exceptions become which outcome, and where.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ansible_operator.errors import RetryLater
from ansible_operator.kube.client import ResourceInfo
from ansible_operator.observability.metrics import ReconcileLabel, RunLabel
from ansible_operator.runner.base import RunOutcome

__all__ = [
    "Action",
    "Decision",
    "Gate",
    "Key",
    "Outcome",
    "ReconcileMetrics",
    "RunMetrics",
    "decide",
    "run_label",
]


@dataclass(frozen=True, slots=True)
class Key:
    """One custom resource, in the queue of its watched kind."""

    controller: str  # the kind's controller name (Watch.controller_name): queue and metrics label
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.controller} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reconcile of a Key asks for next; see the module docstring."""

    requeue_after: float | None = None  # seconds until the next periodic reconcile
    error: Exception | None = None  # failed, to be retried with backoff
    terminal: Exception | None = None  # failed for good (a Permanent), reported on the CR
    forget: bool = False  # the object is gone
    counted: bool = True  # False: nothing was reconciled, nothing to count


class Action(enum.Enum):
    """What the queue does with a key after its reconcile."""

    FORGET = "forget"  # drop its backoff, do not come back
    RESYNC = "resync"  # drop its backoff; come back after `delay` (if any), RESYNC priority
    BACKOFF = "backoff"  # come back after `delay`, or the key's exponential backoff if None


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    delay: float | None
    label: ReconcileLabel | None  # the reconcile metric's result; None: not counted
    why: str  # for the debug log


def decide(outcome: Outcome) -> Decision:
    """The queue action and the metric label of `outcome`, in one place."""
    decision = _decide(outcome)
    if not outcome.counted:
        return Decision(decision.action, decision.delay, None, decision.why)
    return decision


def _decide(outcome: Outcome) -> Decision:
    if outcome.error is not None:
        error = outcome.error
        asked = error.delay if isinstance(error, RetryLater) else None
        return Decision(Action.BACKOFF, asked, "error", str(error))
    if outcome.forget:
        return Decision(Action.FORGET, None, "success", "gone")
    period = outcome.requeue_after if outcome.requeue_after and outcome.requeue_after > 0 else None
    if outcome.terminal is not None:
        return Decision(
            Action.RESYNC, period, "error", f"not retried until it changes: {outcome.terminal}"
        )
    if period is not None:
        return Decision(Action.RESYNC, period, "requeue_after", "periodic")
    return Decision(Action.RESYNC, None, "success", "done")


_RUN_LABELS: Mapping[RunOutcome, RunLabel] = {
    RunOutcome.SUCCESSFUL: "successful",
    RunOutcome.FAILED: "failed",
    RunOutcome.TIMEOUT: "timeout",
    RunOutcome.CANCELED: "canceled",
    RunOutcome.ERROR: "error",
}


def run_label(outcome: RunOutcome | None) -> RunLabel:
    """The run metric's label of a run's outcome; None: the run could not even start."""
    return "error" if outcome is None else _RUN_LABELS[outcome]


class Gate(Protocol):
    """Sharded mode's gate before a run (controller/sharding/shard.py): given the
    fresh CR, the object to run (claimed if need be) or the Outcome that ends this
    reconcile without a run."""

    def __call__(
        self, key: Key, res: ResourceInfo, obj: dict[str, Any]
    ) -> dict[str, Any] | Outcome: ...


class RunMetrics(Protocol):
    """What the reconciler reports of each Ansible run (the metrics implement it)."""

    def run_finished(self, *, gvk: str, outcome: RunOutcome | None, seconds: float) -> None:
        """`outcome` None: the run could not start."""


class ReconcileMetrics(Protocol):
    """What the worker pool reports of each reconcile (the metrics implement it)."""

    def reconciled(self, *, controller: str, result: ReconcileLabel, seconds: float) -> None: ...
