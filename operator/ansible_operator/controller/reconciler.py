"""One reconcile of one custom resource: read it, run its role or playbook, report.

Called by a `WorkerPool` worker thread (controller.workers) with a queue Key;
returns an `Outcome` that tells the queue when to come back. The steps follow
the Go operator's reconcile (spec §5.2) so roles and users see the same thing:

1. live GET of the CR; gone → clean up its run directory, forget it; in
   sharded mode the gate then decides whether this replica runs it
   (controller.sharding.shard);
2. the reconcile-period and drift annotations (a bad value → Failure status
   and a Warning Event, then retried with backoff); an observe-only CR
   (controller.driftsettings, ours) ends here: no run, no finalizer run (a
   deleting one loses our finalizer so it can go), no reconcile metrics;
   controller.drift checks it instead;
3. finalizer: skip a deleting CR we hold no finalizer on; add ours before the
   first run;
4. status Running (when the watch manages status), whose response is the
   object the role sees as `_<group>_<kind>`;
5. the Ansible run (finalizer role/playbook when the CR is being deleted); a
   run that cannot be set up (extra vars, runner directory, inventory,
   --ansible-args: errors.Permanent, or an OSError) ends here with a Failure
   condition and a Warning Event, its token revoked and kubeconfig removed;
6. live GET again; on a successful finalizer run remove the finalizer;
7. status Successful / Failure, Kubernetes Events, metrics, and the next
   reconcile time (requeue_after from the role, else the reconcile period).

Status writes and Events are controller.reporting's. What the returned
Outcome's error makes the queue do is controller.workers' (see errors.py):
a Permanent error is reported once and waits for a change of the CR or its
reconcile period; a failed run is retried with backoff.

Improvements over the reference: a run error, timeout or set-up failure is
written to status (not left at "Running"), a CRD without a status
subresource gets an Event instead of an endless error loop, and a run that
started never leaves the status or finalizer half-applied.
"""

from __future__ import annotations

import datetime
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ansible_operator.compat.notices import Notice, RunNotes
from ansible_operator.config.watches import Watch
from ansible_operator.controller import annotations as cr_annotations
from ansible_operator.controller import finalizers, reporting
from ansible_operator.controller.compatlog import observing
from ansible_operator.controller.driftsettings import settings_for
from ansible_operator.controller.queue import Key
from ansible_operator.controller.reporting import EventSink, Reporter
from ansible_operator.controller.runaccess import RunAccess
from ansible_operator.controller.tasklog import task_logger
from ansible_operator.controller.watching import controller_name
from ansible_operator.controller.workers import Outcome
from ansible_operator.errors import Permanent, RetryLater
from ansible_operator.kube.client import KubeApi, ResourceInfo
from ansible_operator.observability.logging import ObjectLogger, object_logger
from ansible_operator.runner import inputdir
from ansible_operator.runner.base import Runner, RunRequest, RunResult
from ansible_operator.runner.extravars import build_extravars

log = logging.getLogger("ansible_operator.reconciler")

#: Sharded mode's gate (controller.sharding.shard.Shard.gate): given the fresh
#: CR, the object to run (claimed if need be) or the Outcome that ends the
#: reconcile without a run.
Gate = Callable[[Key, ResourceInfo, dict[str, Any]], "dict[str, Any] | Outcome"]

#: After a CR was deleted while its run was in progress, come back this soon
#: so the finalizer runs (the reference's fix for SDK #4909 uses 5 s).
DELETED_DURING_RUN_REQUEUE = 1.0


class RunFailed(RetryLater):
    """The role or playbook failed; the queue retries with backoff."""


__all__ = [
    "EventSink",
    "Gate",
    "ReconcileHooks",
    "ReconcileSettings",
    "Reconciler",
    "RunFailed",
    "build_run_request",
]


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
    # Told each 2.18 behaviour a run relied on (controller.compatlog): the metric.
    count_notice: Callable[[Watch, Notice], None] | None = None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class Reconciler:
    def __init__(
        self,
        *,
        watch: Watch,
        kube: KubeApi,
        runner: Runner,
        settings: ReconcileSettings,
        events: EventSink,
        hooks: ReconcileHooks,
        access: RunAccess,
        cancel: threading.Event,
        now: Callable[[], datetime.datetime] = _now,
        gate: Gate | None = None,
    ) -> None:
        self.watch = watch
        self.gate = gate
        self.kube = kube
        self.runner = runner
        self.settings = settings
        self.hooks = hooks
        self.access = access
        self.cancel = cancel
        self.now = now
        self.report = Reporter(kube=kube, events=events, now=now)
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
        if outcome is None:
            return Outcome()  # observe-only: nothing was reconciled, nothing to count
        if outcome.error is not None:
            result = "error"
        elif outcome.requeue_after:
            result = "requeue_after"
        else:
            result = "success"
        self.hooks.reconciled(watch=self.watch, result=result, seconds=time.monotonic() - started)
        return outcome

    def _reconcile(self, key: Key) -> Outcome | None:
        res = self.resource
        obj = self.kube.get_or_none(res, namespace=key.namespace, name=key.name)
        if obj is None:
            self._forget(key)
            return Outcome(forget=True)
        if self.gate is not None:
            gated = self.gate(key, res, obj)
            if isinstance(gated, Outcome):
                return gated
            obj = gated
        ident = str(uuid.uuid4().int % 10**18)
        logger = object_logger(
            log, namespace=key.namespace, name=key.name, gvk=str(self.watch.gvk), job=ident
        )
        try:
            period = self._period(obj)
            observe_only = settings_for(self.watch, obj).observe_only
        except cr_annotations.BadAnnotation as err:
            managed = self.watch.manage_status and self.resource.has_status
            status_res = self.resource if managed else None
            self.report.stopped(
                status_res, obj, str(err), reason=reporting.RECONCILE_ERROR, log=logger
            )
            # Retried with backoff, as by the Go operator, unlike other permanent
            # errors: fixing only the annotation is no change the watch lets through
            # (unless watchAnnotationsChanges), so waiting for one would wait hours.
            return Outcome(error=RetryLater(str(err)))
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        fin = self.watch.finalizer
        if observe_only:
            self._observe_only(obj, deleting=deleting, log=logger)
            return None
        if deleting and (fin is None or not finalizers.has(obj, fin.name)):
            logger.info("Resource is terminated, skipping reconciliation")
            return Outcome()
        if fin is not None and not deleting and not finalizers.has(obj, fin.name):
            logger.debug("adding finalizer %s", fin.name)
            obj = finalizers.add(self.kube, res, obj, fin.name)
        return self._run_and_report(obj, ident=ident, deleting=deleting, period=period, log=logger)

    def _observe_only(self, obj: dict[str, Any], *, deleting: bool, log: ObjectLogger) -> None:
        """An observe-only CR is never run; a deleting one loses our finalizer unrun.

        Running the finalizer would change the cluster, which observe-only
        promises not to do; keeping the finalizer would make the CR
        undeletable. Its dependents go by their ownerReferences as usual.
        """
        fin = self.watch.finalizer
        if deleting and fin is not None and finalizers.has(obj, fin.name):
            log.info("Observe-only: removing finalizer %s without running it", fin.name)
            finalizers.remove(self.kube, self.resource, obj, fin.name)
            return
        log.debug("Observe-only: not reconciling; drift checks report instead")

    def _period(self, obj: Mapping[str, Any]) -> float:
        from_annotation = cr_annotations.reconcile_period(obj)
        if from_annotation is not None:
            return from_annotation
        return self._default_period()

    def _default_period(self) -> float:
        return float(self.watch.reconcile_period or self.settings.reconcile_period)

    @staticmethod
    def _permanent(err: Permanent, period: float) -> Outcome:
        # Reported already; the queue comes back only with the periodic reconcile.
        return Outcome(error=err, requeue_after=period if period > 0 else None)

    def _forget(self, key: Key) -> None:
        self._forget_dir(namespace=key.namespace, name=key.name)

    def _forget_dir(self, *, namespace: str, name: str) -> None:
        gvk = self.watch.gvk
        inputdir.remove_cr_dir(
            root=self.settings.runner_root,
            group=gvk.group,
            version=gvk.version,
            kind=gvk.kind,
            namespace=namespace,
            name=name,
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
        self.report.event(
            obj,
            type="Warning",
            reason=reporting.NO_STATUS_SUBRESOURCE,
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
            written = self.report.running(self.resource, obj)
            if written is None:
                return Outcome(forget=True)
            obj = written
        started = time.monotonic()
        try:
            result = self._run(obj, ident=ident, deleting=deleting, log=log)
        except (Permanent, OSError) as err:
            self.hooks.run_finished(
                watch=self.watch, outcome="error", seconds=time.monotonic() - started
            )
            return self._not_started(obj, err, managed=managed, period=period, log=log)
        self.hooks.run_finished(watch=self.watch, outcome=result.outcome, seconds=result.duration)
        return self._after_run(
            obj, result, deleting=deleting, managed=managed, period=period, log=log
        )

    def _not_started(
        self,
        obj: dict[str, Any],
        err: Permanent | OSError,
        *,
        managed: bool,
        period: float,
        log: ObjectLogger,
    ) -> Outcome:
        # Without this the CR would stay "Running" with nothing saying why.
        message = reporting.not_started_message(err)
        res = self.resource if managed else None
        self.report.stopped(res, obj, message, reason=reporting.FAILED, log=log)
        if isinstance(err, Permanent):
            return self._permanent(err, period)
        # An OSError (disk full, /tmp unwritable) may pass: retry with backoff.
        return Outcome(error=RetryLater(message))

    def _run(
        self, obj: dict[str, Any], *, ident: str, deleting: bool, log: ObjectLogger
    ) -> RunResult:
        """Prepare and perform the run with its own token; both are gone when this returns.

        Raises errors.Permanent (RunSetupError, or an invalid CR) or OSError when
        the run could not be set up.
        """
        notes = RunNotes()  # what the proxy did for the 2.18 compatibility mode
        controller = controller_name(self.watch)
        with self.access.kubeconfig_for(obj, controller=controller, notes=notes) as kubeconfig:
            request = self._request(
                obj, ident=ident, deleting=deleting, kubeconfig=kubeconfig, log=log, notes=notes
            )
            what = "finalizer" if deleting else ("playbook" if request.playbook else "role")
            path = request.playbook or request.role
            self.report.event(
                obj, type="Normal", reason=reporting.RUNNING, message=f"Running {what} {path}"
            )
            return self.runner.run(request)

    def _request(
        self,
        obj: Mapping[str, Any],
        *,
        ident: str,
        deleting: bool,
        kubeconfig: Path,
        log: ObjectLogger,
        notes: RunNotes,
    ) -> RunRequest:
        return build_run_request(
            self.watch,
            obj,
            ident=ident,
            deleting=deleting,
            kubeconfig=kubeconfig,
            settings=self.settings,
            cancel=self.cancel,
            log=log,
            notes=notes,
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
        message = self.report.run_failed(self.resource if managed else None, obj, result)
        log.error("Ansible run %s: %s", result.outcome, message)
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
        self.report.event(
            obj, type="Normal", reason=reporting.FINALIZED, message="Finalizer run succeeded"
        )
        # The CR goes now: its directory (extra vars = its content) goes with it, not
        # only when a later reconcile finds it gone, which a kill right now would skip.
        self._forget_dir(namespace=meta.get("namespace", ""), name=meta["name"])
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
            fresh = self.report.succeeded(self.resource, obj, result)
        elif fin is not None:
            fresh = self.kube.get_or_none(
                self.resource, namespace=meta.get("namespace", ""), name=meta["name"]
            )
        if fresh is None:
            return Outcome(forget=True)
        self.report.event(
            fresh,
            type="Normal",
            reason=reporting.SUCCESSFUL,
            message=reporting.success_event(result),
        )
        if fresh["metadata"].get("deletionTimestamp") and fin is not None:
            return Outcome(requeue_after=DELETED_DURING_RUN_REQUEUE)
        requeue = result.requeue_after if result.requeue_after is not None else period
        return Outcome(requeue_after=requeue if requeue > 0 else None)


def build_run_request(
    watch: Watch,
    obj: Mapping[str, Any],
    *,
    ident: str,
    deleting: bool,
    kubeconfig: Path,
    settings: ReconcileSettings,
    cancel: threading.Event,
    log: ObjectLogger,
    notes: RunNotes | None = None,
) -> RunRequest:
    """The RunRequest of one reconcile (or finalizer run when `deleting`) of `obj`.

    Shared by the reconciler and `ansible-operator plan` (ansible_operator.plan),
    so a plan runs with exactly the extra vars, role or playbook, verbosity and
    Ansible arguments a reconcile would. With `notes` (the run's, also given to its
    proxy Owner) the run's 2.18 behaviours are logged and counted (controller.compatlog).
    """
    gvk, meta = watch.gvk, obj["metadata"]
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
    on_event = task_logger(settings.ansible_log_events, log)
    if notes is not None:
        counter = settings.count_notice
        count = functools.partial(counter, watch) if counter is not None else None
        on_event = observing(on_event, notes=notes, log=log, count=count)
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
        ansible_args=settings.ansible_args,
        kubeconfig=kubeconfig,
        timeout=settings.run_timeout,
        cancel=cancel,
        runner_root=settings.runner_root,
        on_event=on_event,
    )
