"""One reconcile of one custom resource: read it, run its role or playbook, report.

Called by a `WorkerPool` worker thread (controller.workers) with a queue Key;
returns an `Outcome` that tells the queue when to come back. The steps follow
the Go operator's reconcile (spec §5.2) so roles and users see the same thing:

1. live GET of the CR; gone → clean up its run directory, forget it;
2. the reconcile-period annotation (a bad value → Failure status, backoff);
3. finalizer: skip a deleting CR we hold no finalizer on; add ours before the
   first run;
4. status Running (when the watch manages status), whose response is the
   object the role sees as `_<group>_<kind>`;
5. the Ansible run (finalizer role/playbook when the CR is being deleted);
6. live GET again; on a successful finalizer run remove the finalizer;
7. status Successful / Failure, Kubernetes Events, metrics, and the next
   reconcile time (requeue_after from the role, else the reconcile period).

Improvements over the reference: a run error or timeout is written to status
(not left at "Running"), a CRD without a status subresource gets an Event
instead of an endless error loop, and a run that started never leaves the
status or finalizer half-applied.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ansible_operator.config.watches import Watch
from ansible_operator.controller import annotations as cr_annotations
from ansible_operator.controller import finalizers, statuswrite
from ansible_operator.controller.queue import Key
from ansible_operator.controller.runaccess import RunAccess
from ansible_operator.controller.tasklog import task_logger
from ansible_operator.controller.watching import controller_name
from ansible_operator.controller.workers import Outcome
from ansible_operator.errors import OperatorError, RetryLater
from ansible_operator.kube.client import Kube, ResourceInfo
from ansible_operator.observability.events import ObjectRef
from ansible_operator.observability.logging import ObjectLogger, object_logger
from ansible_operator.runner import inputdir
from ansible_operator.runner.base import Runner, RunRequest, RunResult, Stats
from ansible_operator.runner.extravars import build_extravars
from ansible_operator.status import transitions
from ansible_operator.status.conditions import AnsibleResult

log = logging.getLogger("ansible_operator.reconciler")

#: After a CR was deleted while its run was in progress, come back this soon
#: so the finalizer runs (the reference's fix for SDK #4909 uses 5 s).
DELETED_DURING_RUN_REQUEUE = 1.0


class RunFailed(RetryLater):
    """The role or playbook failed; the queue retries with backoff."""


class EventSink(Protocol):
    def record(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None: ...


class ReconcileHooks(Protocol):
    """What the reconciler reports for metrics (observability implements it)."""

    def run_finished(self, *, watch: Watch, outcome: str, seconds: float) -> None: ...

    def reconciled(self, *, watch: Watch, result: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class ReconcileSettings:
    """The `run` flags a reconcile needs (defaults live in config.defaults)."""

    reconcile_period: float
    ansible_args: str
    ansible_log_events: str
    runner_root: Path
    run_timeout: float | None


def _ref(obj: Mapping[str, Any]) -> ObjectRef:
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Reconciler:
    def __init__(
        self,
        *,
        watch: Watch,
        kube: Kube,
        runner: Runner,
        settings: ReconcileSettings,
        events: EventSink,
        hooks: ReconcileHooks,
        access: RunAccess,
        cancel: threading.Event,
        now: Callable[[], datetime.datetime] = _now,
    ) -> None:
        self.watch = watch
        self.kube = kube
        self.runner = runner
        self.settings = settings
        self.events = events
        self.hooks = hooks
        self.access = access
        self.cancel = cancel
        self.now = now
        self._resource: ResourceInfo | None = None
        self._warned_no_status = False

    @property
    def resource(self) -> ResourceInfo:
        if self._resource is None:
            gvk = self.watch.gvk
            self._resource = self.kube.resource(group=gvk.group, version=gvk.version, kind=gvk.kind)
        return self._resource

    # -- entry point ---------------------------------------------------------------

    def reconcile(self, key: Key) -> Outcome:
        started = time.monotonic()
        outcome = self._reconcile(key)
        if outcome.error is not None:
            result = "error"
        elif outcome.requeue_after:
            result = "requeue_after"
        else:
            result = "success"
        self.hooks.reconciled(watch=self.watch, result=result, seconds=time.monotonic() - started)
        return outcome

    def _reconcile(self, key: Key) -> Outcome:
        res = self.resource
        obj = self.kube.get_or_none(res, namespace=key.namespace, name=key.name)
        if obj is None:
            self._forget(key)
            return Outcome(forget=True)
        ident = str(uuid.uuid4().int % 10**18)
        logger = object_logger(
            log, namespace=key.namespace, name=key.name, gvk=str(self.watch.gvk), job=ident
        )
        try:
            period = self._period(obj)
        except cr_annotations.BadAnnotation as err:
            self._error(obj, str(err), logger)
            return Outcome(error=err)
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        fin = self.watch.finalizer
        if deleting and (fin is None or not finalizers.has(obj, fin.name)):
            logger.info("Resource is terminated, skipping reconciliation")
            return Outcome()
        if fin is not None and not deleting and not finalizers.has(obj, fin.name):
            logger.debug("adding finalizer %s", fin.name)
            obj = finalizers.add(self.kube, res, obj, fin.name)
        return self._run_and_report(obj, ident=ident, deleting=deleting, period=period, log=logger)

    def _period(self, obj: Mapping[str, Any]) -> float:
        from_annotation = cr_annotations.reconcile_period(obj)
        if from_annotation is not None:
            return from_annotation
        return float(self.watch.reconcile_period or self.settings.reconcile_period)

    def _forget(self, key: Key) -> None:
        gvk = self.watch.gvk
        inputdir.remove_cr_dir(
            root=self.settings.runner_root,
            group=gvk.group,
            version=gvk.version,
            kind=gvk.kind,
            namespace=key.namespace,
            name=key.name,
        )

    # -- the run -------------------------------------------------------------------

    def _status_managed(self, obj: Mapping[str, Any], logger: ObjectLogger) -> bool:
        if not self.watch.manage_status:
            return False
        if self.resource.has_status:
            return True
        if not self._warned_no_status:
            self._warned_no_status = True
            logger.warning(
                "the CRD of %s has no status subresource; status is not written", self.watch.gvk
            )
        self.events.record(
            _ref(obj),
            type="Warning",
            reason="StatusSubresourceMissing",
            message="The CRD has no status subresource, so the operator cannot report status. "
            "Add `subresources: {status: {}}` to the CRD or set `manageStatus: false`.",
        )
        return False

    def _run_and_report(
        self,
        obj: dict[str, Any],
        *,
        ident: str,
        deleting: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        managed = self._status_managed(obj, log)
        if managed:
            written = statuswrite.write(
                self.kube, self.resource, obj, lambda s: transitions.running(s, now=self.now())
            )
            if written is None:
                return Outcome(forget=True)
            obj = written
        with self.access.kubeconfig_for(obj, controller=controller_name(self.watch)) as kubeconfig:
            request = self._request(
                obj, ident=ident, deleting=deleting, kubeconfig=kubeconfig, log=log
            )
            what = "finalizer" if deleting else ("playbook" if request.playbook else "role")
            path = request.playbook or request.role
            self.events.record(
                _ref(obj), type="Normal", reason="Running", message=f"Running {what} {path}"
            )
            result = self.runner.run(request)
        self.hooks.run_finished(watch=self.watch, outcome=result.outcome, seconds=result.duration)
        return self._after_run(
            obj, result, deleting=deleting, managed=managed, period=period, log=log
        )

    def _request(
        self,
        obj: Mapping[str, Any],
        *,
        ident: str,
        deleting: bool,
        kubeconfig: Path,
        log: ObjectLogger,
    ) -> RunRequest:
        watch, gvk, meta = self.watch, self.watch.gvk, obj["metadata"]
        playbook, role = watch.playbook, watch.role
        fin = watch.finalizer
        finalizer_vars = None
        if deleting and fin is not None:
            finalizer_vars = fin.vars
            if fin.playbook or fin.role:
                playbook, role = fin.playbook, fin.role
        extravars = build_extravars(
            obj,
            group=gvk.group,
            kind=gvk.kind,
            snake_case=watch.snake_case_parameters,
            mark_unsafe=watch.mark_unsafe,
            watch_vars=watch.vars,
            finalizer_vars=finalizer_vars,
        )
        verbosity = cr_annotations.verbosity(obj, log)
        artifacts = cr_annotations.max_runner_artifacts(obj, log)
        return RunRequest(
            ident=ident,
            group=gvk.group,
            version=gvk.version,
            kind=gvk.kind,
            namespace=str(meta.get("namespace", "")),
            name=str(meta["name"]),
            playbook=playbook,
            role=role if playbook is None else None,
            extravars=extravars,
            verbosity=watch.ansible_verbosity if verbosity is None else verbosity,
            max_artifacts=watch.max_runner_artifacts if artifacts is None else artifacts,
            ansible_args=self.settings.ansible_args,
            kubeconfig=kubeconfig,
            timeout=self.settings.run_timeout,
            cancel=self.cancel,
            runner_root=self.settings.runner_root,
            on_event=task_logger(self.settings.ansible_log_events, log),
        )

    def _after_run(
        self,
        obj: dict[str, Any],
        result: RunResult,
        *,
        deleting: bool,
        managed: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        if result.outcome == "canceled":
            log.info("Ansible run canceled; the CR is reconciled again after restart")
            return Outcome(error=RetryLater("run canceled"))
        if result.outcome == "successful":
            log.info("Ansible-runner exited successfully")
            if deleting and self.watch.finalizer is not None:
                return self._finalized(obj)
            return self._succeeded(obj, result, managed=managed, period=period)
        message = self._failure_message(result)
        log.error("Ansible run %s: %s", result.outcome, message)
        self.events.record(
            _ref(obj), type="Warning", reason="Failed", message=self._event_failure(result)
        )
        if managed:
            self._write_failure(obj, result, message)
        return Outcome(error=RunFailed(message))

    def _finalized(self, obj: dict[str, Any]) -> Outcome:
        fin = self.watch.finalizer
        assert fin is not None
        meta = obj["metadata"]
        fresh = self.kube.get_or_none(
            self.resource, namespace=meta.get("namespace", ""), name=meta["name"]
        )
        if fresh is not None and finalizers.has(fresh, fin.name):
            finalizers.remove(self.kube, self.resource, fresh, fin.name)
        self.events.record(
            _ref(obj), type="Normal", reason="Finalized", message="Finalizer run succeeded"
        )
        return Outcome(forget=True)

    def _succeeded(
        self, obj: dict[str, Any], result: RunResult, *, managed: bool, period: float
    ) -> Outcome:
        # The object from the Running write is current unless something wrote
        # to it during the run; then the status write conflicts and re-reads,
        # so no extra GET is spent on the common path.
        meta = obj["metadata"]
        fin = self.watch.finalizer
        fresh: dict[str, Any] | None = obj
        if managed:
            stats = self._ansible_result(result)
            fresh = statuswrite.write(
                self.kube,
                self.resource,
                obj,
                lambda s: transitions.succeeded(s, result=stats, now=self.now()),
            )
        elif fin is not None:
            fresh = self.kube.get_or_none(
                self.resource, namespace=meta.get("namespace", ""), name=meta["name"]
            )
        if fresh is None:
            return Outcome(forget=True)
        self.events.record(
            _ref(fresh), type="Normal", reason="Successful", message=self._event_success(result)
        )
        if fresh["metadata"].get("deletionTimestamp") and fin is not None:
            return Outcome(requeue_after=DELETED_DURING_RUN_REQUEUE)
        requeue = result.requeue_after if result.requeue_after is not None else period
        return Outcome(requeue_after=requeue if requeue > 0 else None)

    def _write_failure(self, fresh: dict[str, Any], result: RunResult, message: str) -> None:
        if result.failures:
            stats = self._ansible_result(result)
            messages = [f.message for f in result.failures]
            statuswrite.write(
                self.kube,
                self.resource,
                fresh,
                lambda s: transitions.failed(s, messages=messages, result=stats, now=self.now()),
            )
        else:
            statuswrite.write(
                self.kube,
                self.resource,
                fresh,
                lambda s: transitions.errored(s, message=message, now=self.now()),
            )

    # -- helpers -----------------------------------------------------------------

    def _error(self, obj: dict[str, Any], message: str, logger: ObjectLogger) -> None:
        """The reference's markError. Unlike the reference, a watch with `manageStatus: false`
        gets no status write here either: the operator then never writes status."""
        logger.error("%s", message)
        self.events.record(_ref(obj), type="Warning", reason="ReconcileError", message=message)
        if not (self.watch.manage_status and self.resource.has_status):
            return
        try:
            statuswrite.write(
                self.kube,
                self.resource,
                obj,
                lambda s: transitions.errored(s, message=message, now=self.now()),
            )
        except OperatorError as err:
            logger.warning("could not write the error to status: %s", err)

    @staticmethod
    def _ansible_result(result: RunResult) -> AnsibleResult:
        stats = result.stats or Stats()
        return AnsibleResult(
            ok=stats.ok,
            changed=stats.changed,
            skipped=stats.skipped,
            failures=stats.failures,
            completion=stats.completion,
        )

    @staticmethod
    def _failure_message(result: RunResult) -> str:
        if result.failures:
            return "\n".join(f.message for f in result.failures)
        if result.outcome == "timeout":
            return f"Ansible run timed out after {result.duration:.0f}s"
        tail = result.stdout_tail.strip().splitlines()
        detail = tail[-1] if tail else f"ansible-runner exited with code {result.rc}"
        return f"Ansible run did not complete: {detail}"

    @staticmethod
    def _event_failure(result: RunResult) -> str:
        if result.failures:
            first = result.failures[0]
            return f'Task "{first.task}" failed: {first.message}'
        return Reconciler._failure_message(result)

    @staticmethod
    def _event_success(result: RunResult) -> str:
        s = result.stats or Stats()
        return f"Ansible run succeeded: ok={s.ok} changed={s.changed} skipped={s.skipped}"
