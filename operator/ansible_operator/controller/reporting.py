"""What one reconcile tells about its CR: status conditions and Kubernetes Events.

Called only by controller.reconciler, at each step of the flow its docstring
lists: before a run (Running), after it (Successful / Failed / Finalized), and
when a reconcile stops before or instead of a run (a bad annotation, a run
that could not be set up). The conditions come from status.transitions and
are written with controller.statuswrite; Events go to an `EventSink`
(observability.eventrecorder.EventRecorder in the operator,
kube.fakekube.FakeEvents in tests). The Event reasons are listed in docs/observability.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ansible_operator.controller import statuswrite
from ansible_operator.controller.restartrule import DIGEST_KEY
from ansible_operator.errors import OperatorError
from ansible_operator.kube.client import KubeApi, ResourceInfo
from ansible_operator.observability.eventrecorder import ObjectRef
from ansible_operator.observability.logging import ObjectLogger
from ansible_operator.runner.base import RunResult, Stats
from ansible_operator.status import transitions
from ansible_operator.status.conditions import AnsibleResult

# Event reasons (docs/observability.md lists them with their messages).
RUNNING: Final = "Running"
SUCCESSFUL: Final = "Successful"
FAILED: Final = "Failed"
FINALIZED: Final = "Finalized"
RECONCILE_ERROR: Final = "ReconcileError"
NO_STATUS_SUBRESOURCE: Final = "StatusSubresourceMissing"


class EventSink(Protocol):
    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None: ...


def ansible_result(result: RunResult) -> AnsibleResult:
    stats = result.stats or Stats()
    return AnsibleResult(
        ok=stats.ok,
        changed=stats.changed,
        skipped=stats.skipped,
        failures=stats.failures,
        completion=stats.completion,
    )


def failure_message(result: RunResult) -> str:
    """The Failure condition's message after a run that did not succeed."""
    if result.failures:
        return "\n".join(f.message for f in result.failures)
    if result.outcome == "timeout":
        return f"Ansible run timed out after {result.duration:.0f}s"
    tail = result.stdout_tail.strip().splitlines()
    detail = tail[-1] if tail else f"ansible-runner exited with code {result.rc}"
    return f"Ansible run did not complete: {detail}"


def failure_event(result: RunResult) -> str:
    if result.failures:
        first = result.failures[0]
        return f'Task "{first.task}" failed: {first.message}'
    return failure_message(result)


def success_event(result: RunResult) -> str:
    s = result.stats or Stats()
    return f"Ansible run succeeded: ok={s.ok} changed={s.changed} skipped={s.skipped}"


def not_started_message(err: BaseException) -> str:
    """The Failure condition's and the Event's text when a run could not be set up."""
    return f"Ansible run could not start: {err}"


@dataclass(frozen=True)
class Reporter:
    """Status writes and Events for the CRs of one watch."""

    kube: KubeApi
    events: EventSink
    now: Callable[[], datetime.datetime]

    def event(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        self.events.record(ObjectRef.from_object(obj), type=type, reason=reason, message=message)

    def running(self, res: ResourceInfo, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Write Running before a run: the object as stored, or None if it is gone."""
        return statuswrite.write(
            self.kube, res, obj, lambda s: transitions.running(s, now=self.now())
        )

    def succeeded(
        self,
        res: ResourceInfo,
        obj: Mapping[str, Any],
        result: RunResult,
        *,
        record: str | None = None,
    ) -> dict[str, Any] | None:
        """Write Successful; `record` (controller/restartrule.py) goes with it."""
        stats = ansible_result(result)

        def change(status: object) -> dict[str, Any]:
            written = transitions.succeeded(status, result=stats, now=self.now())
            if record is not None:
                written[DIGEST_KEY] = record
            return written

        return statuswrite.write(self.kube, res, obj, change)

    def run_failed(
        self, res: ResourceInfo | None, obj: Mapping[str, Any], result: RunResult
    ) -> str:
        """A run that ended badly: the Warning Event, and the Failure condition when `res`
        (the status is managed). Returns the condition's message."""
        message = failure_message(result)
        self.event(obj, type="Warning", reason=FAILED, message=failure_event(result))
        if res is None:
            return message
        if result.failures:
            stats = ansible_result(result)
            messages = [f.message for f in result.failures]
            statuswrite.write(
                self.kube,
                res,
                obj,
                lambda s: transitions.failed(s, messages=messages, result=stats, now=self.now()),
            )
        else:
            self._errored(res, obj, message)
        return message

    def stopped(
        self,
        res: ResourceInfo | None,
        obj: Mapping[str, Any],
        message: str,
        *,
        reason: str,
        log: ObjectLogger,
    ) -> None:
        """A reconcile that could not run Ansible: log, Warning Event, and (when `res`, the
        status is managed) Failure with `message`. Never raises an OperatorError: a status
        write that fails is logged, since the Event already says what happened."""
        log.error("%s", message)
        self.event(obj, type="Warning", reason=reason, message=message)
        if res is None:
            return
        try:
            self._errored(res, obj, message)
        except OperatorError as err:
            log.warning("could not write the error to status: %s", err)

    def _errored(self, res: ResourceInfo, obj: Mapping[str, Any], message: str) -> None:
        statuswrite.write(
            self.kube, res, obj, lambda s: transitions.errored(s, message=message, now=self.now())
        )
